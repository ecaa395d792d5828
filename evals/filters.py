"""The evals, suite runs, deployments and datasets lists' filters and sorts (belvedir/core/listing.py)."""

import django_filters

from belvedir.core.listing import ByName, sort

from . import benchmarks
from .models import Dataset, Deployment, Eval, SuiteRun


def _deployments(request):
    return Deployment.objects.for_user(request.user, request.project).order_by("name")


class EvalFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=Eval.Status.choices, empty_label="Any status")
    benchmark = django_filters.ChoiceFilter(choices=[(name, name) for name in benchmarks.CATALOG], empty_label="Any benchmark")
    deployment = django_filters.ModelChoiceFilter(queryset=_deployments, empty_label="Any deployment")
    errors = django_filters.ChoiceFilter(
        choices=[("yes", "With errors"), ("no", "Without errors")], empty_label="With or without", method="with_errors", label="Errors"
    )
    order = sort(created=("created_at", "Created"), score=("score", "Score"), errors=("error_count", "Errors"), cost=("cost", "Cost"))

    class Meta:
        model = Eval
        fields = ["status", "benchmark", "deployment"]

    def with_errors(self, queryset, name, value):
        return queryset.filter(error_count__gt=0) if value == "yes" else queryset.filter(error_count=0)


class SuiteRunFilter(django_filters.FilterSet):
    suite_name = django_filters.CharFilter(lookup_expr="icontains", label="Suite", max_length=100)
    deployment = django_filters.ModelChoiceFilter(field_name="deployments", queryset=_deployments, empty_label="Any deployment", distinct=True)
    order = sort(created=("created_at", "Created"))

    class Meta:
        model = SuiteRun
        fields = ["suite_name", "deployment"]


class DeploymentFilter(ByName):
    api_style = django_filters.ChoiceFilter(choices=Deployment.Style.choices, empty_label="Any style", label="Style")

    class Meta:
        model = Deployment
        fields = ["name", "api_style"]


class DatasetFilter(ByName):
    order = sort(name=("name", "Name"), created=("created_at", "Created"), rows=("row_count", "Rows"))

    class Meta:
        model = Dataset
        fields = ["name"]
