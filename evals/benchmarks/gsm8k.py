import json
from pathlib import Path

from ..scoring.extraction import last_number, normalize_number
from .base import Benchmark, Option, Row, Score, chat
from .data import sha256_of

DATA = Path(__file__).resolve().parent.parent / "data" / "gsm8k" / "test.jsonl"
INSTRUCTION = "Solve the problem step by step. End with the final answer on its own line as '#### <number>'."
# lm-eval 0.4.13's gsm8k_cot_zeroshot, the zero-shot gsm8k it sends as one user message to a chat model
# (gsm8k itself is 5-shot completion): its text, its stop strings, and TemplateAPI's default max_gen_toks.
LM_EVAL_PROMPT = "Q: {question}\nA: Let's think step by step."
LM_EVAL_GENERATION = {"temperature": 0, "max_tokens": 256, "stop": ["Q:", "</s>", "<|im_end|>"]}
# instruction_in_user's: a small model that rambles stops within a quick suite's time.
USER_TURN_GENERATION = {"temperature": 0, "max_tokens": 256}


def gsm8k_answer(output: str) -> str | None:
    """The number after the last '####' when there is one, else the last number."""
    if "####" in (output or ""):
        after = output.rsplit("####", 1)[1]
        if (number := last_number(after.split("\n")[0] if after.strip() else after)) is not None:
            return number
    return last_number(output)


class GSM8K(Benchmark):
    name = "gsm8k"
    chance = 0.0
    description = "Grade-school math word problems (test split, 1,319). The answer is the last number, or the one after '####'."
    metric = "accuracy"
    licence = "MIT"
    source = "openai/grade-school-math (test.jsonl, shipped in evals/data/gsm8k)"
    prompt_format = (
        f"Zero-shot chat: system {INSTRUCTION!r}; user: the question (with instruction_in_user: the question, then the instruction, "
        "in the user turn, at most 256 tokens). With lm_eval_prompt, lm-eval's gsm8k_cot_zeroshot: "
        f"user {LM_EVAL_PROMPT!r} alone, stop at {LM_EVAL_GENERATION['stop']!r}, at most {LM_EVAL_GENERATION['max_tokens']} tokens. "
        "Either way the answer is the number after the last '####', else the last number (lm-eval's flexible-extract)."
    )
    generation = {"temperature": 0, "max_tokens": 512}
    options = {
        "lm_eval_prompt": Option(
            False, "Ask as lm-eval's gsm8k_cot_zeroshot does (its prompt, stop strings and 256 tokens), so the score means what lm-eval's does."
        ),
        "instruction_in_user": Option(
            False,
            "Put the instruction after the question in the user turn, with no system message, and stop at 256 tokens: a small chat "
            "model told what to do by a system message often ends its turn at once (SmolLM2-135M answered 7 of 50 rows so, 37 of 50 this way).",
        ),
    }

    def load(self):
        with DATA.open() as lines:
            return [
                Row(id=str(i), input=item["question"], reference=normalize_number(item["answer"].rsplit("####", 1)[1].strip()) or "")
                for i, item in enumerate(map(json.loads, lines))
            ]

    def version(self):
        return f"sha256:{sha256_of(DATA)}"

    def prompt(self, row):
        if self.option("lm_eval_prompt"):
            return [{"role": "user", "content": LM_EVAL_PROMPT.format(question=row.input)}]
        if self.option("instruction_in_user"):
            return [{"role": "user", "content": f"{row.input}\n{INSTRUCTION}"}]
        return chat(INSTRUCTION, row.input)

    def generation_for(self, row):
        if self.option("lm_eval_prompt"):
            return LM_EVAL_GENERATION
        return USER_TURN_GENERATION if self.option("instruction_in_user") else self.generation

    async def score(self, row, output, sandbox=None):
        answer = gsm8k_answer(output)
        return Score(float(answer is not None and answer == row.reference), answer or "")


BENCHMARK = GSM8K()
rows = BENCHMARK.rows
