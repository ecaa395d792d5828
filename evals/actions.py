import secrets

import yaml
from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django_q.tasks import async_task

from billing.actions import refuse_if_in_debt

from . import benchmarks
from .benchmarks.base import DataMissing, OptionError
from .models import Dataset, Deployment, Eval
from .scoring import DATASET_SCORERS, LLM_JUDGE, compile_pattern, timed_regex
from .validation import deployment_problem

MAX_SAMPLES_PER_PROBLEM = 20


class EvalConfigError(ValueError):
    """An eval request that breaks a rule; the message names the rule."""

    status_code = 400


class EvalLimitReached(EvalConfigError):
    """The project already has as many evals in progress as one project may."""

    status_code = 409


def create_eval(
    project,
    user,
    *,
    deployment,
    benchmark="",
    dataset=None,
    scorers=None,
    sample_limit=None,
    seed=None,
    generation=None,
    same_rows_as=None,
    samples_per_problem=1,
    max_cost=None,
    mode=None,
    benchmark_options=None,
) -> Eval:
    """Queue an eval. With `same_rows_as` (an eval of this project) it scores exactly that eval's rows,
    in its mode and with its benchmark options unless others are given.

    Evals cost nothing to start, but wait like runs while the project is in
    debt (InsufficientBalance, 402).
    """
    refuse_if_in_debt(project)
    scorers = list(scorers or [])
    if same_rows_as is not None:
        benchmark, dataset, sample_limit, seed, scorers = _rows_of(project, same_rows_as, benchmark, dataset, sample_limit, seed, scorers)
        mode = mode or same_rows_as.mode
        benchmark_options = same_rows_as.benchmark_options if benchmark_options is None else benchmark_options
    mode = mode or Eval.Mode.GENERATIVE
    benchmark_options = {} if benchmark_options is None else benchmark_options
    if benchmark and dataset is not None:
        raise EvalConfigError("A benchmark eval takes no dataset: choose either a benchmark or a dataset.")
    if benchmark:
        if benchmarks.get(benchmark) is None:
            raise EvalConfigError(f"Unknown benchmark {benchmark!r}; choose one of {', '.join(benchmarks.CATALOG)}.")
        try:
            benchmarks.get(benchmark).version()
        except DataMissing as exc:
            raise EvalConfigError(f"Benchmark {benchmark} cannot run here: {exc}") from None
        if scorers:
            raise EvalConfigError("A benchmark's scorer cannot be combined with other scorers: leave scorers empty for a benchmark eval.")
        if problem := deployment_problem(benchmarks.get(benchmark), deployment):
            raise EvalConfigError(problem)
        try:
            benchmark_options = benchmarks.get(benchmark).resolve_options(benchmark_options)
        except OptionError as exc:
            raise EvalConfigError(str(exc)) from None
    elif dataset is None:
        raise EvalConfigError("Choose a benchmark or a dataset.")
    elif benchmark_options:
        raise EvalConfigError("benchmark_options apply to a catalog benchmark; a dataset eval takes scorers instead.")
    else:
        scorers = _check_scorers(project, scorers)
    if sample_limit is not None and sample_limit < 1:
        raise EvalConfigError("sample_limit must be at least 1 (or unset for the full split).")
    if sample_limit is not None and sample_limit > (available := _row_count(benchmark, dataset)):
        raise EvalConfigError(f"sample_limit {sample_limit} is above the {available:,} rows of {benchmark or dataset.name}: leave it unset for all of them.")
    if not 1 <= samples_per_problem <= MAX_SAMPLES_PER_PROBLEM:
        raise EvalConfigError(f"samples_per_problem must be between 1 and {MAX_SAMPLES_PER_PROBLEM}.")
    if samples_per_problem > 1 and not (benchmark and benchmarks.get(benchmark).sandboxed):
        raise EvalConfigError("samples_per_problem (pass@k) applies to code benchmarks only (humaneval, mbpp).")
    if max_cost is not None and (max_cost < 0 or not deployment.is_priced):
        raise EvalConfigError("max_cost needs a deployment with prices per million tokens, and must not be negative.")
    _check_mode(mode, benchmark, deployment, generation)
    with transaction.atomic():
        project.lock()
        active = Eval.objects.filter(project=project, status__in=Eval.ACTIVE).count()
        if active >= settings.PROJECT_MAX_ACTIVE_EVALS:
            raise EvalLimitReached(f"This project already has {active} evals queued or running, its limit; start this one when one ends.")
        ev = Eval.objects.create(
            project=project,
            deployment=deployment,
            benchmark=benchmark,
            benchmark_version=benchmarks.get(benchmark).version() if benchmark else "",
            benchmark_options=benchmark_options if benchmark else {},
            dataset=dataset,
            scorers=scorers,
            sample_limit=sample_limit,
            seed=seed if seed is not None else secrets.randbelow(2**31),
            generation=generation or {},
            same_rows_as=same_rows_as,
            samples_per_problem=samples_per_problem,
            max_cost=max_cost,
            mode=mode,
            created_by=user,
        )
        transaction.on_commit(lambda: enqueue(ev))
    return ev


