import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from convert_lmeval import convert  # noqa: E402


def load(name):
    return json.loads(next((HERE / "samples").rglob(name)).read_text())


def test_the_gpu_run_scores_the_mean_headline_metric_under_the_model_label():
    results = convert(load("results_2026-*.json"), "my-finetune-v2")
    assert results["score"] == (0.74 + 0.68) / 2  # acc_norm for both multiple-choice tasks
    assert results["model"] == "my-finetune-v2" and results["lm_eval_model"] == "local-completions"
    assert (results["total"], results["samples"]) == (2, 200)
    arc = results["subtasks"][0]
    assert (arc["task"], arc["metric"], arc["filter"], arc["value"], arc["samples"]) == ("arc_easy", "acc_norm", "none", 0.74, 100)
    assert arc["stderr"] == 0.04408440022768078


def test_the_cpu_chat_run_takes_strict_exact_match():
    results = convert(load("results_gsm8k_chat.json"), "gpt-4o-mini")
    assert results["score"] == 0.6 and results["subtasks"][0]["metric"] == "exact_match"
    assert results["lm_eval_model"] == "local-chat-completions"


def test_an_unknown_metric_is_still_a_headline():
    data = {"results": {"custom": {"alias": "custom", "bleu,none": 12.5, "bleu_stderr,none": 1.0}}}
    assert convert(data, "m")["score"] == 12.5
