from django import forms

from belvedir.sandbox.models import ComputeType
from harnesses.models import Harness

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

    def clean_name(self):
        name = self.cleaned_data["name"]
        if FineTunedModel.objects.filter(project=self.project, name=name).exists():
            raise forms.ValidationError("A model with this name already exists in the project.")
        return name


class RunBenchmarkForm(forms.Form):
    harness = forms.ModelChoiceField(queryset=Harness.objects.none(), empty_label=None, help_text="A GPU harness of this project.")

    def __init__(self, *args, project=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["harness"].queryset = Harness.objects.filter(project=project, compute_type=ComputeType.GPU)