def _row_count(benchmark: str, dataset) -> int:
    return benchmarks.get(benchmark).row_count() if benchmark else dataset.row_count


def _rows_of(project, source, benchmark, dataset, sample_limit, seed, scorers):
    """The source eval's benchmark or dataset, limit and seed: select_rows() then draws exactly its rows."""
    if source.project_id != project.pk:
        raise EvalConfigError("same_rows_as must name an eval of this project.")
    if (benchmark and benchmark != source.benchmark) or (dataset is not None and dataset.pk != source.dataset_id):
        raise EvalConfigError(f"same_rows_as reuses eval #{source.pk}'s {source.label}: leave benchmark and dataset unset or equal to it.")
    if (sample_limit is not None and sample_limit != source.sample_limit) or (seed is not None and seed != source.seed):
        raise EvalConfigError(f"same_rows_as reuses eval #{source.pk}'s sample_limit and seed: leave them unset.")
    return source.benchmark, source.dataset, source.sample_limit, source.seed, scorers or list(source.scorers)


def _check_mode(mode, benchmark: str, deployment: Deployment, generation):
    """The mode must be the benchmark's, and the deployment able to serve it."""
    if mode not in Eval.Mode.values:
        raise EvalConfigError(f"Unknown mode {mode!r}; choose {' or '.join(Eval.Mode.values)}.")
    if mode == Eval.Mode.GENERATIVE:
        return  # any deployment generates: a completions one gets the prompt's messages as one text
    modes = benchmarks.get(benchmark).modes if benchmark else (Eval.Mode.GENERATIVE,)
    if mode not in modes:
        what = f"Benchmark {benchmark}" if benchmark else "A dataset eval"
        raise EvalConfigError(f"{what} runs in generative mode only: log-likelihood mode is for multiple-choice benchmarks.")
    if deployment.api_style != Deployment.Style.COMPLETIONS:
        raise EvalConfigError(
            f"Log-likelihood mode needs a deployment with api_style=completions that returns prompt logprobs (echo + logprobs, as vLLM serves); "
            f"{deployment.name} is a {deployment.get_api_style_display().lower()} deployment."
        )
    if generation:
        raise EvalConfigError("Log-likelihood mode generates nothing: leave generation settings unset.")


def _check_scorers(project, scorers) -> list:
    if not scorers:
        raise EvalConfigError("A dataset eval needs at least one scorer: " + ", ".join([*DATASET_SCORERS, LLM_JUDGE]) + ".")
    checked = []
    for scorer in scorers:
        name = scorer.get("name") if isinstance(scorer, dict) else scorer
        if name == LLM_JUDGE:
            judge_id = scorer.get("deployment") if isinstance(scorer, dict) else None
            if not Deployment.objects.filter(project=project, pk=judge_id).exists():
                raise EvalConfigError('The llm_judge scorer needs a judge deployment of this project: {"name": "llm_judge", "deployment": ID}.')
            checked.append({"name": LLM_JUDGE, "deployment": judge_id})
        elif name in DATASET_SCORERS:
            options = scorer.get("options", {}) if isinstance(scorer, dict) else {}
            if name == "regex" and not options.get("pattern"):
                raise EvalConfigError('The regex scorer needs a pattern: {"name": "regex", "options": {"pattern": "..."}}.')
            if name == "regex":
                try:
                    compile_pattern(str(options["pattern"]).replace("{expected}", "x"))
                except timed_regex.error as exc:
                    raise EvalConfigError(f"The regex scorer's pattern is invalid: {exc}.") from None
            checked.append({"name": name, "options": options} if options else name)
        else:
            raise EvalConfigError(f"Unknown scorer {name!r}; choose from " + ", ".join([*DATASET_SCORERS, LLM_JUDGE]) + ".")
    return checked


