import secrets

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from belvedir.core import jsonvalues
from billing.actions import debt_gate, refuse_if_in_debt

from . import benchmarks, local_model, queue, statistics
from .benchmarks.base import DataMissing, OptionError
from .comparison import NotPaired, check_same_rows, stopped_early
from .config_files import read_fields
from .connection import try_connection
from .engine import refresh_counters
from .models import CacheMode, Dataset, DatasetVersion, Deployment, Eval, Sample, SampleAttempt
from .scoring.base import ScorerConfigError, config
from .scoring.scorers import SCORERS, named, read_config
from .validation import deployment_problem

MAX_SAMPLES_PER_PROBLEM = 20
MAX_EPOCHS = 10
# The range of a decision's α and of a precision target (the model's validators'); a decision's α is statistics.ALPHA unless told.
TARGET_RANGE = (0.0001, 0.5)


class EvalConfigError(ValueError):
    """An eval request that breaks a rule; the message names the rule."""

    status_code = 400


class EvalLimitReached(EvalConfigError):
    """The project already has as many evals in progress as one project may."""

    status_code = 409


@debt_gate("an eval: its deployment's and judge's tokens")
def create_eval(project, user, **options) -> Eval:
    """Queue an eval (`plan_eval` lists the options and checks them). With `same_rows_as` (an eval of this
    project) it scores exactly that eval's rows, in its mode and with its benchmark options unless others are given.

    Evals cost nothing to start, but wait like runs while the project is in
    debt (InsufficientBalance, 402). A judge that does not answer refuses the
    eval before anything is created.
    """
    refuse_if_in_debt(project)
    fields = plan_eval(project, **options)
    check_judge_answers(fields["judge"])
    with transaction.atomic():
        project.lock()
        check_active_limit(project)
        ev = Eval.objects.create(**fields, created_by=user)
        transaction.on_commit(lambda: queue.enqueue(ev))
    return ev


def register_local_deployment(project) -> Deployment:
    """The project's deployment of the local model (evals/local_model.py), created the first time: demo_setup and the quick-suite button share it.

    Found by its name, which is unique in a project, so two requests at once
    make one; one registered before is kept as it is (evals point at it).
    """
    deployment, _ = Deployment.objects.get_or_create(project=project, name=local_model.NAME, defaults=local_model.deployment_fields())
    return deployment


def check_active_limit(project):
    """A project runs at most PROJECT_MAX_ACTIVE_EVALS evals at once; a suite run, whatever its size, counts as one."""
    alone = Eval.objects.filter(project=project, status__in=Eval.ACTIVE, suite_run__isnull=True).count()
    suites = Eval.objects.filter(project=project, status__in=Eval.ACTIVE, suite_run__isnull=False).values("suite_run").distinct().count()
    if alone + suites >= settings.PROJECT_MAX_ACTIVE_EVALS:
        raise EvalLimitReached(f"This project already has {alone + suites} evals or suite runs queued or running, its limit; start this one when one ends.")


def check_judge_answers(judge: Deployment | None):
    """One tiny request to the judge: an eval whose every verdict would fail is refused instead of started."""
    if judge is None:
        return
    answer = try_connection(judge)
    if not answer["ok"]:
        raise EvalConfigError(f"The judge deployment {judge.name} cannot be reached: {answer['error']}")


