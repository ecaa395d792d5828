"""A harness run with secrets and its per-run key, as the worker leaves it, for the ingest benches' `--run-key`."""

import secrets

SECRET_COUNT = 5  # harness secret env, project secrets, the run's key and canary: a typical run's


def make_run_key(project, user) -> tuple[int, int, str]:
    """(run id, key id, raw key) of a launched run whose batches are redacted for its secrets."""
    from belvedir.core.actions import save_secret
    from belvedir.core.models import ApiKey
    from harnesses.models import Harness, HarnessEnvVar, Run
    from harnesses.redaction import CANARY_ENV, RUN_KEY_ENV, new_canary

    harness = Harness.objects.create(project=project, name="bench", repo_url="/bench", install_command="true", run_command="true")
    HarnessEnvVar.objects.create(harness=harness, name="LLM_API_KEY", value="sk-" + secrets.token_urlsafe(32), secret=True)
    HarnessEnvVar.objects.create(harness=harness, name="SWEBENCH_API_KEY", value=secrets.token_hex(16), secret=True)
    save_secret(project, "HF_TOKEN", "hf_" + secrets.token_urlsafe(24))
    key, raw = ApiKey.issue(project=project, user=user, name="run", scope=ApiKey.Scope.INGEST, per_run=True)
    run = Run.objects.create(
        project=project,
        harness=harness,
        compute_type="cpu",
        price_cents=50,
        created_by=user,
        api_key=key,
        secret_env={RUN_KEY_ENV: raw, CANARY_ENV: new_canary()},
    )
    return run.pk, key.pk, raw


def make_plain_run_key(user) -> tuple[int, int, str, int]:
    """(run id, key id, raw key, project id) of a run with nothing to redact: the run-key path without redaction.

    In a project of its own: a project's secrets are every run's in it.
    """
    from belvedir.core.actions import create_project
    from belvedir.core.models import ApiKey
    from harnesses.models import Harness, Run

    project = create_project(user, "plain runs")
    harness = Harness.objects.create(project=project, name="plain", repo_url="/bench", install_command="true", run_command="true")
    key, raw = ApiKey.issue(project=project, user=user, name="run", scope=ApiKey.Scope.INGEST, per_run=True)
    run = Run.objects.create(project=project, harness=harness, compute_type="cpu", price_cents=50, created_by=user, api_key=key)
    return run.pk, key.pk, raw, project.pk
