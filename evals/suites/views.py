"""Suite pages: the suites and their runs, a run's benchmark x deployment table (live), two runs compared, judges' cards."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from belvedir.core.charts import PALETTE, Estimate, interval_chart
from belvedir.core.htmx import polled
from belvedir.core.listing import listing, paged
from belvedir.core.scoping import get_scoped_or_404
from billing.errors import InsufficientBalance

from .. import benchmarks
from ..filters import SuiteRunFilter
from ..forms import SuiteCompareForm, SuiteForm, SuiteRunForm, posted_budget
from ..models import Suite, SuiteRun
from ..scoring.calibration import card, judge_keys_of
from .actions import (
    BUILTIN,
    BUILTIN_DESCRIPTIONS,
    SuiteError,
    builtin_entries,
    cancel_suite_run,
    create_suite_run,
    progress,
    resume_suite_run,
    retry_suite_errors,
    run_quick_suite_on_local_model,
    save_suite,
    status_of,
)
from .comparison import compare_suite_runs, suite_table


@login_required
def suites(request):
    """The suites (built-in and the project's own), their runs, and the forms to define one and to run one."""
    project = request.project
    run_form = SuiteRunForm(request.POST if "run" in request.POST else None, project=project)
    suite_form = SuiteForm(request.POST if "define" in request.POST else None)
    status = 200
    if request.method == "POST" and "run" in request.POST and run_form.is_valid():
        data = run_form.cleaned_data
        try:
            run = create_suite_run(
                project,
                request.user,
                deployments=list(data["deployments"]),
                suite_name=data["suite"],
                judge=data["judge"],
                same_rows_as=data["same_rows_as"],
                max_cost=data["max_cost"],
                epochs=data["epochs"] or 1,
                force=data["force"],
                cache=data["cache"],
            )
        except (SuiteError, InsufficientBalance) as exc:
            run_form.add_error(None, str(exc))
            status = getattr(exc, "status_code", 400) if isinstance(exc, InsufficientBalance) else 200
        else:
            return redirect(run)
    if request.method == "POST" and "define" in request.POST and suite_form.is_valid():
        try:
            suite = save_suite(
                project, request.user, suite_form.cleaned_data["name"], suite_form.cleaned_data["entries"], suite_form.cleaned_data["description"]
            )
        except SuiteError as exc:
            suite_form.add_error(None, str(exc))
        else:
            messages.success(request, f"Suite {suite.name} saved with {len(suite.entries)} benchmarks.")
            return redirect("evals:suites")
    own = Suite.objects.for_user(request.user, project)
    listed = [{"name": name, "description": BUILTIN_DESCRIPTIONS[name], "entries": builtin_entries(name), "builtin": True} for name in BUILTIN]
    listed += [{"name": s.name, "description": s.description, "entries": s.entries, "builtin": False, "pk": s.pk} for s in own]
    runs = listing(request, SuiteRunFilter, SuiteRun.objects.for_user(request.user, project).prefetch_related("deployments"), per_page=25)
    for run in runs["page"]:
        run.stats = progress(run)
        run.status = status_of(run.stats)
    context = {"suites": listed, **runs, "run_form": run_form, "suite_form": suite_form}
    return render(request, "evals/suites.html", context, status=status)


# Where the button sends its refusal back to: the pages that offer it, by name (never a URL the post names).
# A calibration card reads its judge's labels and verdicts: ten to a page keeps the page quick.
JUDGES_PER_PAGE = 10

LOCAL_MODEL_BUTTON_PAGES = {"home": "home", "eval_form": "evals:create_benchmark"}


@login_required
@require_POST
def local_model_quick_suite(request):
    """The button of a project without a deployment: the quick suite on the local model (evals/local_model.py)."""
    try:
        run = run_quick_suite_on_local_model(request.project, request.user)
    except (SuiteError, InsufficientBalance) as exc:
        messages.error(request, str(exc))
        return redirect(LOCAL_MODEL_BUTTON_PAGES.get(request.POST.get("page"), "home"))
    messages.success(request, f"The quick suite runs on the local model ({run.evals.count()} evals, one benchmark at a time).")
    return redirect(run)


@login_required
def suite_run(request, pk):
    run = get_scoped_or_404(request, SuiteRun.objects.for_user(request.user, request.project).select_related("judge", "same_rows_as"), pk=pk)
    stats = progress(run)
    context = {"run": run, "stats": stats, "status": status_of(stats), "table": suite_table(run)}
    if request.htmx and request.GET.get("part") == "table":
        # Once every eval ended, the page reloads once: the chart and the actions depend on the results.
        return polled(render(request, "evals/_suite_table.html", context), done=not stats["active"], reload_page=True)
    context["chart"] = suite_chart(context["table"])
    context["compare_form"] = SuiteCompareForm(project=run.project, initial={"other": run.same_rows_as_id})
    return render(request, "evals/suite_run.html", context)


def suite_chart(table: dict):
    """The deployments side by side: per benchmark, a dot and interval for each (MT-Bench drawn as a share of 1-10)."""
    colours = {d.pk: PALETTE[i % len(PALETTE)] for i, d in enumerate(table["deployments"])}
    estimates = []
    for row in table["rows"]:
        found = benchmarks.get(row["benchmark"])
        scale = found.scale if found is not None else (0.0, 1.0)
        for ev in row["cells"]:
            if ev is not None and ev.score is not None and ev.score_interval:
                label = f"{row['benchmark']} · {ev.deployment.name}"
                estimates.append(Estimate(label, ev.score, *ev.score_interval, color=colours[ev.deployment_id], scale=scale))
    legend = [(colours[d.pk], d.name) for d in table["deployments"]]
    return interval_chart(estimates, title="scores by benchmark and deployment", legend=legend)


@login_required
@require_POST
def suite_run_action(request, pk, what):
    run = get_scoped_or_404(request, SuiteRun.objects.for_user(request.user, request.project), pk=pk)
    try:
        if what == "cancel":
            messages.success(request, f"Cancelled {cancel_suite_run(run)} evals; finished samples are kept.")
        elif what == "retry":
            messages.success(request, f"Retrying {retry_suite_errors(run)} errored samples; the rest are kept.")
        elif what == "resume":
            messages.success(request, f"Resumed {resume_suite_run(run, max_cost=posted_budget(request.POST.get('max_cost')))} evals.")
        else:
            return redirect(run)
    except (SuiteError, InsufficientBalance, ValueError) as exc:
        messages.error(request, str(exc))
    return redirect(run)


@login_required
def suite_compare_pick(request, pk):
    """The run page's compare form: to the comparison of the run chosen, with the deployments chosen."""
    run = get_scoped_or_404(request, SuiteRun.objects.for_user(request.user, request.project), pk=pk)
    form = SuiteCompareForm(request.GET, project=run.project)
    if not form.is_valid() or form.cleaned_data["other"] is None:
        messages.error(request, "Choose a suite run of this project to compare with.")
        return redirect(run)
    query = request.GET.copy()
    query.pop("other", None)
    return redirect(f"{reverse('evals:suite_compare', args=[run.pk, form.cleaned_data['other'].pk])}?{query.urlencode()}")


@login_required
def suite_compare(request, pk, other):
    runs = SuiteRun.objects.for_user(request.user, request.project)
    a, b = get_scoped_or_404(request, runs, pk=pk), get_scoped_or_404(request, runs, pk=other)
    form = SuiteCompareForm(request.GET or None, project=a.project, initial={"other": b.pk})
    sides = {"deployment_a": None, "deployment_b": None}
    set_aside = False
    if form.is_bound and form.is_valid():
        sides = {name: form.cleaned_data[name] for name in sides}
        set_aside = form.cleaned_data["set_aside_flaky"]
    context = {"a": a, "b": b, "form": form}
    try:
        context["result"] = compare_suite_runs(a, b, **sides, set_aside_flaky=set_aside)
    except SuiteError as exc:
        context["refused"] = str(exc)
    return render(request, "evals/suite_compare.html", context, status=400 if "refused" in context else 200)


@login_required
def judges(request):
    """Every judge's calibration card."""
    shown = paged(request, judge_keys_of(request.project), per_page=JUDGES_PER_PAGE)
    return render(request, "evals/judges.html", {"cards": [card(request.project, key) for key in shown["page"]], **shown})
