"""The catalog's benchmarks: their rows and versions, and each scorer against hand-made outputs."""

import asyncio
import hashlib
from collections import Counter

import pytest
from django.conf import settings

from evals import benchmarks
from evals.benchmarks import arc_challenge, hellaswag, math500, mmlu, winogrande
from evals.benchmarks.base import Row
from evals.benchmarks.math_equivalence import gold_of
from evals.benchmarks.multiple_choice import extract_choice


def file_sha256(name: str) -> str:
    return "sha256:" + hashlib.sha256((settings.BENCHMARK_DATA_DIR / name).read_bytes()).hexdigest()


@pytest.mark.parametrize(
    "name, rows",
    [
        ("gsm8k", 1319),
        ("humaneval", 164),
        ("mmlu", 14042),
        ("arc_challenge", 1172),
        ("hellaswag", 10042),
        ("winogrande", 1267),
        ("math500", 500),
        ("bfcl", 3491),
        ("ifbench", 276),
    ],
)
def test_each_benchmark_has_its_rows_with_stable_unique_ids(name, rows):
    benchmark = benchmarks.get(name)
    loaded = benchmark.rows()
    assert len(loaded) == rows
    assert len({row.id for row in loaded}) == rows
    assert all(row.input and row.reference for row in loaded)
    assert benchmark.describe()["version"].startswith("sha256:")


@pytest.mark.parametrize("module", [arc_challenge, hellaswag, winogrande])
def test_a_benchmarks_version_is_its_data_files_sha256(module):
    assert module.BENCHMARK.version() == file_sha256(module.FILE)


def test_mmlu_has_57_subjects_in_the_four_groups_of_lm_eval():
    loaded = mmlu.BENCHMARK.rows()
    subjects = Counter(row.categories["subject"] for row in loaded)
    assert len(subjects) == 57 and subjects["abstract_algebra"] == 100 and subjects["professional_law"] == 1534
    groups = Counter(row.categories["group"] for row in loaded)
    assert groups == {"humanities": 4705, "STEM": 3153, "social sciences": 3077, "other": 3107}
    # Its version covers every subject's file: changing one changes it.
    names = sorted(n for n in (settings.BENCHMARK_DATA_DIR / mmlu.PREFIX).glob("*/test/*.arrow"))
    assert len(names) == 57
    assert mmlu.BENCHMARK.version().startswith("sha256:") and len(mmlu.BENCHMARK.version()) == 71


def test_multiple_choice_rows_state_their_options_and_answer():
    row = arc_challenge.BENCHMARK.rows()[0]
    assert row.id == "Mercury_7175875" and row.reference == "C"
    assert row.input.endswith("C. Planetary days will become shorter.\nD. Planetary gravity will become stronger.")
    assert not row.input.startswith("Question:")
    hella = hellaswag.BENCHMARK.rows()[0]
    assert "Roof shingle removal: A man is sitting on a roof. He" in hella.input and hella.reference == "D"
    wino = winogrande.BENCHMARK.rows()[0]
    assert wino["options"] == ["Sarah", "Maria"] and wino.reference == "B"
    assert "Answer: X" in benchmarks.describe(mmlu.BENCHMARK)["prompt_format"]


OPTIONS = ["Planetary density will decrease.", "Planetary years will become longer.", "Planetary days will become shorter.", "Gravity grows."]


@pytest.mark.parametrize(
    "output, letter",
    [
        ("Answer: C", "C"),
        ("The answer is (C).", "C"),
        ("**C**", "C"),
        ("C", "C"),
        ("C.", "C"),
        ("(C)", "C"),
        ("\\boxed{C}", "C"),
        ("A faster spin shortens the day. B and D do not follow.\nAnswer: C", "C"),
        ("Option A is wrong and so is B. The answer is **C**.", "C"),
        ("I would say the answer is: c", None),  # lower case is prose, not a letter
        ("answer: (B)", "B"),
        ("Planetary days will become shorter", "C"),
        ("I cannot tell.", None),
        ("Answer: E", None),  # not one of the four options
        ("", None),
        ("A or B, hard to say", None),
    ],
)
def test_the_letter_is_extracted_robustly_and_an_unclear_reply_is_none(output, letter):
    assert extract_choice(output, OPTIONS) == letter


def test_an_option_written_out_wins_over_one_it_contains():
    assert extract_choice("It is Maria.", ["Mari", "Maria"]) == "B"
    assert extract_choice("Sarah and Maria both", ["Sarah", "Maria"]) is None


def test_multiple_choice_scores_right_wrong_and_unparseable():
    row = arc_challenge.BENCHMARK.rows()[0]

    def score(output):
        return asyncio.run(arc_challenge.BENCHMARK.score(row, output))

    assert (score("Answer: C").value, score("Answer: C").extracted) == (1.0, "C")
    assert (score("Answer: A").value, score("Answer: A").extracted) == (0.0, "A")
    assert (score("no idea").value, score("no idea").extracted) == (0.0, "")


def test_math500_has_its_levels_and_subjects_and_gold_from_the_boxed_solution():
    loaded = math500.BENCHMARK.rows()
    assert Counter(row.categories["level"] for row in loaded) == {"Level 1": 43, "Level 2": 90, "Level 3": 105, "Level 4": 128, "Level 5": 134}
    assert Counter(row.categories["subject"] for row in loaded)["Counting & Probability"] == 38
    assert len({row.categories["subject"] for row in loaded}) == 7
    # The `answer` field holds "\le(3,\frac{\pi}{2}\right)"; the solution's \boxed{} is the real one.
    assert loaded[0].reference == "\\left( 3, \\frac{\\pi}{2} \\right)"
    assert all(row.reference for row in loaded)
    assert math500.BENCHMARK.version() != file_sha256(math500.FILE)  # it covers the subject files too


@pytest.mark.parametrize(
    "solution, gold",
    [("so $\\boxed{\\frac{1}{2}}$.", "\\frac{1}{2}"), ("first \\boxed{1}, then \\boxed{\\{a, b\\}}", "\\{a, b\\}"), ("\\fbox{7}", "7"), ("none", "")],
)
def test_the_gold_answer_is_the_last_boxed_with_balanced_braces(solution, gold):
    assert gold_of(solution) == gold


HALF = Row(id="t", input="What is one half?", reference="\\frac{1}{2}")


@pytest.mark.parametrize(
    "output, right",
    [
        ("Therefore, the final answer is: $\\boxed{\\frac{1}{2}}$. I hope it is correct", True),
        ("$\\boxed{0.5}$", True),
        ("The answer is 1/2", True),
        ("$\\boxed{\\dfrac12}$", True),
        ("$\\boxed{\\frac{2}{4}}$", True),
        ("$\\boxed{\\frac{1}{3}}$", False),
        ("$\\boxed{2}$", False),
        ("I do not know.", False),
        ("", False),
    ],
)
def test_math500_scores_by_equivalence_not_string_match(output, right):
    score = asyncio.run(math500.BENCHMARK.score(HALF, output))
    assert score.value == float(right)
    assert (score.extracted != "") == (output not in ("I do not know.", ""))
