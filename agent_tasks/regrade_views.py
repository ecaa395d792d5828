"""A regrade's pages: start one from a job's page, and follow it (its grades and the paired comparison)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from belvedir.core.htmx import polled
from belvedir.core.ids import parse_id
from belvedir.core.scoping import get_scoped_or_404
from billing.errors import InsufficientBalance

from . import regrades
from .models import Job, Regrade, TaskSetVersion


@login_required
@require_POST
def regrade_start(request, pk):
    job = get_scoped_or_404(request, Job.objects.for_user(request.user, request.project).select_related("version__task_set"), pk=pk)
    version = TaskSetVersion.objects.filter(task_set=job.version.task_set, number=parse_id(request.POST.get("version"))).first()
    if version is None:
        messages.error(request, "Choose a version of the job's task set to grade it by.")
        return redirect(job)
    try:
        regrade = regrades.start(job, version, request.user)
    except (regrades.RegradeRefused, InsufficientBalance) as exc:
        messages.error(request, f"Not regraded: {exc}")
        return redirect(job)
    messages.success(request, f"Grading job #{job.pk}'s trials again by {version}; each grade is charged at its start.")
    return redirect(regrade)


@login_required
def regrade_detail(request, pk):
    regrade = get_scoped_or_404(request, Regrade.objects.for_user(request.user, request.project).select_related("job__version__task_set", "version"), pk=pk)
    context = {"regrade": regrade, "found": regrades.comparison(regrade), "grades": regrade.grades.select_related("trial__task", "trial__deployment")[:500]}
    if request.htmx:
        return polled(render(request, "agent_tasks/_regrade_live.html", context), done=regrade.status != Regrade.Status.RUNNING)
    return render(request, "agent_tasks/regrade.html", context)


@login_required
@require_POST
def regrade_cancel(request, pk):
    regrade = get_scoped_or_404(request, Regrade.objects.for_user(request.user, request.project), pk=pk)
    skipped = regrades.cancel(regrade)
    messages.success(request, f"Regrade #{regrade.pk} cancelled: {skipped} grades not started were skipped.")
    return redirect(regrade)