def plan_eval(
    project,
    *,
    deployment,
    benchmark="",
    dataset=None,
    dataset_version=None,
    scorers=None,
    sample_limit=None,
    seed=None,
    generation=None,
    same_rows_as=None,
    samples_per_problem=1,
    max_cost=None,
    mode=None,
    benchmark_options=None,
    judge=None,
    epochs=1,
    cache=CacheMode.AUTO,
    decide_against=None,
    decision_alpha=None,
    precision_target=None,
) -> dict:
    """An eval's fields, every rule checked; EvalConfigError (400) naming the first one broken. Nothing is created."""
    for what, value in (("benchmark_options", benchmark_options), ("generation", generation), ("scorers", scorers)):
        try:
            jsonvalues.check(value, what)
        except jsonvalues.JsonValueError as exc:
            raise EvalConfigError(exc.message) from None
    if seed is not None and not jsonvalues.INT_MIN <= seed <= jsonvalues.INT_MAX:
        raise EvalConfigError("seed is a whole number that fits 64 bits (its column's type).")
    if problem := local_model.deployment_problem(deployment):
        # Its server will not start without the weights: every row would fail to connect.
        raise EvalConfigError(problem)
    scorers = list(scorers or [])
    if decide_against is not None and decide_against.project_id != project.pk:
        raise EvalConfigError("decide_against must name an eval of this project.")
    if decide_against is not None and same_rows_as is None and not benchmark and dataset is None:
        same_rows_as = decide_against  # deciding against an eval means scoring its rows
    if same_rows_as is not None:
        benchmark, dataset, dataset_version, sample_limit, seed, scorers = _rows_of(
            project, same_rows_as, benchmark, dataset, dataset_version, sample_limit, seed, scorers
        )
        mode = mode or same_rows_as.mode
        benchmark_options = same_rows_as.benchmark_options if benchmark_options is None else benchmark_options
    mode = mode or Eval.Mode.GENERATIVE
    benchmark_options = {} if benchmark_options is None else benchmark_options
    if benchmark and dataset is not None:
        raise EvalConfigError("A benchmark eval takes no dataset: choose either a benchmark or a dataset.")
    if benchmark:
        check_benchmark(benchmark)
        if scorers:
            raise EvalConfigError("A benchmark's scorer cannot be combined with other scorers: leave scorers empty for a benchmark eval.")
        if problem := deployment_problem(benchmarks.get(benchmark), deployment) or local_model.benchmark_problem(benchmarks.get(benchmark), deployment):
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
        if same_rows_as is not None and judge is None and scorers == list(same_rows_as.scorers):
            judge = same_rows_as.judge  # its scorers, so its judge
        scorers, judge = _check_scorers(project, scorers, judge)
        dataset_version = _check_dataset_version(dataset, dataset_version)
    if dataset_version is not None and dataset is None:
        raise EvalConfigError("dataset_version pins a dataset's version: give the dataset too.")
    judge = _check_judge(project, benchmark, scorers, judge)
    if sample_limit is not None and sample_limit < 1:
        raise EvalConfigError("sample_limit must be at least 1 (or unset for the full split).")
    if sample_limit is not None and sample_limit > (available := _row_count(benchmark, dataset, dataset_version)):
        raise EvalConfigError(f"sample_limit {sample_limit} is above the {available:,} rows of {benchmark or dataset.name}: leave it unset for all of them.")
    if not 1 <= samples_per_problem <= MAX_SAMPLES_PER_PROBLEM:
        raise EvalConfigError(f"samples_per_problem must be between 1 and {MAX_SAMPLES_PER_PROBLEM}.")
    if samples_per_problem > 1 and not (benchmark and benchmarks.get(benchmark).sandboxed):
        raise EvalConfigError("samples_per_problem (pass@k) applies to code benchmarks only (humaneval, mbpp).")
    _check_epochs(epochs, samples_per_problem, mode)
    if max_cost is not None and (max_cost < 0 or not (deployment.is_priced or (judge is not None and judge.is_priced))):
        raise EvalConfigError("max_cost needs a deployment with prices per million tokens, and must not be negative.")
    _check_mode(mode, benchmark, deployment, generation)
    if cache not in CacheMode.values:
        raise EvalConfigError(f"cache must be one of {', '.join(CacheMode.values)} (bypass: ask the deployment again and keep its fresh answers).")
    fields = {
        "project": project,
        "deployment": deployment,
        "benchmark": benchmark,
        "benchmark_version": benchmarks.get(benchmark).version() if benchmark else "",
        "benchmark_options": benchmark_options if benchmark else {},
        "dataset": dataset,
        "dataset_version": dataset_version if dataset is not None else None,
        "scorers": scorers,
        "sample_limit": sample_limit,
        "seed": seed if seed is not None else secrets.randbelow(2**31),
        "generation": generation or {},
        "same_rows_as": same_rows_as,
        "samples_per_problem": samples_per_problem,
        "max_cost": max_cost,
        "mode": mode,
        "judge": judge,
        "epochs": epochs,
        "cache": cache,
    }
    return fields | stopping_targets(project, fields, decide_against, decision_alpha, precision_target)


def stopping_targets(project, fields: dict, decide_against, decision_alpha, precision_target) -> dict:
    """Stopping early (evals/early_stop.py): against an eval that scores the same rows (of this project: plan_eval
    checked), at an α, or at an interval half-width; EvalConfigError naming the field otherwise."""
    for name, value in (("decision_alpha", decision_alpha), ("precision_target", precision_target)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or not TARGET_RANGE[0] <= value <= TARGET_RANGE[1]):
            raise EvalConfigError(f"{name} must be a number between {TARGET_RANGE[0]:g} and {TARGET_RANGE[1]:g}.")
    if decide_against is None:
        if decision_alpha is not None:
            raise EvalConfigError("decision_alpha is the α of a decision against another eval: give decide_against too.")
        return {"precision_target": precision_target}
    try:
        check_same_rows(decide_against, Eval(**fields))
    except NotPaired as exc:
        raise EvalConfigError(f"decide_against: {exc}") from None
    alpha = statistics.ALPHA if decision_alpha is None else decision_alpha
    return {"decide_against": decide_against, "decision_alpha": alpha, "precision_target": precision_target}


