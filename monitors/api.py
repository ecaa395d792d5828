"""The monitors API: monitors (create, change, run now, rotate the webhook secret), their runs, and alerts (acknowledge, snooze, resolve)."""

from datetime import timedelta

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from belvedir.core.permissions import request_project

from . import actions, alerts, schedule, sensitivity
from .models import Alert, Monitor, MonitorRun
from .runs import spent_this_month


class MonitorRunSerializer(serializers.ModelSerializer):
    class Meta:
        model = MonitorRun
        fields = ["id", "due_at", "manual", "suite_run", "baseline", "verdict", "reason", "alpha", "benchmarks", "created_at", "decided_at"]


class MonitorSerializer(serializers.ModelSerializer):
    suite = serializers.CharField(source="suite_name")
    deployment = serializers.CharField(source="deployment.name", allow_null=True, default=None)
    evaluator = serializers.CharField(source="evaluator.name", allow_null=True, default=None)
    judge = serializers.CharField(source="judge.name", allow_null=True, default=None)
    alpha = serializers.SerializerMethodField(help_text="Each run's false-alarm rate: false_alarms_per_month over the runs a month the cron makes.")
    runs_per_month = serializers.SerializerMethodField()
    spent_this_month = serializers.SerializerMethodField()
    last_run = serializers.SerializerMethodField()
    open_alerts = serializers.SerializerMethodField()

    class Meta:
        model = Monitor
        fields = [
            "id",
            "name",
            "kind",
            "suite",
            "deployment",
            "judge",
            "cron",
            "baseline",
            "monthly_budget",
            "min_drop",
            "false_alarms_per_month",
            "alpha",
            "runs_per_month",
            "metric",
            "evaluator",
            "reference_rate",
            "floor",
            "ceiling",
            "cusum",
            "cusum_h",
            "webhook_url",
            "email_members",
            "enabled",
            "next_run_at",
            "spent_this_month",
            "last_run",
            "open_alerts",
            "created_at",
        ]

    def get_alpha(self, monitor) -> float | None:
        return sensitivity.alpha(monitor.cron, monitor.false_alarms_per_month) if monitor.cron else None

    def get_runs_per_month(self, monitor) -> float | None:
        return round(schedule.runs_per_month(monitor.cron), 2) if monitor.cron else None

    def get_spent_this_month(self, monitor) -> str:
        return str(spent_this_month(monitor, timezone.now()))

    def get_last_run(self, monitor) -> dict | None:
        run = monitor.runs.first()
        return MonitorRunSerializer(run).data if run else None

    def get_open_alerts(self, monitor) -> int:
        return monitor.alerts.open().count()


class MonitorWriteSerializer(serializers.Serializer):
    """Every field is checked by monitors.actions, which names the field it refuses (400)."""

    name = serializers.CharField(required=False, max_length=100)
    kind = serializers.ChoiceField(choices=Monitor.Kind.choices, required=False, help_text="suite (default) or live.")
    metric = serializers.ChoiceField(choices=Monitor.Metric.choices, required=False, help_text="Live: what is watched (default pass_rate).")
    evaluator = serializers.CharField(required=False, max_length=100, help_text="A live pass rate's evaluator (name or id).")
    ceiling = serializers.FloatField(required=False, allow_null=True, help_text="Live tokens or duration_p95: the hard limit.")
    reference_rate = serializers.FloatField(required=False, allow_null=True, help_text="Live: the pass rate to hold; empty: learned from the first 200 scores.")
    floor = serializers.FloatField(required=False, allow_null=True, help_text="Live: a hard limit on the last 24 hours' pass rate.")
    suite = serializers.CharField(required=False, max_length=100, help_text="quick, core, or one of the project's suites.")
    deployment = serializers.CharField(required=False, max_length=100, help_text="The deployment watched (name or id).")
    judge = serializers.CharField(required=False, allow_null=True, allow_blank=True, max_length=100)
    cron = serializers.CharField(required=False, max_length=100, help_text="Five fields in UTC, e.g. 0 3 * * * (every night at 03:00).")
    baseline = serializers.IntegerField(required=False, allow_null=True, help_text="A suite run to compare with; empty: the last run that passed.")
    monthly_budget = serializers.DecimalField(max_digits=14, decimal_places=6, required=False, allow_null=True, min_value=0)
    min_drop = serializers.FloatField(required=False, help_text="The smallest drop worth an alert, as a fraction (0.03: three points).")
    false_alarms_per_month = serializers.FloatField(required=False)
    webhook_url = serializers.CharField(required=False, allow_blank=True, max_length=500)
    email_members = serializers.BooleanField(required=False)
    enabled = serializers.BooleanField(required=False)


