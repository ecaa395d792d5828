"""The jobs and task sets lists' filters and sorts (belvedir/core/listing.py)."""

import django_filters

from belvedir.core.listing import ByName, sort

from .models import Job, TaskSet


def _task_sets(request):
    return TaskSet.objects.for_user(request.user, request.project).order_by("name")


class JobFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=Job.Status.choices, empty_label="Any status")
    task_set = django_filters.ModelChoiceFilter(field_name="version__task_set", queryset=_task_sets, empty_label="Any task set", label="Task set")
    purpose = django_filters.ChoiceFilter(choices=Job.Purpose.choices, empty_label="Jobs and audits")
    order = sort(created=("created_at", "Created"), charged=("charged_cents", "Charged"))

    class Meta:
        model = Job
        fields = ["status", "task_set", "purpose"]


class TaskSetFilter(ByName):
    class Meta:
        model = TaskSet
        fields = ["name"]
