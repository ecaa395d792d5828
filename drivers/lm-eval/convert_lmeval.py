"""lm-evaluation-harness's results file into Belvedir's results.json.

`lm_eval ... --output_path out` writes `out/<model>/results_<timestamp>.json`: `results` maps each
task to its metrics keyed `"<metric>,<filter>"` (e.g. `"acc_norm,none"`, `"exact_match,strict-match"`)
with `_stderr` companions; `n-samples` gives each task's original and effective sample counts.
The score is the mean over the requested tasks of each task's headline metric.
"""

# The metric each kind of task is usually reported by, best first.
HEADLINE = ("acc_norm,none", "acc,none", "exact_match,strict-match", "exact_match,flexible-extract", "exact_match,none", "f1,none")


def headline(metrics):
    for key in HEADLINE:
        if isinstance(metrics.get(key), (int, float)):
            return key, float(metrics[key])
    for key, value in metrics.items():
        if "," in key and "_stderr" not in key and isinstance(value, (int, float)) and not isinstance(value, bool):
            return key, float(value)
    return None, None


def convert(data, model):
    samples = data.get("n-samples") or {}
    subtasks = []
    for task, metrics in sorted((data.get("results") or {}).items()):
        key, value = headline(metrics)
        if key is None:
            continue
        subtasks.append(
            {
                "task": task,
                "metric": key.split(",")[0],
                "filter": key.split(",")[1],
                "value": value,
                "stderr": metrics.get(key.replace(",", "_stderr,", 1)),
                "samples": (samples.get(task) or {}).get("effective"),
            }
        )
    return {
        "score": sum(s["value"] for s in subtasks) / len(subtasks) if subtasks else 0.0,
        "model": model,
        "total": len(subtasks),
        "samples": sum(s["samples"] or 0 for s in subtasks),
        "subtasks": subtasks,
        "lm_eval_model": (data.get("config") or {}).get("model", ""),
    }
