"""The jobs pages: the list with its form, a job's matrix (tasks × contestants, each cell its trials) with pass@k
and pass^k charted with intervals, a comparison of two jobs, and a trial's page."""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from belvedir.core.charts import PALETTE, Estimate, interval_chart
from belvedir.core.ids import parse_id
from belvedir.core.listing import listing
from belvedir.core.scoping import get_scoped_or_404
from billing.actions import parse_dollars
from billing.errors import BillingError, InsufficientBalance

from . import audits, harbor_export, jobs, results
from .comparison import NotComparable, compare_jobs
from .egress_record import denied_reaches, egress_record
from .filters import JobFilter
from .forms import JobForm, comma_list
from .models import Job, Trial, TrialOutputs


def _jobs(request):
    return Job.objects.for_user(request.user, request.project).select_related("version__task_set")


@login_required
def job_list(request):
    form = JobForm(request.POST or None, project=request.project)
    status = 200
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            job = jobs.create_job(
                request.project,
                request.user,
                version=data["version"],
                agents=[*data["agents"], *data["extra_agents"]],
                agent_commands=data["extra_agents"],
                deployments=list(data["deployments"]),
                tasks=comma_list(data["tasks"]),
                attempts=data["attempts"],
                budget_cents=parse_dollars(data["budget"]),
                runtime=data["runtime"],
                deny_hosts=comma_list(data["deny_hosts"]),
                name=data["name"],
            )
        except jobs.JobError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        except InsufficientBalance as exc:
            # A form the user can fix answers 200 with its errors; a debt is a 402, as for runs and evals.
            form.add_error(None, str(exc))
            status = exc.status_code
        except BillingError as exc:
            form.add_error("budget", str(exc))
        else:
            messages.success(request, f"Job #{job.pk} started: {job.trials.count()} trials.")
            return redirect(job)
    listed = listing(request, JobFilter, jobs.with_progress(_jobs(request)))
    rows = [(job, jobs.progress(job)) for job in listed["page"]]
    return render(request, "agent_tasks/jobs.html", {**listed, "form": form, "rows": rows, "price_cents": settings.TRIAL_PRICE_CENTS}, status=status)


def _chart(summary: list[dict], attempts: int):
    estimates, legend = [], []
    for i, entry in enumerate(summary):
        color = PALETTE[i % len(PALETTE)]
        legend.append((color, entry["contestant"]))
        for k in results.ks(attempts):
            for label, key in ((f"pass@{k}", "pass_at_k"), (f"pass^{k}", "pass_hat_k")):
                found = entry[key][str(k)]
                if found["value"] is not None and (key == "pass_at_k" or k > 1):
                    estimates.append(Estimate(f"{entry['contestant']} {label}", found["value"], *found["ci"], color=color))
    return interval_chart(estimates, title="share of tasks", legend=legend)


@login_required
def job_detail(request, pk):
    job = get_scoped_or_404(request, _jobs(request), pk=pk)
    set_aside = request.GET.get("set_aside_flagged") == "1"
    found = results.matrix(job)
    tasks, columns, cells = found
    summary = results.summary(job, set_aside_flagged=set_aside, found=found)
    context = {
        "job": job,
        "progress": jobs.progress(job),
        "columns": columns,
        "rows": [(task, [cells.get((task, column)) for column in columns]) for task in tasks],
        "summary": summary,
        "chart": _chart(summary, job.attempts),
        "set_aside": set_aside,
        "others": _jobs(request).exclude(pk=job.pk)[:50],
        "audit": audits.summary(job.version) if job.purpose == Job.Purpose.AUDIT else None,
        "audit_warnings": audits.warnings(job.version),
        "regrades": job.regrades.select_related("version")[:20],
        "versions": job.version.task_set.versions.all(),
    }
    template = "agent_tasks/_job_live.html" if request.htmx else "agent_tasks/job.html"
    return render(request, template, context)


@login_required
def job_compare(request, pk):
    a = get_scoped_or_404(request, _jobs(request), pk=pk)
    if (other := parse_id(request.GET.get("other"))) is None:
        messages.error(request, "Choose a job to compare this one with.")
        return redirect(a)
    b = get_scoped_or_404(request, _jobs(request), pk=other)
    params = {name: request.GET.get(name) or None for name in ("contestant_a", "contestant_b")}
    try:
        found = compare_jobs(a, b, set_aside_flagged=request.GET.get("set_aside_flagged") == "1", **params)
    except NotComparable as exc:
        messages.error(request, str(exc))
        return redirect(a)
    return render(request, "agent_tasks/job_compare.html", {"a": a, "b": b, "found": found})


@login_required
@require_POST
def job_retry_errors(request, pk):
    job = get_scoped_or_404(request, _jobs(request), pk=pk)
    retried = jobs.retry_errors(job)
    messages.success(request, f"{retried} errored trials queued again, each charged at its start.")
    return redirect(job)


@login_required
@require_POST
def job_cancel(request, pk):
    job = get_scoped_or_404(request, _jobs(request), pk=pk)
    skipped = jobs.cancel(job)
    messages.success(request, f"Job #{job.pk} cancelled: {skipped} trials not started were skipped, never charged.")
    return redirect(job)


@login_required
def job_export(request, pk):
    job = get_scoped_or_404(request, _jobs(request), pk=pk)
    response = HttpResponse(harbor_export.export(job), content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="job-{job.pk}.zip"'
    return response


@login_required
def trial_outputs(request, pk):
    """The outputs its agent produced, as kept (a .tar.gz of the declared outputs)."""
    trial = get_scoped_or_404(request, Trial.objects.for_user(request.user, request.project), pk=pk)
    return outputs_download(trial)


def outputs_download(trial: Trial) -> HttpResponse:
    kept = get_object_or_404(TrialOutputs, trial=trial)
    response = HttpResponse(bytes(kept.archive), content_type="application/gzip")
    response["Content-Disposition"] = f'attachment; filename="trial-{trial.pk}-outputs.tar.gz"'
    return response


@login_required
def trial_detail(request, pk):
    trial = get_scoped_or_404(
        request, Trial.objects.for_user(request.user, request.project).select_related("task", "job", "deployment").defer("task__archive"), pk=pk
    )
    record = egress_record(trial)
    trial.egress_flags = denied_reaches(record, trial.job.deny_hosts if trial.job_id else ())
    return render(request, "agent_tasks/trial.html", {"trial": trial, "egress": record, "trace_session": trial.trace_sessions.first()})
