from collections import defaultdict
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import pluralize
from django.views.decorators.http import require_POST

from belvedir.core.charts import Estimate, Series, interval_chart, line_chart
from belvedir.core.htmx import polled
from belvedir.core.listing import listing
from belvedir.core.scoping import get_scoped_or_404
from billing.errors import InsufficientBalance

from . import benchmarks, local_model
from .actions import EvalConfigError, cancel_eval, create_eval, rescore_eval, resume_eval, retry_errors
from .api import attempts_by_row, eval_warnings, filter_samples
from .categories import category_scores
from .comparison import NotPaired, compare_evals, decision_alpha
from .connection import try_connection
from .downloads import samples_file
from .filters import DeploymentFilter, EvalFilter
from .forms import BenchmarkEvalForm, DatasetEvalForm, DeploymentForm, RerunForm, SampleSizeForm, posted_budget
from .metrics import metrics
from .models import CacheMode, Deployment, Eval
from .noise import noise
from .response_cache import clear_cache, not_cached_because, source_of
from .scoring.calibration import LabelRefused, calibration_status, label_verdict, labels_by_row, posted_grade, verdicts_of


@login_required
def eval_list(request):
    evals = Eval.objects.for_user(request.user, request.project).select_related("deployment", "dataset")
    return render(request, "evals/list.html", {**listing(request, EvalFilter, evals), "benchmarks": benchmarks.CATALOG})


def _refused_status(exc) -> int:
    # A form the user can fix answers 200 with its errors; a debt is a 402, as for runs.
    return exc.status_code if isinstance(exc, InsufficientBalance) else 200


@login_required
def benchmark_catalog(request):
    return render(request, "evals/benchmarks.html", {"catalog": [benchmarks.describe(b) for b in benchmarks.CATALOG.values()]})


@login_required
def create_benchmark_eval(request):
    initial = {"benchmark": request.GET.get("benchmark"), "sample_limit": request.GET.get("sample_limit")}
    form = BenchmarkEvalForm(request.POST or None, project=request.project, initial=initial)
    sizing = SampleSizeForm(request.GET if "gap" in request.GET else None)
    if request.htmx and request.GET.get("part") == "sample_size":
        return render(request, "evals/_sample_size.html", {"sizing": sizing})
    status = 200
    if request.method == "POST" and form.is_valid():
        try:
            ev = create_eval(
                request.project,
                request.user,
                deployment=form.cleaned_data["deployment"],
                benchmark=form.cleaned_data["benchmark"],
                sample_limit=form.cleaned_data["sample_limit"],
                samples_per_problem=form.cleaned_data["samples_per_problem"] or 1,
                max_cost=form.cleaned_data["max_cost"],
                mode=form.cleaned_data["mode"],
                benchmark_options=form.benchmark_options(),
                judge=form.cleaned_data["judge"],
                epochs=form.cleaned_data["epochs"] or 1,
                cache=form.cleaned_data["cache"] or CacheMode.AUTO,
                precision_target=form.cleaned_data["precision_target"],
            )
        except (EvalConfigError, InsufficientBalance) as exc:
            form.add_error(None, str(exc))
            status = _refused_status(exc)
        else:
            return redirect(ev)
    context = {"form": form, "sizing": sizing, "local_model_offer": local_model.offer(request.project)}
    return render(request, "evals/create_benchmark.html", context, status=status)


@login_required
def create_dataset_eval(request):
    initial = {"dataset": request.GET.get("dataset"), "dataset_version": request.GET.get("dataset_version")}
    form = DatasetEvalForm(request.POST or None, project=request.project, initial=initial)
    status = 200
    if request.method == "POST" and form.is_valid():
        try:
            ev = create_eval(
                request.project,
                request.user,
                deployment=form.cleaned_data["deployment"],
                dataset=form.cleaned_data["dataset"],
                dataset_version=form.cleaned_data["dataset_version"],
                scorers=form.scorer_config(),
                judge=form.cleaned_data["judge"],
                sample_limit=form.cleaned_data["sample_limit"],
                cache=form.cleaned_data["cache"] or CacheMode.AUTO,
            )
        except (EvalConfigError, InsufficientBalance) as exc:
            form.add_error(None, str(exc))
            status = _refused_status(exc)
        else:
            return redirect(ev)
    return render(request, "evals/create_dataset.html", {"form": form}, status=status)


