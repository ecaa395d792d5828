"""The harnesses list's and a harness's runs' filters and sorts (belvedir/core/listing.py)."""

import django_filters

from belvedir.core.listing import ByName, sort
from belvedir.sandbox.models import ComputeType

from .models import Harness, Run


class HarnessFilter(ByName):
    compute_type = django_filters.ChoiceFilter(choices=ComputeType.choices, empty_label="CPU or GPU", label="Compute")
    order = sort(name=("name", "Name"), created=("created_at", "Created"), last_run=("last_run_at", "Last run"), runs=("run_count", "Runs"))

    class Meta:
        model = Harness
        fields = ["name", "compute_type"]


class RunFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=Run.Status.choices, empty_label="Any status")
    model_label = django_filters.CharFilter(lookup_expr="icontains", label="Model", max_length=200)
    order = sort(created=("created_at", "Started"), score=("score", "Score"))

    class Meta:
        model = Run
        fields = ["status", "model_label"]
