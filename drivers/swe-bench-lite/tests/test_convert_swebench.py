import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from convert_swebench import convert  # noqa: E402

SAMPLES = HERE / "samples"


def load():
    return json.loads((SAMPLES / "swe-bench_lite__test__belvedir-42.json").read_text()), json.loads((SAMPLES / "preds.json").read_text())


def test_it_scores_the_fraction_of_submitted_instances_resolved():
    report, preds = load()
    results = convert(report, preds)
    assert results["score"] == 1 / 3
    assert (results["total"], results["solved"], results["failed"], results["empty_patches"], results["split_total"]) == (3, 1, 2, 1, 300)
    assert results["model"] == "anthropic/claude-sonnet-4-5"


def test_it_lists_each_instance_with_why_it_failed():
    report, preds = load()
    tasks = {t["task"]: (t["verdict"], t["reason"]) for t in convert(report, preds)["tasks"]}
    assert tasks == {
        "astropy__astropy-12907": ("solved", "tests passed"),
        "astropy__astropy-14182": ("failed", "tests failed"),
        "astropy__astropy-14365": ("failed", "empty patch"),
    }


def test_an_explicit_model_name_wins():
    report, preds = load()
    assert convert(report, preds, "my-label")["model"] == "my-label"
