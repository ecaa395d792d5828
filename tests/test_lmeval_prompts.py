"""The prompts Belvedir sends where it runs lm-eval's tasks, pinned to lm-eval 0.4.13's text for one row each.

Each expected prompt is written out as lm-eval renders it (its task YAML, its
target delimiter, its description), so a change on either side fails here;
bench/crosscheck_lmeval.py checks the same against lm-eval itself.
"""

import asyncio

from evals.benchmarks import arc_challenge, gsm8k, mmlu
from evals.benchmarks.multiple_choice import choice_row
from evals.loglikelihood import Choice

ARC_ROW = choice_row(
    "Mercury_7175875",
    "An astronomer observes that a planet rotates faster after a meteorite impact. Which is the most likely effect of this increase in rotation?",
    [
        "Planetary density will decrease.",
        "Planetary years will become longer.",
        "Planetary days will become shorter.",
        "Planetary gravity will become stronger.",
    ],
    2,
    stem="An astronomer observes that a planet rotates faster after a meteorite impact. Which is the most likely effect of this increase in rotation?",
)


def test_arc_challenge_loglikelihood_is_lm_evals_arc_challenge():
    context = (
        "Question: An astronomer observes that a planet rotates faster after a meteorite impact. "
        "Which is the most likely effect of this increase in rotation?\nAnswer:"
    )
    assert arc_challenge.BENCHMARK.choices(ARC_ROW) == [
        Choice("A", context, " Planetary density will decrease."),
        Choice("B", context, " Planetary years will become longer."),
        Choice("C", context, " Planetary days will become shorter."),
        Choice("D", context, " Planetary gravity will become stronger."),
    ]


def test_mmlu_loglikelihood_is_lm_evals_default_mmlu():
    row = choice_row(
        "high_school_biology/0",
        "A question about high school biology.\n\nIn animal cells, which of the following represents the most likely pathway?",
        ["DNA → RNA", "RNA → DNA", "protein → RNA", "DNA → protein "],
        0,
        {"subject": "high_school_biology", "group": "STEM"},
        stem=" In animal cells, which of the following represents the most likely pathway? ",
    )
    context = (
        "The following are multiple choice questions (with answers) about high school biology.\n\n"
        "In animal cells, which of the following represents the most likely pathway?\nA. DNA → RNA\nB. RNA → DNA\nC. protein → RNA\nD. DNA → protein \nAnswer:"
    )
    assert mmlu.BENCHMARK.choices(row) == [Choice(letter, context, f" {letter}") for letter in "ABCD"]


def test_arc_challenge_generative_with_lm_eval_prompt_is_arc_challenge_chat():
    arc = arc_challenge.BENCHMARK.configured({"lm_eval_prompt": True})
    # The backslash-n pairs are lm-eval's: its YAML string is single-quoted, so they are sent as two characters each.
    assert arc.prompt(ARC_ROW) == [
        {
            "role": "user",
            "content": "Given the following question and four candidate answers (A, B, C and D), choose the best answer.\\n"
            "Question: An astronomer observes that a planet rotates faster after a meteorite impact. Which is the most likely effect of this increase in rotation?\\n"
            "A. Planetary density will decrease.\\nB. Planetary years will become longer.\\nC. Planetary days will become shorter.\\n"
            "D. Planetary gravity will become stronger.\\n"
            'Your response should end with "The best answer is [the_answer_letter]" where the [the_answer_letter] is one of A, B, C or D.',
        },
        {"role": "assistant", "content": "The best answer is"},
    ]
    assert arc.generation_for(ARC_ROW) == {"temperature": 0, "max_tokens": 100, "stop": ["\n\n", "."]}
    # lm-eval's exact_match after remove_whitespace, ignoring case and punctuation: the whole reply is the letter.
    assert [asyncio.run(arc.score(ARC_ROW, reply)).value for reply in (" C", "c!", "The best answer is C", "B")] == [1.0, 1.0, 0.0, 0.0]
    # Without the option, Belvedir's own prompt and letter extraction.
    assert arc_challenge.BENCHMARK.prompt(ARC_ROW)[0]["role"] == "system"
    assert asyncio.run(arc_challenge.BENCHMARK.score(ARC_ROW, "The best answer is C")).value == 1.0


def test_gsm8k_with_lm_eval_prompt_is_gsm8k_cot_zeroshot():
    bench = gsm8k.BENCHMARK.configured({"lm_eval_prompt": True})
    row = gsm8k.Row(id="0", input="Janet has 3 apples and buys 2 more. How many apples does she have?", reference="5")
    assert bench.prompt(row) == [
        {"role": "user", "content": "Q: Janet has 3 apples and buys 2 more. How many apples does she have?\nA: Let's think step by step."}
    ]
    assert bench.generation_for(row) == {"temperature": 0, "max_tokens": 256, "stop": ["Q:", "</s>", "<|im_end|>"]}
    assert asyncio.run(bench.score(row, "She has 3 + 2 = 5 apples. The answer is 5.")).value == 1.0
    assert gsm8k.BENCHMARK.prompt(row)[0] == {"role": "system", "content": gsm8k.INSTRUCTION}
    assert gsm8k.BENCHMARK.generation_for(row) == {"temperature": 0, "max_tokens": 512}
