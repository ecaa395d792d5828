import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from convert_tau import convert  # noqa: E402


def sample():
    return json.loads(next((HERE / "samples").glob("tool-calling-*.json")).read_text())


def test_it_scores_pass_hat_1_from_rewards():
    results = convert(sample(), "openai/gpt-4o")
    assert results["score"] == 1 / 3
    assert (results["total"], results["solved"], results["failed"], results["errors"]) == (3, 1, 2, 1)
    assert results["model"] == "openai/gpt-4o" and results["metric"] == "pass^1"


def test_it_lists_each_task_with_its_verdict_and_turns():
    tasks = convert(sample(), "m")["tasks"]
    assert [(t["task"], t["verdict"], t["steps"]) for t in tasks] == [("task 0", "solved", 2), ("task 1", "failed", 1), ("task 2", "failed", 0)]
    assert "RateLimitError" in tasks[2]["reason"]


def test_later_trials_do_not_count_towards_pass_hat_1():
    runs = sample() + [dict(r, trial=1, reward=1.0) for r in sample()]
    results = convert(runs, "m")
    assert results["solved"] == 1 and results["trials"] == 2
