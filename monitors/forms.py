from django import forms

from evals.models import Deployment, Suite, SuiteRun
from traces.models import Evaluator

from .models import Monitor


class MonitorForm(forms.Form):
    name = forms.CharField(max_length=100)
    suite = forms.ChoiceField(help_text="quick: every benchmark at 100 rows; core: the whole catalog; or one of yours.")
    deployment = forms.ModelChoiceField(queryset=Deployment.objects.none(), help_text="The deployment watched.")
    judge = forms.ModelChoiceField(queryset=Deployment.objects.none(), required=False, help_text="For judged benchmarks (mt_bench).")
    cron = forms.CharField(max_length=100, initial="0 3 * * *", label="Schedule (cron, UTC)", help_text="0 3 * * *: every night at 03:00 UTC.")
    baseline = forms.ModelChoiceField(
        queryset=SuiteRun.objects.none(), required=False, help_text="A suite run to compare every run with; empty: the last run that passed."
    )
    min_drop = forms.FloatField(
        min_value=0.1, max_value=100, initial=3, label="Smallest drop worth an alert (points)", help_text="On a 0-100 scale: 3 is three points."
    )
    false_alarms_per_month = forms.FloatField(
        min_value=0.01, max_value=30, initial=0.3, label="False alarms a month you accept", help_text="0.3: about one in three months."
    )
    monthly_budget = forms.DecimalField(required=False, min_value=0, max_digits=14, decimal_places=6, label="Monthly budget ($)")
    webhook_url = forms.CharField(required=False, max_length=500, label="Webhook URL", help_text="Slack-compatible JSON, signed (HMAC-SHA256).")
    email_members = forms.BooleanField(required=False, initial=True, label="Email the project's members")

    def __init__(self, *args, project=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["suite"].choices = [("quick", "quick"), ("core", "core")] + [(s.name, s.name) for s in Suite.objects.filter(project=project)]
        for name in ("deployment", "judge"):
            self.fields[name].queryset = Deployment.objects.filter(project=project)
        self.fields["baseline"].queryset = SuiteRun.objects.filter(project=project)

    def as_data(self) -> dict:
        data = dict(self.cleaned_data)
        data["min_drop"] = data["min_drop"] / 100
        return data


class LiveMonitorForm(forms.Form):
    name = forms.CharField(max_length=100)
    metric = forms.ChoiceField(choices=Monitor.Metric.choices, initial=Monitor.Metric.PASS_RATE)
    evaluator = forms.ModelChoiceField(queryset=Evaluator.objects.none(), required=False, help_text="For a pass rate: its scores on live traffic.")
    reference_rate = forms.FloatField(
        required=False, min_value=1, max_value=99, label="Pass rate to hold (%)", help_text="Empty: learned from its first 200 scores."
    )
    min_drop = forms.FloatField(min_value=0.1, max_value=100, initial=3, label="Smallest drop worth an alert (points)")
    false_alarms_per_month = forms.FloatField(min_value=0.01, max_value=30, initial=0.3, label="False alarms a month you accept")
    floor = forms.FloatField(
        required=False, min_value=0, max_value=100, label="Floor (%)", help_text="A hard limit: the last 24 hours' pass rate below it alerts."
    )
    webhook_url = forms.CharField(required=False, max_length=500, label="Webhook URL", help_text="Slack-compatible JSON, signed (HMAC-SHA256).")
    email_members = forms.BooleanField(required=False, initial=True, label="Email the project's members")

    def __init__(self, *args, project=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["evaluator"].queryset = Evaluator.objects.filter(project=project)
        # Two forms on one page: their fields need ids of their own.
        self.auto_id = "live_%s"

    def as_data(self) -> dict:
        data = dict(self.cleaned_data, kind="live")
        data["min_drop"] = data["min_drop"] / 100
        for name in ("reference_rate", "floor"):
            data[name] = None if data[name] is None else data[name] / 100
        return data
