"""The datasets API: upload, a dataset's versions, a version's rows, the diff between two versions, and rows added,
edited and removed (each change a new version). Rows made of traces: traces/dataset_api.py."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.pagination import CursorPagination
from rest_framework.response import Response

from belvedir.core.pagination import MAX_LIMIT, next_link, window
from belvedir.core.permissions import request_project

from ..api import delete_protected
from ..forms import DatasetRowsUploadForm, DatasetUploadForm
from ..models import Dataset, DatasetRow, DatasetVersion
from .rows import DatasetError, clean_row
from .versions import add_rows, create_dataset, edit_row, remove_rows, rows_at, upload_into, version_of
from .versions import diff as diff_versions

# Rows added in one request; more go in a file upload (streamed, up to 100,000 rows).
MAX_ROWS_PER_REQUEST = 1000
# Per kind (added, edited, removed) in a diff's answer; `limit` asks for more.
DIFF_LIMIT = 500
FILE_SCHEMA = {"type": "string", "format": "binary"}


class DatasetSerializer(serializers.ModelSerializer):
    version = serializers.IntegerField(read_only=True, help_text="The latest version; row_count is its.")

    class Meta:
        model = Dataset
        fields = ["id", "name", "version", "row_count", "created_at"]


class DatasetVersionSerializer(serializers.ModelSerializer):
    created_by = serializers.CharField(source="created_by.username", read_only=True, default=None)

    class Meta:
        model = DatasetVersion
        fields = ["number", "row_count", "added", "edited", "removed", "note", "created_by", "created_at"]


class DatasetRowSerializer(serializers.ModelSerializer):
    class Meta:
        model = DatasetRow
        fields = ["position", "input", "input_format", "expected", "metadata", "since_version"]


class RowsInSerializer(serializers.Serializer):
    rows = serializers.ListField(
        child=serializers.JSONField(),
        min_length=1,
        max_length=MAX_ROWS_PER_REQUEST,
        help_text='[{"input": text or a list of chat messages, "expected": text, "metadata": {...}}]',
    )


class RowEditSerializer(serializers.Serializer):
    input = serializers.JSONField(required=False, help_text="Text, or a list of chat messages (input_format messages).")
    input_format = serializers.ChoiceField(choices=DatasetRow.InputFormat.choices, required=False)
    expected = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    metadata = serializers.DictField(required=False)


class RowCursor(CursorPagination):
    # Position order, a cursor rather than offsets: page 2,000 of a 100,000-row version costs what page 1 does.
    ordering = "position"
    page_size = 100


class DatasetViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet):
    serializer_class = DatasetSerializer
    # Only names the model for the OpenAPI schema; get_queryset scopes every request.
    queryset = Dataset.objects.none()
    pagination_class = None

    def get_queryset(self):
        return Dataset.objects.for_user(self.request.user, request_project(self.request))

    @extend_schema(
        request={"multipart/form-data": {"type": "object", "properties": {"name": {"type": "string"}, "file": FILE_SCHEMA}}},
        responses={201: DatasetSerializer},
    )
    def create(self, request):
        """Upload a file as a new dataset (its version 1): JSONL of {"input": ..., "expected": ...} rows, or CSV (a name
        ending in .csv) whose header names input and expected."""
        form = DatasetUploadForm(request.data, request.FILES)
        if not form.is_valid():
            return Response(form.errors, status=400)
        upload = form.cleaned_data["file"]
        dataset = create_dataset(request_project(request), request.user, form.cleaned_data["name"], upload, filename=upload.name)
        return Response(DatasetSerializer(dataset).data, status=201)

    def perform_destroy(self, instance):
        delete_protected(instance, "Its evaluations keep it: a dataset with evaluations cannot be deleted.")

    @extend_schema(
        request={"multipart/form-data": {"type": "object", "properties": {"file": FILE_SCHEMA, "replace": {"type": "boolean"}}}},
        responses={201: DatasetVersionSerializer},
    )
    @action(detail=True, methods=["post"])
    def upload(self, request, pk=None):
        """A file's rows as the next version: added after the dataset's rows, or with replace=true in their places, row for row."""
        dataset = self.get_object()
        form = DatasetRowsUploadForm(request.data, request.FILES)
        if not form.is_valid():
            return Response(form.errors, status=400)
        upload = form.cleaned_data["file"]
        version = upload_into(dataset, request.user, upload, upload.name, replace=form.cleaned_data["replace"])
        return Response(DatasetVersionSerializer(version).data, status=201)

    @extend_schema(responses=DatasetVersionSerializer(many=True))
    @action(detail=True, methods=["get"])
    def versions(self, request, pk=None):
        """Every version, newest first: its row count, what it changed from the one before, and who made it."""
        return Response(DatasetVersionSerializer(self.get_object().versions.select_related("created_by"), many=True).data)

    @extend_schema(
        methods=["GET"], parameters=[OpenApiParameter("version", int, description="The latest by default.")], responses=DatasetRowSerializer(many=True)
    )
    @extend_schema(methods=["POST"], request=RowsInSerializer, responses={201: DatasetVersionSerializer})
    @action(detail=True, methods=["get", "post"])
    def rows(self, request, pk=None):
        """GET: a version's rows in position order, a page at a time (`next`). POST: add rows, as the next version."""
        dataset = self.get_object()
        if request.method == "POST":
            payload = RowsInSerializer(data=request.data)
            payload.is_valid(raise_exception=True)
            rows = [clean_row(row, f"Row {n} of the request") for n, row in enumerate(payload.validated_data["rows"], 1)]
            return Response(DatasetVersionSerializer(add_rows(dataset, request.user, rows)).data, status=status.HTTP_201_CREATED)
        number = version_of(dataset, request.query_params.get("version") or dataset.version).number
        paginator = RowCursor()
        page = paginator.paginate_queryset(rows_at(dataset, number), request, view=self)
        return paginator.get_paginated_response(DatasetRowSerializer(page, many=True).data)

    @extend_schema(methods=["PATCH"], request=RowEditSerializer, responses={200: DatasetVersionSerializer})
    @extend_schema(methods=["DELETE"], request=None, responses={200: DatasetVersionSerializer})
    @action(detail=True, methods=["patch", "delete"], url_path=r"rows/(?P<position>\d+)")
    def row(self, request, pk=None, position=None):
        """PATCH: edit the row at this position (input, expected, metadata); DELETE: remove it. Each makes the next version;
        the one before keeps the row as it was. 404 for a row not in the latest version."""
        dataset = self.get_object()
        if request.method == "DELETE":
            return Response(DatasetVersionSerializer(remove_rows(dataset, request.user, [int(position)])).data)
        payload = RowEditSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        if not payload.validated_data:
            raise DatasetError("Give what to change: input, expected or metadata.")
        return Response(DatasetVersionSerializer(edit_row(dataset, request.user, int(position), payload.validated_data)).data)

    @extend_schema(
        parameters=[
            OpenApiParameter("version", int, description="The newer version; the latest by default."),
            OpenApiParameter("base", int, description="The older version; the one before `version` by default (0: before the first)."),
            OpenApiParameter("limit", int, description=f"Rows listed per kind; {DIFF_LIMIT} by default, {MAX_LIMIT} at most."),
            OpenApiParameter("offset", int, description="Rows of each kind to skip: `next` gives the following page."),
        ],
        responses={200: dict},
    )
    @action(detail=True, methods=["get"])
    def diff(self, request, pk=None):
        """The rows added, edited (before and after) and removed between two versions, by position, with their counts."""
        dataset = self.get_object()
        params = request.query_params
        number = version_of(dataset, params.get("version") or dataset.version).number
        base = params.get("base", "")
        base = None if base == "" else 0 if base == "0" else version_of(dataset, base).number
        limit, offset = window(params, DIFF_LIMIT)
        changes = diff_versions(dataset, number, base)
        page = slice(offset, offset + limit)
        row = DatasetRowSerializer
        return Response(
            {
                "dataset": dataset.pk,
                "base": changes.base,
                "version": changes.number,
                "counts": changes.counts,
                "limit": limit,
                "offset": offset,
                "next": next_link(request, limit, offset, max(changes.counts.values(), default=0)),
                "added": row(changes.added[page], many=True).data,
                "edited": [{"before": row(old).data, "after": row(new).data} for old, new in changes.edited[page]],
                "removed": row(changes.removed[page], many=True).data,
            }
        )