@login_required
def eval_detail(request, pk):
    ev = get_scoped_or_404(request, Eval.objects.for_user(request.user, request.project).select_related("deployment", "dataset", "judge"), pk=pk)
    if request.htmx and request.GET.get("part") == "progress":
        # The whole page changes when an eval ends (buttons, samples): reload it once.
        return polled(render(request, "evals/_progress.html", {"ev": ev}), done=not ev.is_active, reload_page=True)
    which = request.GET.get("filter")
    samples = Paginator(filter_samples(ev.samples.all(), which), 50).get_page(request.GET.get("page"))
    benchmark, dataset_id, dataset_version, sample_limit, seed = ev.source_key()
    same_rows = (
        Eval.objects.for_user(request.user, ev.project)
        .filter(benchmark=benchmark, dataset_id=dataset_id, dataset_version=dataset_version, sample_limit=sample_limit, seed=seed)
        .exclude(pk=ev.pk)
        .select_related("deployment")[:20]
    )
    context = {
        "ev": ev,
        "samples": samples,
        "which": which,
        # The shared pager's links keep the filter.
        "samples_query": urlencode({"filter": which}) if which else "",
        "same_rows": same_rows,
        "rerun_form": RerunForm(project=ev.project),
    }
    benchmark = benchmarks.get(ev.benchmark) if ev.benchmark else None
    scale = benchmark.scale if benchmark is not None else (0.0, 1.0)
    context["categories"] = [
        {
            "axis": axis,
            "entries": entries,
            "chart": interval_chart([Estimate(e["name"], e["score"], *e["score_ci"], scale=scale) for e in entries], title=f"score by {axis}"),
        }
        for axis, entries in category_scores(ev).items()
    ]
    context["metrics"] = metrics(ev)
    context["cache_note"] = not_cached_because(ev, ev.generation)
    context["noise"] = noise(ev)
    context["warnings"] = eval_warnings(ev)
    context["calibration"] = calibration_status(ev) if ev.judge_id else None
    context["concurrency"] = _concurrency_charts(ev.concurrency)
    context["attempts"] = attempts_by_row(ev, samples)
    context["labels"] = labels_by_row(ev, samples, request.user)
    for sample in samples:
        sample.verdicts = verdicts_of(sample) if ev.judge_id and not sample.error else []
    return render(request, "evals/detail.html", context)


def _concurrency_charts(points: list) -> dict | None:
    """The latest pass's gate over time (evals/concurrency.py): the level allowed and requests in flight, and answers per second."""
    if len(points) < 2:
        return None

    def series(name, column):
        return Series(name, [(point[0], point[column]) for point in points])

    return {
        "seconds": points[-1][0],
        "levels": line_chart(
            [series("allowed", 1), series("in flight", 2)], height=180, y_label="requests in flight", x_label="seconds into the pass", dots=False
        ),
        "rate": line_chart([series("answers per second", 3)], height=140, y_label="answers per second", x_label="seconds into the pass", dots=False),
    }


@login_required
@require_POST
def eval_retry_errors(request, pk):
    ev = get_scoped_or_404(request, Eval.objects.for_user(request.user, request.project), pk=pk)
    try:
        retried = retry_errors(ev)
    except (EvalConfigError, InsufficientBalance) as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Retrying {retried} errored sample{'s' if retried != 1 else ''}: only those rows are asked again.")
    return redirect(ev)


@login_required
@require_POST
def eval_rescore(request, pk):
    ev = get_scoped_or_404(request, Eval.objects.for_user(request.user, request.project), pk=pk)
    try:
        rescored = rescore_eval(ev, request.user)
    except (EvalConfigError, InsufficientBalance) as exc:
        messages.error(request, str(exc))
        return redirect(ev)
    messages.success(request, f"Eval #{rescored.pk} re-scores eval #{ev.pk}'s stored outputs: the deployment is not asked again.")
    return redirect(rescored)


