from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count, Exists, Max, OuterRef, Sum
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from belvedir.core.charts import Series, line_chart
from belvedir.core.htmx import polled
from belvedir.core.listing import listing
from belvedir.core.scoping import get_scoped_or_404
from belvedir.sandbox.errors import NoCapacity
from billing.errors import InsufficientBalance
from billing.models import Account, LedgerEntry
from traces import trajectory
from traces.models import TraceSession

from .actions import MAX_REPEATS, RUNS, cancel_run, save_harness, start_runs
from .filters import HarnessFilter, RunFilter
from .forms import EnvVarFormSet, HarnessForm, env_var_formset, preset_initial
from .models import Harness, Preset, Run
from .scores import compare_labels, compared_runs, scores_by_label, summary

RUNS_ON_HARNESS_PAGE = 50


@login_required
def harness_list(request):
    harnesses = (
        Harness.objects.for_user(request.user, request.project)
        .annotate(run_count=Count("runs"), last_run_at=Max("runs__created_at"))
        .order_by("-created_at", "-pk")
    )
    return render(request, "harnesses/list.html", listing(request, HarnessFilter, harnesses))


@login_required
def harness_new(request):
    presets = list(Preset.objects.all())
    preset = next((p for p in presets if p.slug == request.GET.get("preset")), None)
    if request.method == "POST":
        form = HarnessForm(request.POST)
        env_formset = EnvVarFormSet(request.POST, prefix="env")
        if form.is_valid() and env_formset.is_valid():
            harness = form.save(commit=False)
            harness.project, harness.created_by = request.project, request.user
            save_harness(harness, env_formset.variables())
            messages.success(request, f"Harness {harness.name} created. Press Run to start it.")
            return redirect(harness)
        preset = form.cleaned_data.get("preset") if hasattr(form, "cleaned_data") else None
    else:
        form = HarnessForm(initial=preset_initial(preset) if preset else None)
        # Preset variables are API keys: secret unless the user says otherwise.
        env_initial = [{"name": name, "secret": True} for name in (preset.env_var_names if preset else [])]
        env_formset = env_var_formset(extra=max(3, len(env_initial)))(prefix="env", initial=env_initial)
    context = {"form": form, "env_formset": env_formset, "presets": presets, "preset": preset}
    if request.htmx and request.method == "GET":
        return render(request, "harnesses/_harness_form.html", context)
    return render(request, "harnesses/new.html", context)


@login_required
def harness_edit(request, pk):
    harness = get_scoped_or_404(request, Harness.objects.for_user(request.user, request.project), pk=pk)
    form = HarnessForm(request.POST or None, instance=harness)
    env_formset = EnvVarFormSet(request.POST or None, instance=harness, prefix="env")
    if request.method == "POST" and form.is_valid() and env_formset.is_valid():
        save_harness(form.save(commit=False), env_formset.variables())
        messages.success(request, "Harness saved.")
        return redirect(harness)
    return render(request, "harnesses/edit.html", {"form": form, "env_formset": env_formset, "harness": harness})


@login_required
@require_POST
def harness_delete(request, pk):
    harness = get_scoped_or_404(request, Harness.objects.for_user(request.user, request.project), pk=pk)
    if harness.runs.active().exists():
        messages.error(request, "Cancel the harness's active runs before deleting it.")
        return redirect(harness)
    harness.delete()
    messages.success(request, f"Harness {harness.name} deleted.")
    return redirect("harnesses:list")


@login_required
def harness_detail(request, pk, *, status=200):
    harness = get_scoped_or_404(request, Harness.objects.for_user(request.user, request.project).prefetch_related("env_vars"), pk=pk)
    # Whether each run traced anything: its row links to its trajectory (in the same query).
    traced = TraceSession.objects.filter(run=OuterRef("pk"))
    runs = listing(request, RunFilter, harness.runs.select_related("host").annotate(traced=Exists(traced)))
    # The chart draws the latest scored runs whatever page or filter the table shows.
    scored = list(harness.runs.filter(score__isnull=False).values_list("pk", "created_at", "score")[:RUNS_ON_HARNESS_PAGE])[::-1]
    chart = line_chart([Series(harness.name, [(at, score) for _, at, score in scored], labels=[f"#{pk}" for pk, _, _ in scored])])
    groups = scores_by_label(harness)
    a, b = request.GET.get("a"), request.GET.get("b")
    context = {
        "harness": harness,
        **runs,
        "chart": chart,
        "balance_cents": Account.balance_for(harness.project),
        "labels": summary(groups),
        "comparison": compare_labels(groups, a, b) if a and b else None,
        "compared_runs": compared_runs(harness, a, b) if a and b else [],
        "max_repeats": MAX_REPEATS,
    }
    return render(request, "harnesses/detail.html", context, status=status)


@login_required
@require_POST
def run_start(request, pk):
    harness = get_scoped_or_404(request, Harness.objects.for_user(request.user, request.project), pk=pk)
    try:
        repeats = min(max(int(request.POST.get("repeats") or 1), 1), MAX_REPEATS)
    except ValueError:
        repeats = 1
    try:
        runs = start_runs(harness, request.user, repeats)
    except InsufficientBalance as exc:
        messages.error(request, str(exc) + (f" None of the {repeats} runs was started." if repeats > 1 else ""))
        return harness_detail(request, pk, status=exc.status_code)
    except NoCapacity as exc:
        messages.error(request, f"{exc.message} Nothing was charged.")
        return harness_detail(request, pk, status=exc.status_code)
    if repeats == 1:
        return redirect(runs[0])
    messages.success(request, f"{repeats} runs started, each charged as a run.")
    return redirect(harness)


@login_required
def run_detail(request, pk):
    run = get_scoped_or_404(request, Run.objects.for_user(request.user, request.project).select_related("harness", "host", "created_by"), pk=pk)
    if request.htmx:
        return polled(render(request, "harnesses/_run_live.html", {"run": run}), done=not run.is_active)
    entries = list(LedgerEntry.objects.filter(reference=RUNS.reference(run.pk), kind__in=["run_charge", "refund"]).order_by("created_at"))
    usage = run.trace_sessions.aggregate(input_tokens=Sum("input_tokens"), output_tokens=Sum("output_tokens"), sessions=Count("pk"))
    sessions = list(run.trace_sessions.order_by("first_span_at"))
    # Other runs of this harness that traced something: what "compare with another run" offers.
    others = (
        TraceSession.objects.filter(project=run.project_id, run__harness=run.harness_id).exclude(run=run).select_related("run").order_by("-run__created_at")
    )
    context = {
        "run": run,
        "entries": entries,
        "charged_cents": -sum(e.amount_cents for e in entries),
        "usage": usage,
        "sessions": sessions,
        "summary": trajectory.summary(sessions) if sessions else None,
        "other_sessions": list(others[:RUNS_ON_HARNESS_PAGE]),
    }
    return render(request, "harnesses/run.html", context)


@login_required
@require_POST
def run_cancel(request, pk):
    run = get_scoped_or_404(request, Run.objects.for_user(request.user, request.project), pk=pk)
    if cancel_run(run):
        messages.success(request, "Run cancelled. Its sandbox is being stopped; cancelled runs are not refunded.")
    else:
        messages.error(request, f"The run already ended ({run.get_status_display()}).")
    return redirect(run)
