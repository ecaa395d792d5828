import re

from django import forms

# pip:NAME[==VERSION] or npm:NAME[@VERSION], then `=` and the command (a pip version's own `==` is not the separator).
AGENT_COMMAND = re.compile(r"(?P<agent>pip:[^\s=]+(?:==[^\s=]+)?|npm:[^\s=]+)\s*=\s*(?P<command>\S.*)")


class TaskSetUploadForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="The task set's name; uploading under an existing name adds a version when the content changed.")
    file = forms.FileField(
        help_text="A .tar.gz or .zip of a task directory (task.toml, instruction.md, environment/, tests/, solution/) or of a folder of them."
    )


class JobForm(forms.Form):
    """A job from the Jobs page; the same checks as the API follow in jobs.create_job."""

    version = forms.ModelChoiceField(queryset=None, label="Task set version", help_text="The job pins this version: later imports don't change what it ran.")
    agents = forms.MultipleChoiceField(
        choices=(),
        widget=forms.CheckboxSelectMultiple,
        required=False,
        help_text="oracle runs each task's solution (a check of the tasks); nop does nothing (the floor); reference is the reference agent on each deployment.",
    )
    deployments = forms.ModelMultipleChoiceField(queryset=None, required=False, help_text="Each paired with every agent that calls a model.")
    attempts = forms.IntegerField(
        min_value=1, max_value=100, initial=5, help_text="Trials of each task by each contestant; Terminal-Bench 2 asks for at least 5."
    )
    budget = forms.CharField(max_length=20, initial="5", help_text="Dollars its trials may be charged in all; a trial that would pass it is skipped.")
    tasks = forms.CharField(required=False, max_length=100_000, help_text="Task names, comma-separated; empty for all.")
    runtime = forms.ChoiceField(choices=[("auto", "auto (the host's default)"), ("runc", "runc"), ("runsc", "runsc (gVisor)")], initial="auto")
    deny_hosts = forms.CharField(
        max_length=30_000,
        required=False,
        label="Deny hosts",
        help_text="Hosts no agent may reach, comma-separated (a benchmark's own site): a trial that did is flagged.",
    )
    name = forms.CharField(max_length=100, required=False)
    extra_agents = forms.CharField(
        max_length=50_000,
        required=False,
        label="Agents from pip or npm",
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="One per line: pip:PACKAGE[==VERSION] or npm:PACKAGE[@VERSION] = the command that runs it once installed (its instruction is in $AGENT_INSTRUCTION_FILE, its model in $LLM_BASE_URL and $LLM_MODEL).",
    )

    def clean_extra_agents(self) -> dict[str, str]:
        commands = {}
        for number, line in enumerate(self.cleaned_data["extra_agents"].splitlines(), 1):
            if not line.strip():
                continue
            found = AGENT_COMMAND.fullmatch(line.strip())
            if not found:
                raise forms.ValidationError(f"Line {number}: give pip:PACKAGE = COMMAND or npm:PACKAGE = COMMAND.")
            commands[found["agent"]] = found["command"]
        return commands

    def __init__(self, *args, project, **kwargs):
        from evals.models import Deployment

        from .agents import AGENTS
        from .models import TaskSetVersion

        super().__init__(*args, **kwargs)
        self.fields["version"].queryset = (
            TaskSetVersion.objects.filter(task_set__project=project).select_related("task_set").order_by("task_set__name", "-number")
        )
        self.fields["agents"].choices = [(name, name) for name in AGENTS]
        self.fields["deployments"].queryset = Deployment.objects.filter(project=project)


def comma_list(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]
