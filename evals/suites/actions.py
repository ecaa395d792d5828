"""Suites: many benchmarks against one or more deployments as one object.

A suite is a list of entries (benchmark, sample limit, mode, options): the
built-in `core` and `quick`, or a project's own (`Suite`, from the dashboard,
the API or a YAML file). A suite run makes one eval per benchmark and
deployment through the ordinary eval machinery, all checked before any is
created. Every deployment's evals of one benchmark share a seed, so they
score the same rows and pair in a comparison.

Its evals wait as `pending` and go to the eval queue one per deployment at a
time (`advance`), each at the deployment's whole max_in_flight (shared with
whatever else asks it at once: evals/shares.py), while the deployments run
side by side. A suite run charges nothing of its own; its evals cost what
evals cost, and `max_cost` bounds them together (engine.stop_suite_at_budget).

A cell that a finished eval of the project already answered, with everything
that decides its answers the same, is not run but reused: created succeeded
with that eval's rows, at no cost (cells.py). `force` runs every cell.
"""

import json
import secrets

from django.db import transaction
from django.db.models import Count, F, Q, Sum

from belvedir.core import jsonvalues
from billing.actions import debt_gate, refuse_if_in_debt

from .. import benchmarks, local_model
from ..actions import (
    EvalBusy,
    EvalConfigError,
    cancel_eval,
    check_active_limit,
    check_benchmark,
    check_judge_answers,
    plan_eval,
    register_local_deployment,
    resume_eval,
    retry_errors,
)
from ..config_files import read_fields
from ..models import CacheMode, Deployment, Eval, Suite, SuiteRun
from ..queue import advance
from . import cells as suite_cells

QUICK_ROWS = 100  # "for quick checkpoint comparisons, 50-100 samples is usually enough"
ENTRY_FIELDS = {"benchmark", "sample_limit", "mode", "options"}
# A suite lists each benchmark once, so the catalog bounds its count; the size
# bounds what `options` may hold (the 351-byte aliased post stored 5.8 MB).
MAX_ENTRIES = 100
MAX_ENTRIES_BYTES = 64 * 1024
CONFIG_FIELDS = {"suite", "name", "benchmarks", "deployments", "judge", "max_cost", "epochs", "same_rows_as", "force", "cache"}


class SuiteError(EvalConfigError):
    """A suite or suite run that breaks a rule; the message names it (400)."""


def builtin_entries(name: str) -> list[dict] | None:
    """`core`: every catalog benchmark at its full split; `quick`: each at QUICK_ROWS rows (all of a smaller one)."""
    if name == "core":
        return [{"benchmark": b.name, "sample_limit": None, "mode": "generative", "options": {}} for b in benchmarks.CATALOG.values()]
    if name == "quick":
        return [{"benchmark": b.name, "sample_limit": QUICK_ROWS, "mode": "generative", "options": {}} for b in benchmarks.CATALOG.values()]
    return None


BUILTIN = ("core", "quick")
BUILTIN_DESCRIPTIONS = {
    "core": "The whole catalog at its full splits.",
    "quick": f"Every benchmark at {QUICK_ROWS} rows (a deterministic subset; all of a smaller split): for checkpoint comparisons.",
}


