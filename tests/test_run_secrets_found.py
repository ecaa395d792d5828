"""A run whose output held one of its own secrets says so, by the secret's name and where: on its page, in the API and in `bv`."""

import json

import pytest
from click.testing import CliRunner

from belvedir.redaction import MASK, MIN_LENGTH
from belvedir.sandbox.models import SandboxHost
from belvedir_cli.main import cli
from harnesses.actions import start_run
from harnesses.execution import execute_run
from harnesses.models import HarnessEnvVar, Run

from .harness_fixtures import fund, harness, make_repo

# On the fake backend (the worker's own processes): what is tried is what the
# worker makes of the output, not the sandbox's isolation.
pytestmark = pytest.mark.django_db(transaction=True)

API_TOKEN = "tok_Live/Secret+Value=42"

PRINTS_ITS_TOKEN_IN_HEX_ON_TWO_LINES = """
import os
hexed = os.environ["API_TOKEN"].encode().hex().upper()
print("token, in hex: " + hexed[:20])
print(hexed[20:] + " (the rest)")
print("done")
"""


@pytest.fixture
def fake_host(settings):
    settings.HARNESS_ALLOW_LOCAL_REPOS = True
    settings.HARNESS_SANDBOX_NETWORK = "none"  # the fake backend mounts no egress proxy
    SandboxHost.objects.update(enabled=False)
    return SandboxHost.objects.create(name="fake", backend="fake", url="fake://secrets", capacity=4)


def launch(project, owner, tmp_path, program: str) -> Run:
    fund(project)
    make_repo(tmp_path / "repo", {"run.py": program})
    h = harness(project, owner, tmp_path / "repo")
    HarnessEnvVar.objects.create(harness=h, name="API_TOKEN", value=API_TOKEN, secret=True)
    run = start_run(h, owner)
    execute_run(run.pk)
    run.refresh_from_db()
    return run


def test_a_run_that_prints_its_secret_in_hex_across_two_lines_is_reported_and_stores_none_of_it(
    fake_host, project, owner, tmp_path, api, api_key, owner_client, live_server
):
    run = launch(project, owner, tmp_path, PRINTS_ITS_TOKEN_IN_HEX_ON_TWO_LINES)

    assert "done" in run.log_tail, (run.status, run.status_message, run.log_tail)
    assert f"token, in hex: {MASK}\n{MASK} (the rest)\n" in run.log_tail
    hexed = API_TOKEN.encode().hex()
    log = run.log_tail.lower()
    assert not any(hexed[i : i + MIN_LENGTH] in log for i in range(len(hexed) - MIN_LENGTH + 1))
    # Reported by name, never by value, and where.
    assert run.secret_places == {"API_TOKEN": 1}
    assert run.secrets_report == "API_TOKEN in log"
    body = api.get(f"/api/v1/runs/{run.pk}").json()
    assert body["secrets_reached_output"] == [{"name": "API_TOKEN", "places": ["log"]}]
    assert body["secret_reached_output"] == ["log"]
    assert API_TOKEN not in json.dumps(body)
    page = owner_client.get(f"/runs/{run.pk}/").content.decode()
    assert "A secret reached its output: API_TOKEN in log." in page and API_TOKEN not in page
    shown = CliRunner().invoke(cli, ["runs", "show", str(run.pk)], env={"BELVEDIR_API_KEY": api_key, "BELVEDIR_BASE_URL": live_server.url}, obj={})
    assert shown.exit_code == 0, shown.output
    assert "Warning: a secret reached its output: API_TOKEN in log; it was redacted before storing." in shown.stdout


def test_a_run_that_prints_no_secret_is_not_reported(fake_host, project, owner, tmp_path, api, owner_client):
    run = launch(project, owner, tmp_path, 'print("token, in hex: " + "ab" * 10)\nprint("done")\n')
    assert "done" in run.log_tail and "abababab" in run.log_tail
    assert run.secret_places == {} and run.secrets_report == ""
    assert api.get(f"/api/v1/runs/{run.pk}").json()["secrets_reached_output"] == []
    assert "A secret reached its output" not in owner_client.get(f"/runs/{run.pk}/").content.decode()


@pytest.mark.parametrize("vendor", ["postgresql", "portable"])
def test_places_from_the_worker_and_the_trace_workers_add_up(project, owner, tmp_path, vendor, monkeypatch):
    from django.db import connection

    from belvedir.redaction import Redactor
    from harnesses.redaction import CANARY_ENV, Place, note_found, run_secrets

    h = harness(project, owner, tmp_path)
    HarnessEnvVar.objects.create(harness=h, name="API_TOKEN", value=API_TOKEN, secret=True)
    run = Run.objects.create(project=project, harness=h, price_cents=50, created_by=owner, secret_env={CANARY_ENV: "sk-canary-value-1234"})
    secrets = run_secrets(run.pk)
    # `make run` serves from SQLite, which has no jsonb: its way is the ORM's (the jsonb statement failed the run's worker there).
    monkeypatch.setattr(connection, "vendor", "sqlite" if vendor == "portable" else connection.vendor)
    for place, text in [(Place.LOG, API_TOKEN), (Place.SPANS, f"{API_TOKEN} sk-canary-value-1234"), (Place.LOG, "nothing")]:
        redactor = Redactor(secrets.values)
        redactor.text(text)
        note_found(secrets, redactor, place)
    run.refresh_from_db()
    assert run.secret_places == {"API_TOKEN": 5, CANARY_ENV: 4}
    assert run.secrets_report == f"API_TOKEN in log, spans; {CANARY_ENV} in spans"
