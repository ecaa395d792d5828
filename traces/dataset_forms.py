"""The forms that add traces to a dataset: which dataset (or a new one), which input, and for one session its task,
step and edited answer."""

from django import forms

from evals.models import Dataset

from .models import Task
from .to_datasets import FIRST_USER_MESSAGE, INPUTS, Source


class ToDatasetForm(forms.Form):
    dataset = forms.ModelChoiceField(queryset=Dataset.objects.none(), required=False, empty_label="— a new dataset —")
    new_name = forms.CharField(max_length=100, required=False, label="New dataset's name")
    input = forms.ChoiceField(choices=list(INPUTS.items()), initial=FIRST_USER_MESSAGE, widget=forms.RadioSelect, label="Input")

    def __init__(self, *args, request=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["dataset"].queryset = Dataset.objects.for_user(request.user, request.project)


class SessionRowForm(ToDatasetForm):
    """One session's row: which task and step it is made of, and its expected output as the person edited it."""

    task = forms.ModelChoiceField(queryset=Task.objects.none(), required=False, empty_label="the whole session")
    step = forms.IntegerField(
        required=False,
        min_value=1,
        widget=forms.NumberInput(attrs={"style": "width:6em"}),
        help_text="For a conversation: the LLM call it ends at (the last by default).",
    )
    span = forms.CharField(required=False, widget=forms.HiddenInput)
    expected = forms.CharField(required=False, strip=False, widget=forms.Textarea(attrs={"rows": 6}), label="Expected output")

    def __init__(self, *args, session=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["task"].queryset = session.tasks.all()

    def source(self, session) -> Source:
        data = self.cleaned_data
        return Source(session=session, task=data["task"], step=data["step"], span_id=data["span"], input=data["input"])
