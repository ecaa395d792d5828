"""Rows made of traces, by the API: sessions named or filtered, as rows of one new version of a dataset (or none)."""

from django.http import QueryDict
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view
from rest_framework.response import Response

from belvedir.core.ids import parse_id
from belvedir.core.permissions import request_project
from evals.datasets.api import DatasetSerializer, DatasetVersionSerializer
from evals.datasets.rows import DatasetError
from evals.models import Dataset

from .models import TraceSession
from .to_datasets import DEFAULT_LIMIT, FIRST_USER_MESSAGE, INPUTS, MAX_SESSIONS, Source, add_to_dataset, matching_sessions

FILTERS = ("outcome", "run", "user", "metadata")


class RowsFromTracesSerializer(serializers.Serializer):
    dataset = serializers.CharField(required=False, help_text="The dataset to add to, by name or id.")
    new_dataset = serializers.CharField(required=False, max_length=100, help_text="Or the name of a new dataset, made of these rows (its version 1).")
    sessions = serializers.ListField(
        child=serializers.CharField(max_length=255), required=False, max_length=MAX_SESSIONS, help_text="Session ids; or `filters`."
    )
    filters = serializers.DictField(
        required=False,
        help_text='The session list\'s filters: {"outcome": "success"|"fail"|"none", "run": ID, "user": ID, "metadata": ["key=value", ...]}; the newest `limit` sessions that match.',
    )
    limit = serializers.IntegerField(required=False, min_value=1, max_value=MAX_SESSIONS, default=DEFAULT_LIMIT)
    input = serializers.ChoiceField(choices=list(INPUTS.items()), default=FIRST_USER_MESSAGE)
    task = serializers.IntegerField(required=False, help_text="One session's task (an id from its tasks): the row is made of it alone.")
    step = serializers.IntegerField(required=False, min_value=1, help_text="With input=conversation: the LLM step it ends at (the last by default).")
    expected = serializers.CharField(
        required=False, allow_blank=True, trim_whitespace=False, help_text="One session's row: its expected output as you want it (the answer by default)."
    )


def _dataset(project, user, name_or_id: str) -> Dataset:
    datasets = Dataset.objects.for_user(user, project)
    found = datasets.filter(pk=pk).first() if (pk := parse_id(name_or_id)) else datasets.filter(name=name_or_id).order_by("-created_at").first()
    if found is None:
        raise DatasetError(f"No dataset {name_or_id!r} in this project: give one of its datasets, or new_dataset to make one.")
    return found


def _sources(request, project, data) -> list[Source]:
    sessions = TraceSession.objects.for_user(request.user, project)
    if ("sessions" in data) == ("filters" in data):
        raise DatasetError("Give the sessions, or filters that choose them (not both).")
    if "filters" in data:
        if unknown := set(data["filters"]) - set(FILTERS):
            raise DatasetError(f"Unknown filters: {', '.join(sorted(unknown))}; filter on {', '.join(FILTERS)}.")
        params = QueryDict(mutable=True)
        for key, value in data["filters"].items():
            params.setlist(key, [str(v) for v in value] if isinstance(value, list) else [str(value)])
        chosen = matching_sessions(sessions, params, data["limit"])
    else:
        found = {s.session_id: s for s in sessions.filter(session_id__in=data["sessions"])}
        if missing := [s for s in data["sessions"] if s not in found]:
            raise DatasetError(f"No session {missing[0]!r} in this project" + (f" (nor {len(missing) - 1} more)." if len(missing) > 1 else "."))
        chosen = [found[s] for s in dict.fromkeys(data["sessions"])]
    task = None
    if "task" in data:
        if len(chosen) != 1:
            raise DatasetError("A task is one session's: give one session with it.")
        task = chosen[0].tasks.filter(pk=data["task"]).first()
        if task is None:
            raise DatasetError(f"Session {chosen[0].session_id} has no task {data['task']}.")
    if "step" in data and len(chosen) != 1:
        raise DatasetError("A step is one session's: give one session with it.")
    return [Source(session=s, task=task, step=data.get("step"), input=data["input"]) for s in chosen]


@extend_schema(request=RowsFromTracesSerializer, responses={201: dict})
@api_view(["POST"])
def rows_from_traces(request):
    """Rows made of sessions (named, or the newest that match filters): the first user message or the conversation up
    to a step as input, the assistant's answer as expected output, the source session, task and step as metadata.
    All in one new version of the dataset, or none: a session with no user message refuses the lot (400, naming it)."""
    payload = RowsFromTracesSerializer(data=request.data)
    payload.is_valid(raise_exception=True)
    data, project = payload.validated_data, request_project(request)
    if ("dataset" in data) == ("new_dataset" in data):
        raise DatasetError("Give dataset (one of the project's, by name or id) or new_dataset (a new one's name).")
    dataset = _dataset(project, request.user, data["dataset"]) if "dataset" in data else None
    version = add_to_dataset(
        project, request.user, _sources(request, project, data), dataset=dataset, new_name=data.get("new_dataset", ""), expected=data.get("expected")
    )
    return Response({"dataset": DatasetSerializer(version.dataset).data, "version": DatasetVersionSerializer(version).data}, status=status.HTTP_201_CREATED)