def parse_entries(data) -> list[dict]:
    """A suite's entries checked: a list of benchmark names or mappings {benchmark, sample_limit, mode, options}."""
    try:
        jsonvalues.check(data, "entries")
    except jsonvalues.JsonValueError as exc:
        raise SuiteError(exc.message) from None
    if not isinstance(data, list) or not data:
        raise SuiteError("A suite lists at least one benchmark: benchmarks: [mmlu, {benchmark: gsm8k, sample_limit: 200}].")
    if len(data) > MAX_ENTRIES:
        raise SuiteError(f"A suite lists at most {MAX_ENTRIES} benchmarks, not {len(data):,}.")
    entries, seen = [], set()
    for item in data:
        entry = {"benchmark": item} if isinstance(item, str) else item
        if not isinstance(entry, dict):
            raise SuiteError(f"Each benchmark of a suite is a name or a mapping with `benchmark`, not {item!r}.")
        if unknown := set(entry) - ENTRY_FIELDS:
            raise SuiteError(
                f"Unknown fields in {entry.get('benchmark', 'an entry')}: {', '.join(sorted(unknown))}. Allowed: {', '.join(sorted(ENTRY_FIELDS))}."
            )
        name = entry.get("benchmark")
        if not isinstance(name, str) or not name:
            raise SuiteError("Each entry of a suite names its benchmark.")
        check_benchmark(name)
        if name in seen:
            raise SuiteError(f"{name} is listed twice: a suite scores each benchmark once.")
        seen.add(name)
        limit = entry.get("sample_limit")
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
            raise SuiteError(f"{name}: sample_limit must be a positive whole number, or unset for the full split.")
        if limit is not None and limit > (rows := benchmarks.get(name).row_count()):
            limit = rows  # "at most N rows": a smaller split is taken whole
        mode = entry.get("mode") or Eval.Mode.GENERATIVE
        if mode not in Eval.Mode.values:
            raise SuiteError(f"{name}: unknown mode {mode!r}; choose {' or '.join(Eval.Mode.values)}.")
        options = entry.get("options") or {}
        if not isinstance(options, dict):
            raise SuiteError(f"{name}: options must be a mapping of option names to values.")
        entries.append({"benchmark": name, "sample_limit": limit, "mode": mode, "options": options})
    if (size := len(json.dumps(entries, default=str))) > MAX_ENTRIES_BYTES:
        raise SuiteError(f"A suite's benchmarks take {size:,} bytes as JSON (limit {MAX_ENTRIES_BYTES:,}): keep their options short.")
    return entries


def entries_of(project, name: str) -> list[dict]:
    """A built-in suite's entries, or the project's own suite's."""
    if (entries := builtin_entries(name)) is not None:
        return entries
    suite = Suite.objects.filter(project=project, name=name).first()
    if suite is None:
        raise SuiteError(f"No suite named {name!r}: the built-in ones are {', '.join(BUILTIN)}, or define your own.")
    return suite.entries


def save_suite(project, user, name: str, entries, description: str = "", suite: Suite | None = None) -> Suite:
    name = (name or "").strip()
    if not name or len(name) > 100:
        raise SuiteError("A suite needs a name of 1 to 100 characters.")
    if name in BUILTIN:
        raise SuiteError(f"{name} is a built-in suite's name: choose another.")
    clash = Suite.objects.filter(project=project, name=name).exclude(pk=suite.pk if suite else None)
    if clash.exists():
        raise SuiteError(f"This project already has a suite named {name}.")
    checked = parse_entries(entries)
    if suite is None:
        return Suite.objects.create(project=project, name=name, description=description, entries=checked, created_by=user)
    suite.name, suite.description, suite.entries = name, description, checked
    suite.save()
    return suite


def parse_config(text: str) -> dict:
    """A suite run's YAML (or JSON) file: `suite` (a name) or `benchmarks` (entries), plus deployments, judge, max_cost, epochs, same_rows_as, force, cache."""
    data = read_fields(text, allowed=CONFIG_FIELDS, what="suite config", hint="suite or benchmarks, deployments, …", error=SuiteError)
    if bool(data.get("suite")) == bool(data.get("benchmarks")):
        raise SuiteError("Give either `suite` (core, quick or one of yours) or `benchmarks` (a list), not both.")
    return data