@login_required
@require_POST
def eval_label(request, pk):
    """A person's grade of one judged verdict: agree, disagree, or their own grade."""
    ev = get_scoped_or_404(request, Eval.objects.for_user(request.user, request.project), pk=pk)
    row_index = request.POST.get("row_index", "")
    sample = get_object_or_404(ev.samples.all(), row_index=int(row_index) if row_index.isdecimal() else -1)
    try:
        label_verdict(sample, request.user, turn=int(request.POST.get("turn", 1)), **posted_grade(request.POST))
    except (LabelRefused, ValueError, KeyError) as exc:
        messages.error(request, f"Not labelled: {exc}")
    else:
        messages.success(request, f"Row {sample.row_index} labelled; the judge's calibration card counts it.")
    page = request.POST.get("page")
    return redirect(f"{ev.get_absolute_url()}{f'?page={page}' if page else ''}#row-{sample.row_index}")


@login_required
@require_POST
def eval_rerun(request, pk):
    """Run again on exactly these rows against another deployment."""
    ev = get_scoped_or_404(request, Eval.objects.for_user(request.user, request.project), pk=pk)
    form = RerunForm(request.POST, project=ev.project)
    if not form.is_valid():
        messages.error(request, "Choose a deployment of this project" + (", and an α between 0.0001 and 0.5." if "decision_alpha" in form.errors else "."))
        return redirect(ev)
    decide = form.cleaned_data["decide"]
    try:
        rerun = create_eval(
            ev.project,
            request.user,
            deployment=form.cleaned_data["deployment"],
            same_rows_as=ev,
            decide_against=ev if decide else None,
            decision_alpha=form.cleaned_data["decision_alpha"] if decide else None,
        )
    except (EvalConfigError, InsufficientBalance) as exc:
        messages.error(request, str(exc))
        return redirect(ev)
    messages.success(request, f"Eval #{rerun.pk} scores the rows of eval #{ev.pk}; compare them when it ends.")
    return redirect(rerun)


@login_required
def eval_paired(request, pk, other):
    """Eval `other` (B) against eval `pk` (A) on their shared rows."""
    evals = Eval.objects.for_user(request.user, request.project).select_related("deployment", "dataset")
    a, b = get_scoped_or_404(request, evals, pk=pk), get_scoped_or_404(request, evals, pk=other)
    context = {"a": a, "b": b, "rerun_form": RerunForm(project=a.project, initial={"deployment": b.deployment_id})}
    try:
        asked = decision_alpha(a, b) if request.GET.get("sequential") == "1" else None
        context["result"] = compare_evals(a, b, set_aside_flaky=request.GET.get("set_aside_flaky") == "1", sequential_alpha=asked)
    except NotPaired as exc:
        context["not_paired"] = str(exc)
    return render(request, "evals/paired.html", context)


@login_required
def eval_download(request, pk, fmt):
    ev = get_scoped_or_404(request, Eval.objects.for_user(request.user, request.project), pk=pk)
    return samples_file(filter_samples(ev.samples.all(), request.GET.get("filter")), fmt, f"eval-{ev.pk}-samples")


@login_required
@require_POST
def eval_cancel(request, pk):
    ev = get_scoped_or_404(request, Eval.objects.for_user(request.user, request.project), pk=pk)
    if cancel_eval(ev):
        messages.success(request, "Eval cancelled; finished samples are kept.")
    else:
        messages.error(request, "The eval already ended.")
    return redirect(ev)


@login_required
@require_POST
def eval_resume(request, pk):
    ev = get_scoped_or_404(request, Eval.objects.for_user(request.user, request.project), pk=pk)
    try:
        max_cost = posted_budget(request.POST.get("max_cost"))
    except ValueError as exc:
        messages.error(request, str(exc))
        return redirect(ev)
    try:
        resumed = resume_eval(ev, max_cost=max_cost)
    except InsufficientBalance as exc:
        messages.error(request, str(exc))
        return redirect(ev)
    if resumed:
        messages.success(request, "Eval resumed: only rows not yet scored are requested.")
    else:
        messages.error(request, "Only failed, cancelled, stalled or early-stopped evals can be resumed.")
    return redirect(ev)