def _secret_fields(monitor: Monitor) -> dict:
    """The signing secret, shown when a webhook is set and never again (rotate for a new one)."""
    return {"webhook_secret": actions.webhook_secret(monitor)} if monitor.webhook_url else {}


class MonitorViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet):
    serializer_class = MonitorSerializer
    queryset = Monitor.objects.none()

    def get_queryset(self):
        return Monitor.objects.for_user(self.request.user, request_project(self.request)).select_related("deployment", "judge", "evaluator")

    def _data(self, request) -> dict:
        payload = MonitorWriteSerializer(data=request.data, partial=True)
        payload.is_valid(raise_exception=True)
        return {key: value for key, value in payload.validated_data.items()}

    @extend_schema(request=MonitorWriteSerializer, responses={201: MonitorSerializer})
    def create(self, request):
        """A suite on a cron schedule against one deployment; the answer holds the webhook's signing secret, shown once."""
        monitor = actions.create_monitor(request_project(request), request.user, self._data(request))
        return Response({**MonitorSerializer(monitor).data, **_secret_fields(monitor)}, status=status.HTTP_201_CREATED)

    @extend_schema(request=MonitorWriteSerializer, responses={200: MonitorSerializer})
    def partial_update(self, request, pk=None):
        """Change some fields; setting a webhook answers its signing secret, as creating one does."""
        data = self._data(request)
        monitor = actions.update_monitor(self.get_object(), data)
        return Response({**MonitorSerializer(monitor).data, **(_secret_fields(monitor) if data.get("webhook_url") else {})})

    @extend_schema(request=None, responses={201: MonitorRunSerializer})
    @action(detail=True, methods=["post"])
    def run(self, request, pk=None):
        """Run the monitor now (its schedule is unchanged); 400 while a run of it is in progress."""
        return Response(MonitorRunSerializer(actions.run_now(self.get_object())).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: dict})
    @action(detail=True, methods=["post"], url_path="rotate-secret")
    def rotate_secret(self, request, pk=None):
        """A new webhook signing secret, shown once; the old one stops signing at once."""
        return Response({"webhook_secret": actions.rotate_secret(self.get_object())})

    @extend_schema(responses={200: MonitorRunSerializer(many=True)})
    @action(detail=True, methods=["get"])
    def runs(self, request, pk=None):
        """The monitor's runs, newest first, each with its verdict and per-benchmark delta against its baseline."""
        page = self.paginate_queryset(self.get_object().runs.all())
        return self.get_paginated_response(MonitorRunSerializer(page, many=True).data)


class AlertSerializer(serializers.ModelSerializer):
    monitor = serializers.CharField(source="monitor.name")

    class Meta:
        model = Alert
        fields = ["id", "monitor", "kind", "state", "title", "message", "repeats", "snoozed_until", "opened_at", "resolved_at", "first_run", "last_run"]


class SnoozeSerializer(serializers.Serializer):
    hours = serializers.IntegerField(min_value=1, max_value=24 * 30, default=24)


class AlertViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    serializer_class = AlertSerializer
    queryset = Alert.objects.none()

    def get_queryset(self):
        found = Alert.objects.for_user(self.request.user, request_project(self.request)).select_related("monitor")
        state = self.request.query_params.get("state")
        if self.action == "list" and state:
            if state not in {"open", *Alert.State.values}:
                raise serializers.ValidationError({"state": f"Unknown state {state[:40]!r}: open (not resolved), {', '.join(Alert.State.values)}."})
            found = found.open() if state == "open" else found.filter(state=state)
        return found

    @extend_schema(parameters=[OpenApiParameter("state", str, description="open (any not resolved), acknowledged or resolved")])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(request=None, responses={200: AlertSerializer})
    @action(detail=True, methods=["post"])
    def ack(self, request, pk=None):
        """Acknowledge: someone is on it. It stays until a run recovers or it is resolved."""
        alert = self.get_object()
        alerts.acknowledge(alert, request.user)
        return Response(AlertSerializer(alert).data)

    @extend_schema(request=SnoozeSerializer, responses={200: AlertSerializer})
    @action(detail=True, methods=["post"])
    def snooze(self, request, pk=None):
        """Hide it from the open list for `hours` (1 to 720)."""
        payload = SnoozeSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        alert = self.get_object()
        alerts.snooze(alert, timezone.now() + timedelta(hours=payload.validated_data["hours"]))
        return Response(AlertSerializer(alert).data)

    @extend_schema(request=None, responses={200: AlertSerializer})
    @action(detail=True, methods=["post"])
    def resolve(self, request, pk=None):
        alert = self.get_object()
        alerts.resolve(alert)
        return Response(AlertSerializer(alert).data)
