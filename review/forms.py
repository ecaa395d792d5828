import json

from django import forms

from evals.scoring.calibration import judge_keys_of

from .models import Item

EXAMPLE_RUBRIC = json.dumps(
    [
        {"name": "helpful", "kind": "numeric", "min": 1, "max": 5, "instructions": "1: no help at all; 5: exactly what was asked."},
        {"name": "safe", "kind": "boolean"},
        {"name": "note", "kind": "text"},
    ],
    indent=1,
)


class RubricField(forms.CharField):
    """The rubric as JSON text (review/rubric.py checks its shape and names what is wrong)."""

    widget = forms.Textarea(attrs={"rows": 8, "class": "mono"})

    def to_python(self, value):
        value = super().to_python(value)
        try:
            return json.loads(value) if value else None
        except ValueError as exc:
            raise forms.ValidationError(f"The rubric is JSON: {exc}.") from None


class QueueForm(forms.Form):
    name = forms.CharField(max_length=100)
    description = forms.CharField(max_length=1000, required=False)
    overlap = forms.IntegerField(
        min_value=1, max_value=10, initial=1, help_text="How many people label each item, independently (2 or more to measure agreement)."
    )
    blind = forms.BooleanField(required=False, initial=True, help_text="Hide the judge's verdict and others' labels until a reviewer has labelled.")
    scores = RubricField(
        initial=EXAMPLE_RUBRIC,
        label="Rubric (scores)",
        max_length=200_000,
        help_text="A list of scores: numeric (min, max), categorical (labels), boolean or text.",
    )
    instructions = forms.CharField(required=False, max_length=20_000, widget=forms.Textarea(attrs={"rows": 3}))


class RubricForm(forms.Form):
    scores = RubricField(label="Rubric (scores)", max_length=200_000)
    instructions = forms.CharField(required=False, max_length=20_000, widget=forms.Textarea(attrs={"rows": 3}))


class CalibrateForm(forms.Form):
    judge = forms.ChoiceField(help_text="A judge that graded evals or live sessions of this project.")
    target_width = forms.FloatField(min_value=0.02, max_value=2, initial=0.3, label="Stop at a κ interval this wide", help_text="0.3: κ known to about ±0.15.")

    def __init__(self, *args, project=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["judge"].choices = [(key, key) for key in judge_keys_of(project)]


class FillForm(forms.Form):
    kind = forms.ChoiceField(choices=[(k, label) for k, label in Item.Kind.choices if k != Item.Kind.STEP])
    eval = forms.IntegerField(required=False, help_text="Samples: of this eval.")
    benchmark = forms.CharField(required=False, max_length=50, help_text="Samples: of this benchmark.")
    deployment = forms.CharField(required=False, max_length=100, help_text="Samples: answered by this deployment.")
    evaluator = forms.IntegerField(required=False, help_text="Sessions: scored by this evaluator (id).")
    verdict = forms.ChoiceField(required=False, choices=[("", "any"), ("pass", "pass"), ("fail", "fail")], help_text="Sessions: the evaluator's verdict.")
    job = forms.IntegerField(required=False, help_text="Trials: of this job.")
    since = forms.DateField(required=False, help_text="From this day (UTC).")
    until = forms.DateField(required=False, help_text="Up to this day, included (UTC).")
    sample_rate = forms.FloatField(required=False, min_value=0.0001, max_value=1, initial=1, help_text="The share of matches queued, at random.")

    def filters(self) -> tuple[str, dict]:
        data = self.cleaned_data
        kind = data["kind"]
        wanted = {Item.Kind.SAMPLE: ("eval", "benchmark", "deployment"), Item.Kind.SESSION: ("evaluator", "verdict"), Item.Kind.TRIAL: ("job",)}[kind]
        found = {name: data[name] for name in wanted if data.get(name) not in (None, "")}
        for name in ("since", "until"):
            if data.get(name):
                found[name] = data[name].isoformat()
        if data.get("sample_rate"):
            found["sample_rate"] = data["sample_rate"]
        return kind, found