@login_required
def compare(request, benchmark):
    if benchmarks.get(benchmark) is None:
        return render(request, "evals/compare.html", {"benchmark": benchmark, "unknown": True}, status=404)
    evals = list(
        Eval.objects.for_user(request.user, request.project)
        .filter(benchmark=benchmark, status__in=(Eval.Status.SUCCEEDED, Eval.Status.FAILED))
        .select_related("deployment")
        .order_by("created_at")
    )
    by_deployment, first_on_rows = defaultdict(list), {}
    for ev in evals:
        ev.paired_with = None
        # A failed eval is listed, in red, but not drawn: its score is of the rows that answered.
        if ev.status == Eval.Status.SUCCEEDED and ev.score is not None:
            by_deployment[ev.deployment.name].append(ev)
            # Each eval is offered a paired comparison with the first eval that scored the same rows.
            ev.paired_with = first_on_rows.setdefault(ev.source_key(), ev)
    chart = line_chart(
        [
            Series(
                name,
                [(ev.created_at, ev.score) for ev in done],
                intervals=[tuple(ev.score_interval or (ev.score, ev.score)) for ev in done],
                labels=[f"#{ev.pk}" for ev in done],
            )
            for name, done in by_deployment.items()
        ],
        y_label=benchmarks.get(benchmark).metric,
    )
    return render(request, "evals/compare.html", {"benchmark": benchmark, "evals": evals, "chart": chart})


@login_required
def deployments(request):
    form = DeploymentForm(request.POST or None, project=request.project)
    if request.method == "POST" and form.is_valid():
        deployment = form.save(commit=False)
        deployment.project = request.project
        deployment.save()
        messages.success(request, f"Deployment {deployment.name} added. Test its connection below.")
        return redirect("evals:deployments")
    mine = Deployment.objects.for_user(request.user, request.project)
    shown = listing(request, DeploymentFilter, mine.annotate(cached=Count("cached_responses")).order_by("-created_at", "-pk"))
    # Served the same answers (same URL, model and key): Clear on either clears them for both, as the button says. The
    # others may be on another page or filtered out, so all of the project's are read (their three fields, one query).
    names_by_source = {}
    for name, base_url, model, api_key in mine.values_list("name", "base_url", "model", "api_key"):
        names_by_source.setdefault(source_of(Deployment(base_url=base_url, model=model, api_key=api_key)), []).append(name)
    for deployment in shown["page"]:
        deployment.problem = local_model.deployment_problem(deployment)
        deployment.shares_cache_with = [name for name in names_by_source[source_of(deployment)] if name != deployment.name]
    # A refused form answers 400 with its errors beside each field, as the API does (a max_in_flight out of 1-1,024).
    return render(request, "evals/deployments.html", {"form": form, **shown}, status=400 if form.errors else 200)


@login_required
@require_POST
def deployment_clear_cache(request, pk):
    deployment = get_scoped_or_404(request, Deployment.objects.for_user(request.user, request.project), pk=pk)
    removed = clear_cache(deployment)
    messages.success(request, f"Removed {removed:,} cached answer{pluralize(removed)} of {deployment.name}: its next evals ask it again.")
    return redirect("evals:deployments")


@login_required
@require_POST
def deployment_test(request, pk):
    deployment = get_scoped_or_404(request, Deployment.objects.for_user(request.user, request.project), pk=pk)
    try:
        result = try_connection(deployment)
    except InsufficientBalance as exc:
        result = {"ok": False, "error": str(exc)}
    if request.htmx:
        return render(request, "evals/_connection.html", {"result": result})
    (messages.success if result["ok"] else messages.error)(
        request, f"{deployment.name}: " + (f"answered {result['reply']!r} in {result['latency_ms']} ms" if result["ok"] else result["error"])
    )
    return redirect("evals:deployments")