@debt_gate("a suite run: every cell's tokens")
def create_suite_run(
    project,
    user,
    *,
    deployments: list[Deployment],
    suite_name: str = "",
    entries=None,
    judge: Deployment | None = None,
    same_rows_as: SuiteRun | None = None,
    max_cost=None,
    epochs: int = 1,
    notes: list[str] | None = None,
    force: bool = False,
    cache: str = CacheMode.AUTO,
) -> SuiteRun:
    """Check every eval of the run, then create them all at once (pending) and start the first per deployment.

    `notes`: what the caller left out of the suite and why, shown on the run's page. A cell a finished one
    of the project answers is created succeeded with its rows instead (cells.py), unless `force` (or a
    `cache` of bypass). `cache`: each eval's response cache mode.

    Nothing is created or queued when any check fails: an unknown benchmark,
    a deployment that cannot serve one, a judge that does not answer, a
    `same_rows_as` run lacking one of the benchmarks.
    """
    refuse_if_in_debt(project)
    if not deployments:
        raise SuiteError("Choose at least one deployment to run the suite against.")
    if len({d.pk for d in deployments}) != len(deployments):
        raise SuiteError("A deployment is listed twice.")
    if any(d.project_id != project.pk for d in deployments) or (judge is not None and judge.project_id != project.pk):
        raise SuiteError("Deployments and the judge must be of this project.")
    if entries is None:
        entries = entries_of(project, suite_name)
    entries = parse_entries(entries)
    suite_name = suite_name or "custom"
    if max_cost is not None and (max_cost < 0 or not any(d.is_priced for d in [*deployments, *([judge] if judge else [])])):
        raise SuiteError("max_cost needs deployments with prices per million tokens, and must not be negative.")
    if cache not in CacheMode.values:
        raise SuiteError(f"Unknown cache mode {cache!r}; choose {', '.join(CacheMode.values)}.")
    notes = list(notes or [])
    if judge is None and suite_name in BUILTIN:
        # A built-in suite is the whole catalog: its judged benchmarks wait for a judge rather than refusing the rest.
        left_out = [e["benchmark"] for e in entries if benchmarks.get(e["benchmark"]).judged]
        entries = [e for e in entries if e["benchmark"] not in left_out]
        notes += [f"{name} left out: it is graded by an LLM judge, and no judge was chosen." for name in left_out]
    sources = _sources(project, same_rows_as, entries)
    plans = []
    for entry in entries:
        seed = secrets.randbelow(2**31)  # one per benchmark: every deployment scores the same rows
        for deployment in deployments:
            source = sources.get(entry["benchmark"])
            try:
                plans.append(
                    plan_eval(
                        project,
                        deployment=deployment,
                        benchmark=entry["benchmark"],
                        sample_limit=None if source else entry["sample_limit"],
                        seed=None if source else seed,
                        same_rows_as=source,
                        mode=entry["mode"],
                        benchmark_options=entry["options"] if entry["options"] or not source else None,
                        judge=judge if benchmarks.get(entry["benchmark"]).judged else None,
                        epochs=epochs,
                    )
                )
            except EvalConfigError as exc:
                raise SuiteError(f"{entry['benchmark']} on {deployment.name}: {exc}") from None
    # Bypassing the cache asks every deployment again: a reused cell would be the old answers after all.
    cells, reuse_notes = suite_cells.cells_of(project, plans, force=force or cache == CacheMode.BYPASS, cache=cache)
    notes += reuse_notes
    if any(cell.plan["judge"] is not None for cell in cells if cell.source is None):
        check_judge_answers(judge)
    with transaction.atomic():
        project.lock()
        if any(cell.source is None for cell in cells):
            check_active_limit(project)  # a run wholly reused is never active
        run = SuiteRun.objects.create(
            project=project,
            suite_name=suite_name,
            entries=entries,
            judge=judge,
            same_rows_as=same_rows_as,
            max_cost=max_cost,
            epochs=epochs,
            cache=cache,
            force=force,
            notes=notes,
            created_by=user,
        )
        run.deployments.set(deployments)
        evals = Eval.objects.bulk_create([suite_cells.new_eval(cell, suite_run=run, cache=cache, created_by=user) for cell in cells])
        for ev, cell in zip(evals, cells, strict=True):
            if cell.source is not None and not suite_cells.copy_samples(ev, cell.source):
                raise SuiteError(
                    f"Eval #{cell.source.pk}, whose rows {ev.benchmark} on {ev.deployment.name} was to reuse, was deleted meanwhile: start the run again."
                )
        transaction.on_commit(lambda: advance(run.pk))
    return run


def run_quick_suite_on_local_model(project, user) -> SuiteRun:
    """The one click of a project without a deployment: its local deployment registered if missing, and the quick suite started on it.

    Refused with nothing created while the project is in debt, when it has a
    deployment of its own (it measures that one), and when the local model
    cannot serve here (its weights, or loopback addresses refused).
    """
    if local_model.offer(project) is None:
        raise SuiteError("This project has deployments of its own: run the quick suite on them from Suites.")
    if problem := local_model.refusal():
        raise SuiteError(problem)
    # One transaction: a suite run refused (a debt, the project's limit of active evals) leaves no deployment behind either.
    with transaction.atomic():
        deployment = register_local_deployment(project)
        entries = [dict(entry) for entry in local_model.QUICK_SUITE]
        notes = [f"{name} left out: {why}." for name, why in local_model.QUICK_SUITE_LEAVES_OUT.items()]
        return create_suite_run(project, user, deployments=[deployment], suite_name="quick on the local model", entries=entries, notes=notes)


