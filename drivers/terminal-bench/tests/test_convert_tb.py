import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from convert_tb import convert  # noqa: E402


def sample():
    return json.loads((HERE / "samples" / "belvedir-42" / "results.json").read_text())


def test_it_takes_terminal_benchs_accuracy_and_counts():
    results = convert(sample(), "anthropic/claude-sonnet-4-5")
    assert results["score"] == 1 / 3
    assert (results["total"], results["solved"], results["failed"]) == (3, 1, 2)
    assert (results["input_tokens"], results["output_tokens"]) == (2315 + 10422 + 50210, 187 + 913 + 2201)
    assert results["model"] == "anthropic/claude-sonnet-4-5"


def test_each_task_says_why_it_failed():
    tasks = convert(sample(), "m")["tasks"]
    assert [(t["task"], t["verdict"], t["reason"]) for t in tasks] == [
        ("hello-world", "solved", "2 test(s) passed"),
        ("fix-git", "failed", "failed: test_layout_file"),
        ("crack-7z-hash", "failed", "agent_timeout"),
    ]


def test_without_accuracy_the_score_is_the_resolved_fraction():
    run = sample()
    del run["accuracy"]
    assert convert(run, "m")["score"] == 1 / 3
