"""The catalog's benchmarks: their rows and versions, and each scorer against hand-made outputs."""

import asyncio
import hashlib
from collections import Counter

import pytest
from django.conf import settings

from evals import benchmarks
from evals.benchmarks import arc_challenge, hellaswag, mmlu, winogrande
from evals.benchmarks.multiple_choice import extract_choice


def file_sha256(name: str) -> str:
    return "sha256:" + hashlib.sha256((settings.BENCHMARK_DATA_DIR / name).read_bytes()).hexdigest()


@pytest.mark.parametrize(
    "name, rows", [("gsm8k", 1319), ("humaneval", 164), ("mmlu", 14042), ("arc_challenge", 1172), ("hellaswag", 10042), ("winogrande", 1267)]
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
