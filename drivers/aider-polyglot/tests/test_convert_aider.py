import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from convert_aider import convert  # noqa: E402


def sample():
    # Found the way aider's own load_results() finds them.
    run = next((HERE / "samples").glob("*--belvedir-42"))
    return [json.loads(p.read_text()) for p in run.glob("*/exercises/practice/*/.aider.results.json")]


def test_it_scores_pass_rate_2_like_aider():
    results = convert(sample())
    assert results["score"] == 0.5 and results["metric"] == "pass_rate_2"
    assert results["pass_rate_1"] == 0.25
    assert (results["total"], results["solved"], results["failed"]) == (4, 2, 2)
    assert results["model"] == "openai/gpt-4o" and results["edit_format"] == "diff"
    assert results["cost"] == round(0.0213 + 0.0561 + 0.0388 + 0.0702, 4) and results["malformed_responses"] == 1


def test_each_exercise_is_named_by_language_and_says_why():
    tasks = {t["task"]: (t["verdict"], t["steps"], t["reason"]) for t in convert(sample())["tasks"]}
    assert tasks == {
        "python/anagram": ("solved", 1, "tests passed on try 1"),
        "python/bowling": ("failed", 2, "tests failed after 2 tries"),
        "javascript/grade-school": ("solved", 2, "tests passed on try 2"),
        "javascript/react": ("failed", 2, "tests timed out"),
    }


def test_one_try_counts_only_first_attempts():
    assert convert(sample(), tries=1)["score"] == 0.25
