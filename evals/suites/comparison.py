"""Two suite runs compared benchmark by benchmark, on paired rows, with the verdicts corrected for multiplicity.

Each benchmark is an ordinary paired comparison (comparison.compare_evals:
delta with its interval, McNemar or a paired t, per-category deltas). Across
benchmarks the p-values are adjusted with Holm's step-down
(multiplicity.py says why Holm and not Benjamini–Hochberg), and so are a
benchmark's categories among themselves. One sentence says what changed.
The CI gate (`bv suites compare A B --fail-if-worse`) fails when any
benchmark is significantly worse after the correction; a benchmark whose
evals stopped early (evals/early_stop.py) counts by its always-valid p.
"""

from .. import benchmarks, statistics
from ..comparison import NotPaired, compare_evals
from ..models import Deployment, Eval, SuiteRun
from ..multiplicity import HOLM, adjust
from .actions import SuiteError


def side(run: SuiteRun, deployment: Deployment | None) -> Deployment:
    """The deployment whose evals stand for `run`: the one given, or the run's only one."""
    ran_on = list(run.deployments.order_by("name"))
    if deployment is not None:
        if deployment not in ran_on:
            raise SuiteError(f"Suite run #{run.pk} did not run on {deployment.name}; it ran on {', '.join(d.name for d in ran_on)}.")
        return deployment
    if len(ran_on) != 1:
        raise SuiteError(f"Suite run #{run.pk} ran on {', '.join(d.name for d in ran_on)}: say which deployment to compare (deployment_a, deployment_b).")
    return ran_on[0]


def compare_suite_runs(a: SuiteRun, b: SuiteRun, *, deployment_a=None, deployment_b=None, set_aside_flaky: bool = False) -> dict:
    """B against A on every benchmark both ran; SuiteError (400) when the runs' rows differ or the sides are unclear."""
    left, right = side(a, deployment_a), side(b, deployment_b)
    evals_a = {ev.benchmark: ev for ev in a.evals.filter(deployment=left).select_related("deployment", "judge").order_by("pk")}
    evals_b = {ev.benchmark: ev for ev in b.evals.filter(deployment=right).select_related("deployment", "judge").order_by("pk")}
    shared = [name for name in evals_a if name in evals_b]
    compared = []
    for name in shared:
        try:
            result = compare_evals(evals_a[name], evals_b[name], set_aside_flaky=set_aside_flaky)
        except NotPaired as exc:
            raise SuiteError(f"{name}: {exc} Run B with same_rows_as A to compare them.") from None
        compared.append({"benchmark": name, "status_a": evals_a[name].status, "status_b": evals_b[name].status, **result})
    _correct(compared)
    for row in compared:
        _correct_categories(row)
    worse = [row["benchmark"] for row in compared if row["corrected_verdict"] == statistics.WORSE]
    # A benchmark failed on either side (its rows errored past the limit, its worker died) fails the gate: what
    # its rows say is not the benchmark's, whatever their verdict.
    failed = [row["benchmark"] for row in compared if {row["status_a"], row["status_b"]} & {Eval.Status.FAILED, Eval.Status.ERROR}]
    return {
        "a": {"id": a.pk, "suite": a.suite_name, "deployment": left.name},
        "b": {"id": b.pk, "suite": b.suite_name, "deployment": right.name},
        "correction": HOLM,
        "alpha": statistics.ALPHA,
        "benchmarks": compared,
        "not_compared": sorted(set(evals_a) ^ set(evals_b)),
        "worse": worse,
        "better": [row["benchmark"] for row in compared if row["corrected_verdict"] == statistics.BETTER],
        "summary": summary(compared),
        "failed": failed,
        "gate": "fail" if worse or failed else "pass",
    }


def _correct(rows: list[dict]):
    """Each benchmark's verdict again, its p-value adjusted (Holm) for the number of benchmarks compared.

    A benchmark whose evals stopped early is judged by its sequential test (evals/sequential.py):
    the fixed-n p of a prefix chosen by looking at it is no p-value, the always-valid one is.
    """
    tested = [_tested(row) for row in rows]
    adjusted = adjust([p if p is not None else 1.0 for p, _ in tested], HOLM)
    for row, (_, delta), p in zip(rows, tested, adjusted, strict=True):
        row["gate_test"] = "sequential" if row.get("sequential") and row["sequential"]["stopped"] else "fixed-n"
        row["p_adjusted"] = p
        row["corrected_verdict"] = statistics.verdict(delta is not None and p < statistics.ALPHA, delta or 0)