def check_benchmark(name: str):
    """The benchmark is in the catalog and its data installed, or EvalConfigError saying which and how to fix it."""
    if benchmarks.get(name) is None:
        raise EvalConfigError(f"Unknown benchmark {name!r}; choose one of {', '.join(benchmarks.CATALOG)}.")
    try:
        benchmarks.get(name).version()
    except DataMissing as exc:
        raise EvalConfigError(f"Benchmark {name} cannot run here: {exc}") from None


def _check_judge(project, benchmark: str, scorers: list, judge: Deployment | None) -> Deployment | None:
    """The eval's judge: the one given for a judged benchmark, or the llm_judge scorer's for a dataset (_check_scorers)."""
    if judge is not None and judge.project_id != project.pk:
        raise EvalConfigError("The judge must be a deployment of this project.")
    if not benchmark:
        return judge
    if benchmarks.get(benchmark).judged:
        if judge is None:
            raise EvalConfigError(f"{benchmark} is graded by an LLM judge: choose a judge deployment (judge), preferably not the one under test.")
        return judge
    if judge is not None:
        raise EvalConfigError(f"{benchmark} is not judged by a model: leave judge unset.")
    return None


def _check_epochs(epochs: int, samples_per_problem: int, mode: str):
    if not 1 <= epochs <= MAX_EPOCHS:
        raise EvalConfigError(f"epochs must be between 1 and {MAX_EPOCHS}.")
    if epochs > 1 and samples_per_problem > 1:
        raise EvalConfigError("Choose epochs or samples_per_problem: both ask each row several times (pass@k reads them as tries, epochs as reruns).")
    if epochs > 1 and mode == Eval.Mode.LOGLIKELIHOOD:
        raise EvalConfigError("Log-likelihoods are the same every time: epochs apply to generative evals.")


def _row_count(benchmark: str, dataset, dataset_version) -> int:
    if benchmark:
        return benchmarks.get(benchmark).row_count()
    return DatasetVersion.objects.get(dataset=dataset, number=dataset_version).row_count


def _check_dataset_version(dataset, number) -> int:
    """The version a dataset eval scores: the one asked for, or the dataset's latest."""
    if number is None:
        return dataset.version
    if not isinstance(number, int) or not 1 <= number <= dataset.version:
        raise EvalConfigError(f"Dataset {dataset.name} has versions 1 to {dataset.version}: dataset_version {number!r} is not one of them.")
    return number


def _rows_of(project, source, benchmark, dataset, dataset_version, sample_limit, seed, scorers):
    """The source eval's benchmark or dataset version, limit and seed: select_rows() then draws exactly its rows,
    however its dataset changed since."""
    if source.project_id != project.pk:
        raise EvalConfigError("same_rows_as must name an eval of this project.")
    if (benchmark and benchmark != source.benchmark) or (dataset is not None and dataset.pk != source.dataset_id):
        raise EvalConfigError(f"same_rows_as reuses eval #{source.pk}'s {source.label}: leave benchmark and dataset unset or equal to it.")
    if dataset_version is not None and dataset_version != source.dataset_version:
        raise EvalConfigError(
            f"same_rows_as reuses eval #{source.pk}'s rows, those of version {source.dataset_version} of {source.label}: leave dataset_version unset."
        )
    if (sample_limit is not None and sample_limit != source.sample_limit) or (seed is not None and seed != source.seed):
        raise EvalConfigError(f"same_rows_as reuses eval #{source.pk}'s sample_limit and seed: leave them unset.")
    return source.benchmark, source.dataset, source.dataset_version, source.sample_limit, source.seed, scorers or list(source.scorers)


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
    # Whatever its api_style: log-likelihood asks the server's /completions (echo + logprobs), which vLLM and the
    # local model's server serve beside /chat/completions. A server without it errors each row, saying so.
    if generation:
        raise EvalConfigError("Log-likelihood mode generates nothing: leave generation settings unset.")