def _sources(project, same_rows_as: SuiteRun | None, entries: list[dict]) -> dict[str, Eval]:
    """{benchmark: the eval of `same_rows_as` whose rows each new eval of that benchmark takes}."""
    if same_rows_as is None:
        return {}
    if same_rows_as.project_id != project.pk:
        raise SuiteError("same_rows_as must name a suite run of this project.")
    evals = {}
    for ev in same_rows_as.evals.order_by("pk"):
        evals.setdefault(ev.benchmark, ev)
    missing = [e["benchmark"] for e in entries if e["benchmark"] not in evals]
    if missing:
        raise SuiteError(f"Suite run #{same_rows_as.pk} has no eval of {', '.join(missing)}: there are no rows of it to reuse.")
    return evals


def advance_all() -> int:
    """Scheduled: every suite run with a pending eval moves on (an eval ended without its worker advancing the suite)."""
    # Not those in debt (advance would queue nothing): they must not fill the batch ahead of the rest.
    waiting = SuiteRun.objects.filter(evals__status=Eval.Status.PENDING).exclude(project__account__balance_cents__lt=0)
    runs = waiting.values_list("pk", flat=True).distinct()[:100]
    return sum(advance(pk) for pk in runs)


def cancel_suite_run(run: SuiteRun) -> int:
    """Cancel every eval of the run still pending, queued or running; finished samples are kept."""
    return sum(cancel_eval(ev) for ev in run.evals.filter(status__in=Eval.ACTIVE))


def retry_suite_errors(run: SuiteRun) -> int:
    """Retry the errored samples of every ended eval of the run; how many samples."""
    if run.evals.filter(status__in=Eval.ACTIVE).exists():
        raise EvalBusy(f"Suite run #{run.pk} is still running: retry its errored samples once it ends.")
    total = 0
    for ev in run.evals.filter(error_count__gt=0):
        total += retry_errors(ev)
    if not total:
        raise SuiteError(f"Suite run #{run.pk} has no errored samples to retry.")
    return total


def resume_suite_run(run: SuiteRun, *, max_cost=None) -> int:
    """Continue a suite stopped at its budget or cancelled: a new budget, then its unfinished evals go on, one per deployment."""
    if max_cost is not None:
        if max_cost < 0:
            raise SuiteError("max_cost must not be negative.")
        SuiteRun.objects.filter(pk=run.pk).update(max_cost=max_cost)
        run.refresh_from_db()
    stopped = run.evals.filter(status__in=[Eval.Status.CANCELLED, Eval.Status.FAILED, Eval.Status.ERROR])
    resumed = 0
    for ev in stopped:
        if ev.done_count < ev.total or ev.total == 0:
            resumed += resume_eval(ev)  # pending again: the suite queues it in its deployment's turn
    if not resumed:
        raise SuiteError(f"Suite run #{run.pk} has no interrupted eval to resume.")
    return resumed


def progress(run: SuiteRun) -> dict:
    """Its evals by status, those reused from finished cells, and errors: one query."""
    stats = run.evals.aggregate(
        evals=Count("pk"),
        reused=Count("pk", filter=Q(reused_from__isnull=False)),
        active=Count("pk", filter=Q(status__in=Eval.ACTIVE)),
        succeeded=Count("pk", filter=Q(status=Eval.Status.SUCCEEDED)),
        # Interrupted with rows still to score: what "Resume" goes on with (one failed by its errors has none left).
        stopped=Count("pk", filter=Q(status__in=[Eval.Status.FAILED, Eval.Status.CANCELLED, Eval.Status.ERROR]) & (Q(done_count__lt=F("total")) | Q(total=0))),
        failed=Count("pk", filter=Q(status__in=[Eval.Status.FAILED, Eval.Status.ERROR])),
        errors=Sum("error_count", default=0),
    )
    return stats


def status_of(stats: dict) -> str:
    """The run's status from its evals': running while any is active, then succeeded, `failed` if any failed (its
    rows errored, its worker died, its data went), else `ended` (some cancelled or stopped at the budget)."""
    if stats["active"]:
        return "running"
    if stats["evals"] and stats["succeeded"] == stats["evals"]:
        return "succeeded"
    if stats["failed"]:
        return "failed"
    return "ended"