def _tested(row: dict) -> tuple[float | None, float | None]:
    """The p-value and delta a benchmark's verdict rests on: the sequential test's when either eval stopped early."""
    found = row.get("sequential")
    if found and found["stopped"]:
        return found["p"], found["delta"]
    return row["p_value"], row["delta"]


def _correct_categories(row: dict):
    """A benchmark's categories corrected among themselves (Holm per axis): MMLU's 57 subjects are 57 tests."""
    for entries in (row.get("by_category") or {}).values():
        adjusted = adjust([entry["p_value"] if entry["p_value"] is not None else 1.0 for entry in entries], HOLM)
        for entry, p in zip(entries, adjusted, strict=True):
            entry["p_adjusted"] = p
            entry["corrected_verdict"] = statistics.verdict(entry["delta"] is not None and p < statistics.ALPHA, entry["delta"] or 0)


def points(benchmark: str, delta: float) -> str:
    """A delta as people read it: percentage points on a 0-1 score, points on the benchmark's own scale otherwise."""
    found = benchmarks.get(benchmark)
    scale = found.scale if found is not None else (0.0, 1.0)
    if scale == (0.0, 1.0):
        return f"{delta * 100:+.1f} points".replace("-", "−")
    return f"{delta:+.2f} on its {scale[0]:g}–{scale[1]:g} scale".replace("-", "−", 1)


def summary(rows: list[dict]) -> str:
    """One line: "worse on mbpp (−6.2 points, significant), better on mmlu/stem, nothing else decisive"."""
    parts = []
    for row in rows:
        if row["corrected_verdict"] != statistics.NOT_DECISIVE:
            parts.append(f"{row['corrected_verdict']} on {row['benchmark']} ({points(row['benchmark'], row['delta'])}, significant)")
    for row in rows:
        if row["corrected_verdict"] != statistics.NOT_DECISIVE:
            continue
        for entries in (row.get("by_category") or {}).values():
            for entry in entries:
                if entry["corrected_verdict"] != statistics.NOT_DECISIVE:
                    parts.append(f"{entry['corrected_verdict']} on {row['benchmark']}/{entry['name'].lower()}")
    uncalibrated = [row["benchmark"] for row in rows if row.get("judge") and not row["judge"]["calibrated"]]
    if not rows:
        line = "no benchmark in common"
    elif not parts:
        line = "nothing decisive"
    else:
        rest = any(row["corrected_verdict"] == statistics.NOT_DECISIVE for row in rows)
        line = ", ".join(parts) + (", nothing else decisive" if rest else "")
    if uncalibrated:
        line += f" ({', '.join(uncalibrated)}: judge not calibrated)"
    if stacks := [row["benchmark"] for row in rows if row.get("serving") and not row["serving"]["same"]]:
        line += f" ({', '.join(stacks)}: served by different stacks)"
    return line


def suite_table(run: SuiteRun) -> dict:
    """The benchmark x deployment table of a run: each cell its eval's score, interval, errors, cost and progress."""
    deployments = list(run.deployments.order_by("name"))
    cells = {(ev.benchmark, ev.deployment_id): ev for ev in run.evals.select_related("deployment")}
    rows = []
    for entry in run.entries:
        name = entry["benchmark"]
        rows.append({"benchmark": name, "entry": entry, "cells": [cells.get((name, d.pk)) for d in deployments]})
    return {"deployments": deployments, "rows": [row for row in rows if any(row["cells"])]}


def cell(ev: Eval | None) -> dict | None:
    """One eval as the table's cell (and the API's)."""
    if ev is None:
        return None
    return {
        "eval": ev.pk,
        "status": ev.status,
        "score": ev.score,
        "score_ci": ev.score_interval,
        "done": ev.done_count,
        "total": ev.total,
        "errors": ev.error_count,
        "cost": str(ev.cost) if ev.cost is not None else None,
        # The finished eval whose rows this cell copied instead of asking its deployment (cells.py); None: it ran.
        "reused_from": ev.reused_from_id,
    }
