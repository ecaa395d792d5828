"""The evals and suite runs lists' filters and sorts (belvedir/core/listing.py)."""

import django_filters

from belvedir.core.listing import Ordering

from . import benchmarks
from .models import Deployment, Eval, SuiteRun


def _deployments(request):
    return Deployment.objects.for_user(request.user, request.project).order_by("name")


class EvalFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=Eval.Status.choices, empty_label="Any status")
    benchmark = django_filters.ChoiceFilter(choices=[(name, name) for name in benchmarks.CATALOG], empty_label="Any benchmark")
    deployment = django_filters.ModelChoiceFilter(queryset=_deployments, empty_label="Any deployment")
    errors = django_filters.ChoiceFilter(
        choices=[("yes", "With errors"), ("no", "Without errors")], empty_label="With or without", method="with_errors", label="Errors"
    )
    order = Ordering(
        fields=(("created_at", "created"), ("score", "score"), ("error_count", "errors"), ("cost", "cost")),
        field_labels={"created_at": "Created", "score": "Score", "error_count": "Errors", "cost": "Cost"},
        empty_label="Newest first",
        label="Sort",
    )

    class Meta:
        model = Eval
        fields = ["status", "benchmark", "deployment"]

    def with_errors(self, queryset, name, value):
        return queryset.filter(error_count__gt=0) if value == "yes" else queryset.filter(error_count=0)


class SuiteRunFilter(django_filters.FilterSet):
    suite_name = django_filters.CharFilter(lookup_expr="icontains", label="Suite", max_length=100)
    deployment = django_filters.ModelChoiceFilter(field_name="deployments", queryset=_deployments, empty_label="Any deployment", distinct=True)
    order = Ordering(fields=(("created_at", "created"),), field_labels={"created_at": "Oldest first"}, empty_label="Newest first", label="Sort")

    class Meta:
        model = SuiteRun
        fields = ["suite_name", "deployment"]
