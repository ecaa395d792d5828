"""Terminal-Bench's run results into Belvedir's results.json.

`tb run --output-path runs --run-id ID` writes `runs/ID/results.json`: `results` (one TrialResults
per task trial: task_id, is_resolved, failure_mode, parser_results, token counts), `n_resolved`,
`n_unresolved`, `resolved_ids`, `unresolved_ids`, `accuracy`, `pass_at_k`.
"""


def convert(run, model):
    tasks = []
    for trial in run.get("results") or []:
        resolved = bool(trial.get("is_resolved"))
        failure = trial.get("failure_mode") or "unset"
        tests = trial.get("parser_results") or {}
        failed_tests = [name for name, outcome in tests.items() if outcome != "passed"]
        if resolved:
            reason = f"{len(tests)} test(s) passed"
        elif failure not in ("unset", "none"):
            reason = failure
        else:
            reason = "failed: " + ", ".join(failed_tests[:5]) if failed_tests else "not resolved"
        tasks.append({"task": trial.get("task_id", ""), "verdict": "solved" if resolved else "failed", "reason": reason})
    solved = sum(t["verdict"] == "solved" for t in tasks)
    total = len(tasks)
    accuracy = run.get("accuracy")
    return {
        "score": float(accuracy) if isinstance(accuracy, (int, float)) else (solved / total if total else 0.0),
        "model": model,
        "total": total,
        "solved": run.get("n_resolved", solved),
        "failed": run.get("n_unresolved", total - solved),
        "input_tokens": sum(t.get("total_input_tokens") or 0 for t in run.get("results") or []),
        "output_tokens": sum(t.get("total_output_tokens") or 0 for t in run.get("results") or []),
        "pass_at_k": run.get("pass_at_k") or {},
        "tasks": tasks,
    }
