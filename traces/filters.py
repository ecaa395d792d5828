"""Filters the Traces page and the sessions API share (who: user; what: metadata), and the task groups' and
evaluators' lists' filters and sorts (belvedir/core/listing.py)."""

import django_filters

from belvedir.core.listing import ByName, sort

from .models import Evaluator, TaskGroup

# Each metadata pair is one more containment test: a few are plenty.
MAX_METADATA_FILTERS = 5


def metadata_pairs(values: list[str]) -> list[tuple[str, str]]:
    """`key=value` strings (as typed in the filter form or sent as ?metadata=) into pairs; others ignored."""
    pairs = []
    for raw in values[:MAX_METADATA_FILTERS]:
        key, sep, value = raw.partition("=")
        if sep and key.strip():
            pairs.append((key.strip(), value.strip()))
    return pairs


def by_user_and_metadata(sessions, params):
    """?user=ID and ?metadata=key=value (repeatable, all must match)."""
    if user := params.get("user", "").strip():
        sessions = sessions.filter(user_id=user)
    for key, value in metadata_pairs(params.getlist("metadata")):
        sessions = sessions.with_metadata(key, value)
    return sessions


class TaskGroupFilter(ByName):
    order = sort(name=("name", "Name"), created=("created_at", "Created"), tasks=("task_count", "Tasks"), success=("success_rate", "Success rate"))

    class Meta:
        model = TaskGroup
        fields = ["name"]


class EvaluatorFilter(ByName):
    enabled = django_filters.BooleanFilter(widget=django_filters.widgets.BooleanWidget(), label="On")
    target = django_filters.ChoiceFilter(choices=Evaluator.Target.choices, empty_label="Sessions or tasks", label="Of")

    class Meta:
        model = Evaluator
        fields = ["name", "enabled", "target"]