def _check_scorers(project, scorers, judge: Deployment | None) -> tuple[list, Deployment | None]:
    """A dataset eval's scorers, each {"name", "options"} checked, and its judge: the eval's, which a scorer that
    needs one (llm_judge) asks; the old shape names it beside the scorer ({"name": "llm_judge", "deployment": ID})."""
    if not scorers:
        raise EvalConfigError("A dataset eval needs at least one scorer: " + ", ".join(SCORERS) + ".")
    checked = []
    for entry in scorers:
        try:
            name, options, deployment = read_config(entry)
            scorer = named(name)
            checked.append(config(name, scorer.check(options)))
        except ScorerConfigError as exc:
            raise EvalConfigError(str(exc)) from None
        if deployment is not None:
            named_judge = Deployment.objects.filter(project=project, pk=deployment).first() if isinstance(deployment, int) else None
            if named_judge is None:
                raise EvalConfigError(f"The {name} scorer's judge must be a deployment of this project.")
            if judge is not None and judge.pk != named_judge.pk:
                raise EvalConfigError(f"The {name} scorer names another judge than the eval's judge: give one.")
            judge = named_judge
    judged = [entry["name"] for entry in checked if named(entry["name"]).needs_judge]
    if len(judged) > 1:
        raise EvalConfigError("One judge per eval: give the llm_judge scorer once.")
    if judged and judge is None:
        raise EvalConfigError(f"The {judged[0]} scorer needs a judge deployment of this project: give the eval a judge (judge).")
    if judge is not None and not judged:
        raise EvalConfigError('A dataset eval is judged through its llm_judge scorer: add {"name": "llm_judge", "options": {}} to its scorers.')
    return checked, judge


def cancel_eval(ev: Eval) -> bool:
    """Stop new requests; what finished is kept."""
    return bool(
        Eval.objects.filter(pk=ev.pk, status__in=Eval.ACTIVE).update(
            status=Eval.Status.CANCELLED, finished_at=timezone.now(), status_message="Cancelled: finished samples are kept."
        )
    )


@debt_gate("an eval's further rows (automatic passes are refused by run_eval)")
def resume_eval(ev: Eval, *, max_cost=None, automatic: bool = False) -> bool:
    """Queue an interrupted eval again; it scores only the rows it has not stored.

    A new `max_cost` replaces the budget: how an eval stopped at its budget goes on.
    One that stopped early (evals/early_stop.py) scores the rest of its rows; its
    stop is kept as {"resumed": ...}, and it is not looked at again.
    An automatic resume (after a stall) counts against EVAL_MAX_AUTO_RESUMES;
    one a person asks for starts the count again.
    """
    if max_cost is not None and max_cost < 0:
        raise EvalConfigError("max_cost must not be negative.")
    if not automatic:
        refuse_if_in_debt(ev.project)
    changes = {"max_cost": max_cost} if max_cost is not None else {}
    stale_before = timezone.now() - timezone.timedelta(seconds=_stale_seconds())
    resumable = (
        Eval.objects.filter(pk=ev.pk, status__in=[Eval.Status.FAILED, Eval.Status.CANCELLED, Eval.Status.ERROR])
        | Eval.objects.filter(pk=ev.pk, status=Eval.Status.RUNNING, heartbeat_at__lt=stale_before)
        | Eval.objects.filter(pk=ev.pk, status=Eval.Status.SUCCEEDED, early_stop__has_key="reason")
    )
    count = F("auto_resumes") + 1 if automatic else 0
    # A stalled eval keeps its place (its deployment's turn in a suite); one a person resumes waits for its suite's turn.
    status = Eval.Status.QUEUED if automatic else queue.waiting_status(ev)
    with transaction.atomic():
        stop = Eval.objects.select_for_update().filter(pk=ev.pk).values_list("early_stop", flat=True).first() or {}
        if "reason" in stop and not automatic:
            # A stall after the stop was written resumes stopped (its next pass asks nothing and ends it); a person's resume goes on.
            changes["early_stop"] = {"resumed": stop}
        if not resumable.update(status=status, finished_at=None, status_message="Resumed.", auto_resumes=count, queued_at=timezone.now(), **changes):
            return False
        transaction.on_commit(lambda: queue.enqueue(ev) if automatic else queue.start(ev))
    return True


class EvalBusy(EvalConfigError):
    """The eval is still queued or running: what is asked must wait for its end."""

    status_code = 409


