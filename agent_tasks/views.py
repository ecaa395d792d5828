"""The task sets pages: the list with its upload form, and one set's versions with their tasks."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Max, Prefetch
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from belvedir.core.listing import listing
from belvedir.core.scoping import get_scoped_or_404
from billing.errors import InsufficientBalance

from . import audits
from .actions import import_archive
from .agents import ATTACKS
from .archive import ArchiveError
from .filters import TaskSetFilter
from .forms import TaskSetUploadForm
from .harbor_format import TaskFormatError
from .jobs import JobError
from .models import AgentTask, TaskSet, TaskSetVersion


@login_required
def task_sets(request):
    form = TaskSetUploadForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        try:
            version, created = import_archive(request.project, request.user, form.cleaned_data["name"], form.cleaned_data["file"])
        except (TaskFormatError, ArchiveError) as exc:
            form.add_error("file", str(exc))
        else:
            said = "imported as" if created else "already held, unchanged, as"
            messages.success(request, f"{version.tasks.count()} tasks {said} version {version.number} of {version.task_set.name}.")
            return redirect(version.task_set)
    sets = TaskSet.objects.for_user(request.user, request.project).annotate(latest=Max("versions__number")).order_by("-created_at", "-pk")
    return render(request, "agent_tasks/task_sets.html", {"form": form, **listing(request, TaskSetFilter, sets)})


@login_required
def task_set_detail(request, pk):
    tasks = AgentTask.objects.without_files()
    task_set = get_scoped_or_404(
        request, TaskSet.objects.for_user(request.user, request.project).prefetch_related("versions", Prefetch("versions__tasks", queryset=tasks)), pk=pk
    )
    versions = list(task_set.versions.all())
    for version in versions:
        version.audit_summary = audits.summary(version)
        verdicts = {v["task"]: v for v in (version.audit_summary or {}).get("tasks", [])}
        for task in version.tasks.all():
            task.verdict = verdicts.get(task.name)
    context = {"task_set": task_set, "versions": versions, "form": TaskSetUploadForm(initial={"name": task_set.name}), "attack_count": len(ATTACKS)}
    return render(request, "agent_tasks/task_set.html", context)


@login_required
@require_POST
def audit(request, pk, number):
    """Start an audit of one version: a job of the oracle, nop and the red team on each task (audits.py)."""
    version = get_scoped_or_404(request, TaskSetVersion.objects.for_user(request.user, request.project), task_set_id=pk, number=number)
    try:
        job = audits.start(request.project, request.user, version)
    except (audits.AuditRefused, JobError) as exc:
        messages.error(request, str(exc))
        return redirect(version.task_set)
    except InsufficientBalance as exc:
        messages.error(request, f"The audit was not started: {exc}")
        return redirect(version.task_set)
    messages.success(
        request, f"Auditing {version}: {job.trials.count()} trials, each charged at its start. The task set's page shows the verdicts as they come."
    )
    return redirect(job)
