from django import forms

from belvedir.core.masks import MaskWithoutSecret, unmasked
from belvedir.redaction import MIN_LENGTH
from belvedir.sandbox.models import ComputeType
from belvedir.sandbox.output import MASK

from .models import MAX_TIME_LIMIT_SECONDS, Harness, HarnessEnvVar, Preset
from .validation import validate_command, validate_egress_domains, validate_env_name, validate_ref, validate_repo_url


class HarnessForm(forms.ModelForm):
    time_limit_minutes = forms.IntegerField(min_value=1, max_value=MAX_TIME_LIMIT_SECONDS // 60, initial=60, help_text="At most 60.")
    preset = forms.ModelChoiceField(queryset=Preset.objects.all(), required=False, widget=forms.HiddenInput)

    class Meta:
        model = Harness
        fields = ["name", "repo_url", "ref", "install_command", "run_command", "compute_type", "gpu_type", "tasks", "egress_domains", "local_model", "preset"]
        widgets = {
            "install_command": forms.Textarea(attrs={"rows": 2}),
            "run_command": forms.Textarea(attrs={"rows": 2}),
            "tasks": forms.Textarea(attrs={"rows": 4}),
            "egress_domains": forms.Textarea(attrs={"rows": 2, "placeholder": "api.anthropic.com"}),
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["time_limit_minutes"].initial = self.instance.time_limit_seconds // 60
        self.fields["repo_url"].validators.append(validate_repo_url)
        self.fields["ref"].validators.append(validate_ref)
        self.fields["egress_domains"].validators.append(validate_egress_domains)
        for name in ("install_command", "run_command"):
            self.fields[name].validators.append(validate_command)

    def clean(self):
        cleaned = super().clean()
        preset = cleaned.get("preset")
        if preset and preset.needs_tasks and not (cleaned.get("tasks") or "").strip():
            self.add_error("tasks", f"{preset.name} brings no task suite: list the tasks to run, one per line.")
        if cleaned.get("compute_type") == ComputeType.GPU and not cleaned.get("gpu_type"):
            self.add_error("gpu_type", "Choose a GPU type for a GPU harness.")
        return cleaned

    def save(self, commit=True):
        self.instance.time_limit_seconds = self.cleaned_data["time_limit_minutes"] * 60
        return super().save(commit)


class EnvVarForm(forms.ModelForm):
    class Meta:
        model = HarnessEnvVar
        fields = ["name", "value", "secret"]
        widgets = {"value": forms.TextInput()}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["name"].validators.append(validate_env_name)
        self.fields["value"].required = False
        if self.instance.pk and self.instance.secret:
            # A secret is never sent back to the browser; leaving the mask keeps it.
            self.initial["value"] = MASK

    def clean_value(self):
        # The mask always stands for the stored secret, whatever the "secret"
        # box now says (the instance still holds the stored flag here).
        stored = self.instance.value if self.instance.pk and self.instance.secret else None
        try:
            return unmasked(self.cleaned_data["value"], stored)
        except MaskWithoutSecret as exc:
            raise forms.ValidationError(str(exc)) from None


class BaseEnvVarFormSet(forms.BaseInlineFormSet):
    # The env table's help text (templates/harnesses/_harness_fields.html).
    secret_help = (
        "Secret values are masked in every page and API response, and redacted from everything a run writes before it is stored "
        "(its log, its results.json and the spans it sends), also base64- or URL-encoded. "
        f"A value shorter than {MIN_LENGTH} characters is not redacted."
    )

    def clean(self):
        super().clean()
        names = [f.cleaned_data.get("name") for f in self.forms if f.cleaned_data and not f.cleaned_data.get("DELETE")]
        duplicates = {n for n in names if n and names.count(n) > 1}
        if duplicates:
            raise forms.ValidationError(f"Each variable once: {', '.join(sorted(duplicates))} appears twice.")

    def variables(self) -> list[dict]:
        """The variables as save_harness takes them: the rows kept, their masks already resolved by EnvVarForm."""
        return [
            {key: form.cleaned_data[key] for key in ("name", "value", "secret")}
            for form in self.forms
            if form.cleaned_data.get("name") and not form.cleaned_data.get("DELETE")
        ]


def env_var_formset(extra: int = 3):
    return forms.inlineformset_factory(Harness, HarnessEnvVar, form=EnvVarForm, formset=BaseEnvVarFormSet, extra=extra, can_delete=True)


EnvVarFormSet = env_var_formset()


def preset_initial(preset: Preset) -> dict:
    return {
        "name": preset.name,
        "repo_url": preset.resolved_repo_url,
        "ref": preset.ref,
        "install_command": preset.install_command,
        "run_command": preset.run_command,
        "compute_type": preset.compute_type,
        "gpu_type": preset.gpu_type or "A10G",
        "local_model": preset.local_model,
        "preset": preset.pk,
        "time_limit_minutes": 60,
    }
