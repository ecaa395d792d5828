"""The task sets pages: the list with its upload form, and one set's versions with their tasks."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Max, Prefetch
from django.shortcuts import get_object_or_404, redirect, render

from .actions import import_archive
from .archive import ArchiveError
from .forms import TaskSetUploadForm
from .harbor_format import TaskFormatError
from .models import AgentTask, TaskSet


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
    sets = TaskSet.objects.for_user(request.user, request.project).annotate(latest=Max("versions__number"))
    return render(request, "agent_tasks/task_sets.html", {"form": form, "task_sets": sets})


@login_required
def task_set_detail(request, pk):
    tasks = AgentTask.objects.without_files()
    task_set = get_object_or_404(
        TaskSet.objects.for_user(request.user, request.project).prefetch_related("versions", Prefetch("versions__tasks", queryset=tasks)), pk=pk
    )
    return render(
        request,
        "agent_tasks/task_set.html",
        {"task_set": task_set, "versions": task_set.versions.all(), "form": TaskSetUploadForm(initial={"name": task_set.name})},
    )
