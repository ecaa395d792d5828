import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from convert_gaia import convert  # noqa: E402


def sample():
    return json.loads(next((HERE / "samples").glob("*_gaia_*.json")).read_text())


def test_it_takes_inspects_accuracy_model_and_usage():
    results = convert(sample())
    assert results["score"] == 1 / 3
    assert results["model"] == "openai/gpt-4o" and results["status"] == "success"
    assert (results["total"], results["completed"], results["solved"], results["failed"]) == (3, 3, 1, 2)
    assert (results["input_tokens"], results["output_tokens"]) == (48211, 3120)


def test_each_question_has_its_verdict_and_answer():
    tasks = convert(sample())["tasks"]
    assert [(t["verdict"], t["steps"]) for t in tasks] == [("solved", 2), ("failed", 1), ("failed", 1)]
    assert tasks[1]["reason"] == "answered '33040', expected '34689'"


def test_a_log_without_metrics_scores_from_its_samples():
    log = sample()
    log["results"]["scores"][0]["metrics"] = {}
    assert convert(log)["score"] == 1 / 3
