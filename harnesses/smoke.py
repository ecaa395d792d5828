"""Smoke-running the catalog: every preset, smallest subset, against one deployment.

Meant for operators whose sandboxes reach the internet: each preset becomes a harness (reused on
the next smoke) in the deployment's project, with the deployment as its model endpoint and
BELVEDIR_LIMIT=1, and runs to its end in this process. GPU presets run on CPU through their
OpenAI-compatible path, so no GPU is needed to prove a driver works.
"""

from dataclasses import dataclass

from django.db import transaction

from belvedir.sandbox.models import ComputeType
from billing.errors import InsufficientBalance

from .actions import start_run
from .execution import execute_run
from .forms import preset_initial
from .models import Harness, HarnessEnvVar, Preset, Run

SMOKE_TASKS = "Create a file named smoke.txt that contains the single word ok :: grep -qx ok smoke.txt\n"
SECRET_NAMES = ("KEY", "TOKEN", "SECRET", "PASSWORD")


@dataclass
class SmokeResult:
    preset: Preset
    passed: bool
    reason: str
    run: Run | None = None


def endpoint_env(deployment) -> dict[str, str]:
    return {"LLM_BASE_URL": deployment.base_url, "LLM_MODEL": deployment.model, "LLM_API_KEY": deployment.api_key, "BELVEDIR_LIMIT": "1"}


def smoke_harness(preset: Preset, deployment, user, env: dict[str, str], time_limit_seconds: int) -> Harness:
    initial = preset_initial(preset)
    with transaction.atomic():
        harness, _ = Harness.objects.update_or_create(
            project=deployment.project,
            name=f"smoke: {preset.name}",
            defaults={
                "created_by": user,
                "preset": preset,
                "repo_url": initial["repo_url"],
                "ref": initial["ref"],
                "install_command": initial["install_command"],
                "run_command": initial["run_command"],
                "compute_type": ComputeType.CPU,
                "tasks": SMOKE_TASKS if preset.needs_tasks else "",
                "time_limit_seconds": time_limit_seconds,
            },
        )
        harness.env_vars.all().delete()
        for name, value in {**endpoint_env(deployment), **env}.items():
            HarnessEnvVar.objects.create(harness=harness, name=name, value=value, secret=any(s in name for s in SECRET_NAMES))
    return harness


def smoke(preset: Preset, deployment, user, env: dict[str, str], time_limit_seconds: int) -> SmokeResult:
    harness = smoke_harness(preset, deployment, user, env, time_limit_seconds)
    try:
        run = start_run(harness, user)
    except InsufficientBalance as exc:
        return SmokeResult(preset, False, str(exc))
    execute_run(run.pk)
    run.refresh_from_db()
    if run.status == Run.Status.SUCCEEDED and run.score is not None and not run.results_error:
        return SmokeResult(preset, True, f"score {run.score:g} (run #{run.pk})", run)
    reason = run.results_error or run.status_message or run.get_status_display()
    # The command's stdout and stderr reach the log through separate pipes, so
    # an error message may land just before the last line: prefer it.
    tail = [line for line in run.log_tail.splitlines() if line.strip()][-5:]
    last = next((line for line in reversed(tail) if "error" in line.lower()), tail[-1] if tail else "")
    return SmokeResult(preset, False, f"{run.status}: {reason}" + (f" | {last[-200:]}" if last else "") + f" (run #{run.pk})", run)
