"""An Inspect eval log (JSON format) of inspect_evals/gaia into Belvedir's results.json.

`inspect eval ... --log-format json` writes one `<time>_gaia_<id>.json` per eval: `status`,
`eval` (task, model), `results` (`total_samples`, `completed_samples`, `scores[]` with
`metrics.accuracy`), `stats.model_usage`, and `samples[]` whose `scores.gaia_scorer.value` is
"C" (correct) or "I" (incorrect).
"""

CORRECT = {"C", 1}


def convert(log):
    results = log.get("results") or {}
    scorer = (results.get("scores") or [{}])[0]
    accuracy = ((scorer.get("metrics") or {}).get("accuracy") or {}).get("value")
    tasks = []
    for sample in log.get("samples") or []:
        score = (sample.get("scores") or {}).get(scorer.get("name", "gaia_scorer")) or {}
        solved = score.get("value") in CORRECT
        answer = str(score.get("answer") or "")[:200]
        tasks.append(
            {
                "task": str(sample.get("id")),
                "verdict": "solved" if solved else "failed",
                "steps": sum(1 for m in sample.get("messages") or [] if m.get("role") == "assistant") or None,
                "reason": f"answered {answer!r}, expected {str(sample.get('target'))[:100]!r}" if not solved else "exact match",
            }
        )
    total = results.get("total_samples", len(tasks))
    solved = sum(t["verdict"] == "solved" for t in tasks)
    usage = (log.get("stats") or {}).get("model_usage") or {}
    return {
        "score": float(accuracy) if isinstance(accuracy, (int, float)) else (solved / len(tasks) if tasks else 0.0),
        "model": (log.get("eval") or {}).get("model", ""),
        "status": log.get("status", ""),
        "total": total,
        "completed": results.get("completed_samples", len(tasks)),
        "solved": solved,
        "failed": len(tasks) - solved,
        "input_tokens": sum(u.get("input_tokens") or 0 for u in usage.values()),
        "output_tokens": sum(u.get("output_tokens") or 0 for u in usage.values()),
        "tasks": tasks,
    }
