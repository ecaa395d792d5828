"""A SWE-bench evaluation report (plus the predictions it judged) into Belvedir's results.json.

The report is the one SWE-bench's harness writes as `<model>.<run_id>.json` and sb-cli saves
under `sb-cli-reports/` (schema_version 2): instance counts and id lists. The predictions are
mini-swe-agent's `preds.json`: `{instance_id: {model_name_or_path, instance_id, model_patch}}`.
"""


def convert(report, predictions, model=""):
    submitted = report.get("submitted_instances") or len(report.get("submitted_ids") or []) or len(predictions)
    resolved_ids = set(report.get("resolved_ids") or [])
    reasons = {
        **{i: "tests failed" for i in report.get("unresolved_ids") or []},
        **{i: "empty patch" for i in report.get("empty_patch_ids") or []},
        **{i: "evaluation error" for i in report.get("error_ids") or []},
        **{i: "tests passed" for i in resolved_ids},
    }
    ids = sorted(set(predictions) | set(report.get("submitted_ids") or []))
    tasks = [{"task": i, "verdict": "solved" if i in resolved_ids else "failed", "reason": reasons.get(i, "not evaluated")} for i in ids]
    if not model:
        model = next((p.get("model_name_or_path", "") for p in predictions.values()), "")
    resolved = report.get("resolved_instances", len(resolved_ids))
    return {
        "score": resolved / submitted if submitted else 0.0,
        "model": model,
        "total": submitted,
        "solved": resolved,
        "failed": submitted - resolved,
        "empty_patches": report.get("empty_patch_instances", 0),
        "errors": report.get("error_instances", 0),
        "split_total": report.get("total_instances"),
        "tasks": tasks,
    }
