from django import forms

from harnesses.models import Harness

from . import formats
from .actions import benchmark_harnesses, harness_kind
from .models import FineTunedModel
from .validation import validate_adapter_zip


class ModelUploadForm(forms.ModelForm):
    class Meta:
        model = FineTunedModel
        fields = ["name", "base_model", "adapter", "description"]
        widgets = {"description": forms.Textarea(attrs={"rows": 3})}

    def __init__(self, *args, project=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.project = project
        self.fields["adapter"].validators.append(validate_adapter_zip)

    def clean(self):
        cleaned = super().clean()
        # Only once the zip itself and the base model are valid: the format check reads both.
        if cleaned.get("adapter") and cleaned.get("base_model"):
            try:
                self.instance.adapter_format = formats.adapter_format(cleaned["adapter"], cleaned["base_model"])
            except forms.ValidationError as exc:
                self.add_error("adapter", exc)
        return cleaned

    def clean_name(self):
        name = self.cleaned_data["name"]
        if FineTunedModel.objects.filter(project=self.project, name=name).exists():
            raise forms.ValidationError("A model with this name already exists in the project.")
        return name


class RunBenchmarkForm(forms.Form):
    harness = forms.ModelChoiceField(queryset=Harness.objects.none(), empty_label=None)

    def __init__(self, *args, model=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["harness"].queryset = benchmark_harnesses(model)
        self.fields["harness"].help_text = f"A {harness_kind(model)} of this project."
