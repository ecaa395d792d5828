"""tau-bench's results file (a JSON list of EnvRunResult) into Belvedir's results.json.

tau_bench/run.py writes `{log_dir}/{strategy}-{model}-{temperature}_range_{start}-{end}_user-{user_model}-{user_strategy}_{time}.json`:
a list of `{"task_id", "reward", "info", "traj", "trial"}`. A task passes a trial when its reward is 1.
"""


def convert(runs, model):
    first_trials = [r for r in runs if r.get("trial", 0) == 0]
    tasks = []
    for run in sorted(first_trials, key=lambda r: r["task_id"]):
        passed = abs(float(run.get("reward", 0.0)) - 1.0) < 1e-6
        info = run.get("info") or {}
        reason = info.get("error") or ("reward 1" if passed else f"reward {run.get('reward', 0.0)}")
        tasks.append({"task": f"task {run['task_id']}", "verdict": "solved" if passed else "failed", "steps": _agent_turns(run), "reason": str(reason)[:300]})
    solved = sum(t["verdict"] == "solved" for t in tasks)
    trials = max((r.get("trial", 0) for r in runs), default=0) + 1
    return {
        "score": solved / len(tasks) if tasks else 0.0,
        "metric": "pass^1",
        "model": model,
        "total": len(tasks),
        "solved": solved,
        "failed": len(tasks) - solved,
        "errors": sum(bool((r.get("info") or {}).get("error")) for r in first_trials),
        "trials": trials,
        "tasks": tasks,
    }


def _agent_turns(run):
    return sum(1 for message in run.get("traj") or [] if message.get("role") == "assistant")
