"""Aider's benchmark results (one `.aider.results.json` per exercise) into Belvedir's results.json.

benchmark/benchmark.py writes `tmp.benchmarks/<date>--<name>/<language>/exercises/practice/<exercise>/.aider.results.json`:
`testcase`, `model`, `edit_format`, `tests_outcomes` (one boolean per try), `cost`, `duration`,
token counts and error counters. Aider's headline number, pass_rate_2, is the fraction of
exercises whose tests passed within two tries.
"""


def convert(exercise_results, tries=2):
    tasks = []
    for result in sorted(exercise_results, key=lambda r: (r.get("testdir", ""), r.get("testcase", ""))):
        outcomes = list(result.get("tests_outcomes") or [])
        passed_on = next((i + 1 for i, ok in enumerate(outcomes[:tries]) if ok), None)
        language = _language(result.get("testdir", ""))
        tasks.append(
            {
                "task": f"{language}/{result.get('testcase')}" if language else str(result.get("testcase")),
                "verdict": "solved" if passed_on else "failed",
                "steps": len(outcomes),
                "reason": f"tests passed on try {passed_on}" if passed_on else _why(result, len(outcomes)),
            }
        )
    solved = sum(t["verdict"] == "solved" for t in tasks)
    first = exercise_results[0] if exercise_results else {}
    return {
        "score": solved / len(tasks) if tasks else 0.0,
        "metric": f"pass_rate_{tries}",
        "pass_rate_1": sum(bool((r.get("tests_outcomes") or [False])[0]) for r in exercise_results) / len(tasks) if tasks else 0.0,
        "model": first.get("model", ""),
        "edit_format": first.get("edit_format", ""),
        "total": len(tasks),
        "solved": solved,
        "failed": len(tasks) - solved,
        "cost": round(sum(r.get("cost") or 0 for r in exercise_results), 4),
        "malformed_responses": sum(r.get("num_malformed_responses") or 0 for r in exercise_results),
        "tasks": tasks,
    }


def _language(testdir):
    parts = testdir.replace("\\", "/").split("/")
    return parts[parts.index("exercises") - 1] if "exercises" in parts and parts.index("exercises") > 0 else ""


def _why(result, tries):
    if result.get("test_timeouts"):
        return "tests timed out"
    if result.get("num_exhausted_context_windows"):
        return "context window exhausted"
    return f"tests failed after {tries} tr{'y' if tries == 1 else 'ies'}"