@debt_gate("an eval's failed rows asked again")
def retry_errors(ev: Eval) -> int:
    """Ask again only the rows that errored (timeouts, 5xx, a broken sandbox, an unusable verdict); how many.

    Each errored try is kept as a SampleAttempt (when, what failed, its tokens),
    so the eval's tokens and cost add up over attempts; the row itself is
    stored afresh by the next pass, which asks nothing else.
    """
    refuse_if_in_debt(ev.project)
    with transaction.atomic():
        current = Eval.objects.select_for_update().get(pk=ev.pk)
        if current.is_active:
            raise EvalBusy(f"Eval #{ev.pk} is {current.status}: retry its errored samples once it ends.")
        if stopped_early(current):
            # Its next pass would ask nothing: a stopped eval sends no request, not even a retry.
            raise EvalConfigError(
                f"Eval #{ev.pk} stopped early ({current.early_stop['summary']}): resume it to score the rest of its rows, then retry its errors."
            )
        errored = Sample.objects.filter(eval=ev).exclude(error="")
        attempts = [
            SampleAttempt(
                eval_id=ev.pk,
                row_index=sample.row_index,
                error=sample.error,
                output=sample.output,
                prompt_tokens=sample.prompt_tokens,
                completion_tokens=sample.completion_tokens,
                judge_prompt_tokens=sample.judge_prompt_tokens,
                judge_completion_tokens=sample.judge_completion_tokens,
                at=sample.created_at,
            )
            for sample in errored
        ]
        if not attempts:
            raise EvalConfigError(f"Eval #{ev.pk} has no errored samples to retry.")
        SampleAttempt.objects.bulk_create(attempts)
        errored.delete()
        Eval.objects.filter(pk=ev.pk).update(
            status=queue.waiting_status(current),
            finished_at=None,
            auto_resumes=0,
            queued_at=timezone.now(),
            status_message=f"Retrying {len(attempts)} errored sample{'s' if len(attempts) != 1 else ''}; the rest are kept.",
        )
        refresh_counters(ev.pk)
        transaction.on_commit(lambda: queue.start(current))
    return len(attempts)


@debt_gate("an eval's outputs scored again (a judge's tokens)")
def rescore_eval(ev: Eval, user) -> Eval:
    """A new eval on the same rows, scored from `ev`'s stored outputs: the deployment is not asked again, so it costs
    no token of the deployment's (a judged benchmark's judge is asked again, and counted)."""
    if ev.is_active:
        raise EvalBusy(f"Eval #{ev.pk} is {ev.status}: re-score it once it ends.")
    if ev.mode == Eval.Mode.LOGLIKELIHOOD:
        raise EvalConfigError("A log-likelihood eval stores its options' rounded log-likelihoods only: run it again instead of re-scoring it.")
    if ev.benchmark and benchmarks.get(ev.benchmark) is not None and benchmarks.get(ev.benchmark).version() != ev.benchmark_version:
        raise EvalConfigError(f"{ev.benchmark}'s data changed since eval #{ev.pk}: its rows are not the same, so its outputs cannot be re-scored.")
    refuse_if_in_debt(ev.project)
    check_judge_answers(ev.judge)
    with transaction.atomic():
        ev.project.lock()
        check_active_limit(ev.project)
        rescored = Eval.objects.create(
            project=ev.project,
            deployment=ev.deployment,
            benchmark=ev.benchmark,
            benchmark_version=ev.benchmark_version,
            benchmark_options=ev.benchmark_options,
            dataset=ev.dataset,
            dataset_version=ev.dataset_version,
            scorers=ev.scorers,
            sample_limit=ev.sample_limit,
            seed=ev.seed,
            generation=ev.generation,
            same_rows_as=ev,
            rescored_from=ev,
            samples_per_problem=ev.samples_per_problem,
            epochs=ev.epochs,
            mode=ev.mode,
            judge=ev.judge,
            created_by=user,
        )
        transaction.on_commit(lambda: queue.enqueue(rescored))
    return rescored


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
        transaction.on_commit(lambda: queue.enqueue(current))
    return True


def _stale_seconds():
    return settings.EVAL_STALE_SECONDS


CONFIG_FIELDS = {
    "benchmark",
    "benchmark_options",
    "dataset_id",
    "dataset_version",
    "decide_against",
    "decision_alpha",
    "deployment",
    "epochs",
    "judge",
    "generation",
    "max_cost",
    "mode",
    "precision_target",
    "same_rows_as",
    "sample_limit",
    "samples_per_problem",
    "scorers",
    "seed",
}


def parse_config(text: str) -> dict:
    """An eval config file (YAML, or JSON, which is YAML) into the API's fields."""
    return read_fields(text, allowed=CONFIG_FIELDS, what="config", hint="benchmark, deployment, sample_limit, …", error=EvalConfigError)


def dataset_for(project, dataset_id) -> Dataset | None:
    return Dataset.objects.filter(project=project, pk=dataset_id).first() if dataset_id is not None else None