def enqueue(ev: Eval):
    # Their own queue, worked by their own cluster (Q_CLUSTER_NAME=evals):
    # a flood of evals never delays a paid run.
    async_task("evals.tasks.run_eval", ev.pk, task_name=f"eval-{ev.pk}", cluster=settings.EVAL_QUEUE)


def cancel_eval(ev: Eval) -> bool:
    """Stop new requests; what finished is kept."""
    return bool(
        Eval.objects.filter(pk=ev.pk, status__in=Eval.ACTIVE).update(
            status=Eval.Status.CANCELLED, finished_at=timezone.now(), status_message="Cancelled: finished samples are kept."
        )
    )


def resume_eval(ev: Eval, *, max_cost=None, automatic: bool = False) -> bool:
    """Queue an interrupted eval again; it scores only the rows it has not stored.

    A new `max_cost` replaces the budget: how an eval stopped at its budget goes on.
    An automatic resume (after a stall) counts against EVAL_MAX_AUTO_RESUMES;
    one a person asks for starts the count again.
    """
    if max_cost is not None and max_cost < 0:
        raise EvalConfigError("max_cost must not be negative.")
    if not automatic:
        refuse_if_in_debt(ev.project)
    changes = {"max_cost": max_cost} if max_cost is not None else {}
    stale_before = timezone.now() - timezone.timedelta(seconds=_stale_seconds())
    resumable = Eval.objects.filter(pk=ev.pk, status__in=[Eval.Status.FAILED, Eval.Status.CANCELLED, Eval.Status.ERROR]) | Eval.objects.filter(
        pk=ev.pk, status=Eval.Status.RUNNING, heartbeat_at__lt=stale_before
    )
    count = F("auto_resumes") + 1 if automatic else 0
    with transaction.atomic():
        if not resumable.update(
            status=Eval.Status.QUEUED, finished_at=None, status_message="Resumed.", auto_resumes=count, queued_at=timezone.now(), **changes
        ):
            return False
        transaction.on_commit(lambda: enqueue(ev))
    return True


def next_pass(ev: Eval, *, progressed: bool) -> bool:
    """A pass that reached its time limit queues the next, which scores only the rows not stored; True if it did.

    A pass that stored nothing counts as a stall, as a worker that stopped
    does: past EVAL_MAX_AUTO_RESUMES of them in a row the eval ends `error`.
    """
    with transaction.atomic():
        current = Eval.objects.select_for_update().filter(pk=ev.pk, status=Eval.Status.RUNNING).first()
        if current is None:
            return False
        if not progressed and current.auto_resumes >= settings.EVAL_MAX_AUTO_RESUMES:
            Eval.objects.filter(pk=ev.pk).update(
                status=Eval.Status.ERROR,
                finished_at=timezone.now(),
                status_message=(
                    f"{current.auto_resumes + 1} passes in a row stored nothing ({settings.EVAL_PASS_SECONDS} s each); "
                    "finished samples are kept. Resume to try again."
                ),
            )
            return False
        Eval.objects.filter(pk=ev.pk).update(
            status=Eval.Status.QUEUED,
            queued_at=timezone.now(),
            auto_resumes=0 if progressed else F("auto_resumes") + 1,
            status_message=f"Continues in its next pass: {current.done_count:,} of {current.total:,} rows stored.",
        )
        transaction.on_commit(lambda: enqueue(current))
    return True


def _stale_seconds():
    return settings.EVAL_STALE_SECONDS


CONFIG_FIELDS = {
    "benchmark",
    "benchmark_options",
    "dataset_id",
    "deployment",
    "generation",
    "max_cost",
    "mode",
    "same_rows_as",
    "sample_limit",
    "samples_per_problem",
    "scorers",
    "seed",
}


def parse_config(text: str) -> dict:
    """An eval config file (YAML, or JSON, which is YAML) into the API's fields."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise EvalConfigError(f"The config is not valid YAML or JSON: {exc}") from None
    if not isinstance(data, dict):
        raise EvalConfigError("The config must be a mapping of fields (benchmark, deployment, sample_limit, …).")
    unknown = set(data) - CONFIG_FIELDS
    if unknown:
        raise EvalConfigError(f"Unknown config fields: {', '.join(sorted(unknown))}. Allowed: {', '.join(sorted(CONFIG_FIELDS))}.")
    return data


def dataset_for(project, dataset_id) -> Dataset | None:
    return Dataset.objects.filter(project=project, pk=dataset_id).first() if dataset_id is not None else None
