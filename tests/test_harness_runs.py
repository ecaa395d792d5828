"""Harness runs end to end: real git repos, real containers, the task in-process."""

from hashlib import sha256

import pytest
from rest_framework.test import APIClient

from belvedir.core.actions import save_secret
from belvedir.core.models import ApiKey
from belvedir.redaction import MASK
from belvedir.sandbox.models import SandboxHost, SandboxLease
from belvedir.sandbox.owners import Owner
from billing.models import Account, LedgerEntry
from harnesses.actions import cancel_run, start_run
from harnesses.execution import execute_run
from harnesses.models import HarnessEnvVar, Run
from harnesses.redaction import CANARY_ENV, RUN_KEY_ENV

from .concurrency import start_thread
from .harness_fixtures import fund, harness, make_repo, run_status, wait_for

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]

CONTRACT_RUN = """
import hashlib, json, os, urllib.request, urllib.error

names = ["FRACTAL_API_KEY", "FRACTAL_BASE_URL", "FRACTAL_RUN_ID", "BELVEDIR_API_KEY", "BELVEDIR_BASE_URL",
         "BELVEDIR_RUN_ID", "FRACTAL_TASKS_FILE", "MY_SETTING", "MY_TOKEN"]
env = {name: os.environ.get(name) for name in names}
# Secrets written as they are (or reversed, hex...) come back masked: their digests come back whole.
digests = {name: hashlib.sha256(os.environ[name].encode()).hexdigest() for name in ("FRACTAL_API_KEY", "BELVEDIR_API_KEY", "MY_TOKEN")}
tasks = open(os.environ["FRACTAL_TASKS_FILE"]).read()
span = {"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "harness.step", "kind": 1,
        "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000000500000000",
        "attributes": [{"key": "session.id", "value": {"stringValue": os.environ["FRACTAL_RUN_ID"]}}]}
otlp = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()
request = urllib.request.Request(os.environ["FRACTAL_BASE_URL"] + "/api/v1/traces", data=otlp,
                                 headers={"Authorization": "Bearer " + os.environ["FRACTAL_API_KEY"],
                                          "Content-Type": "application/json"})
try:
    during = urllib.request.urlopen(request, timeout=10).status
except urllib.error.HTTPError as exc:
    during = exc.code
print("token is", os.environ["MY_TOKEN"])
print("installed:", open("installed.txt").read().strip())
json.dump({"score": 0.75, "model": "tiny-model", "env": env, "digests": digests, "tasks": tasks, "during": during,
           "cwd": os.getcwd(), "uid": os.getuid()}, open("results.json", "w"))
"""


@pytest.fixture(autouse=True)
def _runs_env(settings, egress):
    # The default network: the harness reaches the live server through the egress proxy.
    settings.HARNESS_ALLOW_LOCAL_REPOS = True
    settings.HARNESS_HEARTBEAT_SECONDS = 0.5
    # Transactional tests flush the table the migration seeded.
    SandboxHost.objects.get_or_create(name="local", defaults={"url": settings.SANDBOX_DOCKER_URL, "capacity": 4})


@pytest.fixture
def funded(project):
    fund(project)
    return project


def launch(h, owner):
    run = start_run(h, owner)
    execute_run(run.pk)
    run.refresh_from_db()
    return run


def test_the_run_contract_holds(tmp_path, owner, funded, api_key):
    sha = make_repo(tmp_path / "repo", {"run.py": CONTRACT_RUN})
    h = harness(funded, owner, tmp_path / "repo", install_command="echo deps-ok > installed.txt && echo installing", tasks="task-a\ntask-b\n")
    HarnessEnvVar.objects.create(harness=h, name="MY_SETTING", value="plain")
    HarnessEnvVar.objects.create(harness=h, name="MY_TOKEN", value="tok-very-secret-123", secret=True)
    before = Account.balance_for(funded)

    run = launch(h, owner)

    assert run.status == "succeeded", (run.status_message, run.log_tail)
    assert run.score == 0.75 and run.model_label == "tiny-model"
    assert run.commit_sha == sha
    assert run.exit_code == 0
    env = run.results["env"]
    assert env["FRACTAL_RUN_ID"] == env["BELVEDIR_RUN_ID"] == str(run.pk)
    assert env["FRACTAL_BASE_URL"] == env["BELVEDIR_BASE_URL"].rstrip("/")
    # results.json is stored with the run's secrets masked, like its log.
    assert env["FRACTAL_API_KEY"] == env["BELVEDIR_API_KEY"] == env["MY_TOKEN"] == MASK
    raw_key = run.secret_env[RUN_KEY_ENV]
    digests = run.results["digests"]
    assert digests["FRACTAL_API_KEY"] == digests["BELVEDIR_API_KEY"] == sha256(raw_key.encode()).hexdigest() and raw_key.startswith("bv_live_")
    assert env["MY_SETTING"] == "plain" and digests["MY_TOKEN"] == sha256(b"tok-very-secret-123").hexdigest()
    assert run.results["tasks"] == "task-a\ntask-b\n"
    assert run.results["cwd"] == "/home/sandbox/repo" and run.results["uid"] == 1000
    # The per-run key sent a span during the run, stored under the run's session ...
    assert run.results["during"] == 200
    from traces.models import TraceSession

    assert TraceSession.objects.get(project=funded, session_id=str(run.pk)).run_id == run.pk
    key = ApiKey.objects.get(pk=run.api_key_id)
    assert key.scope == "ingest" and key.per_run and key.project == funded
    # ... and is revoked now that the run has ended.
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    assert client.generic("POST", "/api/v1/traces", b'{"resourceSpans": []}', content_type="application/json").status_code == 401
    assert "installing" in run.log_tail and "installed: deps-ok" in run.log_tail
    assert "tok-very-secret-123" not in run.log_tail and "token is ********" in run.log_tail
    assert raw_key not in run.log_tail
    # It wrote two of its secrets, never its canary: reported by name, where each was.
    assert run.secrets_reached_output == [
        {"name": RUN_KEY_ENV, "places": ["results.json"]},
        {"name": "MY_TOKEN", "places": ["log", "results.json"]},
    ]
    assert Account.balance_for(funded) == before - 50
    assert not SandboxLease.objects.exists()


def test_a_non_zero_exit_fails_the_run_without_refund(tmp_path, owner, funded):
    make_repo(tmp_path / "repo", {"run.py": "import json; json.dump({'score': 0.1}, open('results.json', 'w')); raise SystemExit(3)"})
    run = launch(harness(funded, owner, tmp_path / "repo"), owner)
    assert run.status == "failed" and run.exit_code == 3, run.status_message
    assert "exited with code 3" in run.status_message
    assert run.score == 0.1
    assert not LedgerEntry.objects.filter(kind="refund").exists()


def test_a_failing_install_fails_the_run_with_its_output(tmp_path, owner, funded):
    make_repo(tmp_path / "repo", {"run.py": "print('never')"})
    run = launch(harness(funded, owner, tmp_path / "repo", install_command="echo cannot-install >&2; exit 9"), owner)
    assert run.status == "failed" and run.exit_code == 9
    assert "install command exited with code 9" in run.status_message
    assert "cannot-install" in run.log_tail and "never" not in run.log_tail
    assert run.run_started_at is None


def test_the_time_limit_kills_the_run(tmp_path, owner, funded):
    make_repo(tmp_path / "repo", {"run.py": "import time\nprint('sleeping', flush=True)\ntime.sleep(600)"})
    run = launch(harness(funded, owner, tmp_path / "repo", time_limit_seconds=10), owner)
    assert run.status == "timed_out"
    assert (run.finished_at - run.launched_at).total_seconds() < 60
    assert "sleeping" in run.log_tail


@pytest.mark.parametrize(
    "script, error",
    [
        ("print('no results')", "wrote no results.json"),
        ("open('results.json', 'w').write('{not json')", "not valid JSON"),
        ("open('results.json', 'w').write('[1, 2]')", "must be a JSON object"),
        ("import json; json.dump({'pad': 'x' * 300_000, 'score': 1}, open('results.json', 'w'))", "larger than 256 KB"),
        ("import json; json.dump({'score': 'high'}, open('results.json', 'w'))", "must be a finite number"),
    ],
)
def test_bad_results_leave_the_score_empty_and_say_why(tmp_path, owner, funded, script, error):
    make_repo(tmp_path / "repo", {"run.py": script})
    run = launch(harness(funded, owner, tmp_path / "repo"), owner)
    assert run.status == "succeeded"
    assert run.score is None
    assert error in run.results_error


def test_a_run_that_exited_0_but_counts_every_task_errored_is_failed(tmp_path, owner, funded, settings):
    settings.MAX_ERROR_FRACTION = 0.1
    make_repo(tmp_path / "repo", {"run.py": "import json; json.dump({'score': 0.0, 'errors': 4, 'total': 4}, open('results.json', 'w'))"})
    run = launch(harness(funded, owner, tmp_path / "repo"), owner)
    assert (run.status, run.exit_code, run.score) == ("failed", 0, 0.0)
    assert run.status_message.startswith("Its results.json counts 4 errors of its 4 tasks (none may)")
    assert not LedgerEntry.objects.filter(kind="refund").exists()  # its own errors, not the platform's


def test_an_output_flood_keeps_only_the_tail(tmp_path, owner, funded):
    flood = "import sys\nline = 'x' * 1023 + '\\n'\nfor _ in range(100_000): sys.stdout.write(line)\nprint('\\0THE-END')\n"
    make_repo(tmp_path / "repo", {"run.py": flood})
    run = launch(harness(funded, owner, tmp_path / "repo"), owner)
    assert run.status == "succeeded"
    assert len(run.log_tail.encode()) <= 16 * 1024
    assert run.log_tail.rstrip().endswith("THE-END")
    assert "\x00" not in run.log_tail


def test_an_unreachable_repo_fails_to_launch_and_is_refunded_once(owner, funded):
    before = Account.balance_for(funded)
    h = harness(funded, owner, "/nonexistent/repo")
    run = launch(h, owner)
    assert run.status == "launch_failed"
    assert "Could not clone" in run.status_message
    assert Account.balance_for(funded) == before
    execute_run(run.pk)  # a re-delivered task changes nothing
    assert LedgerEntry.objects.filter(kind="refund", reference=f"run:{run.pk}").count() == 1


def test_docker_unreachable_fails_to_launch_and_is_refunded(tmp_path, owner, funded):
    make_repo(tmp_path / "repo", {"run.py": "print(1)"})
    SandboxHost.objects.update(url="unix:///tmp/no-docker-here.sock")
    before = Account.balance_for(funded)
    run = launch(harness(funded, owner, tmp_path / "repo"), owner)
    assert run.status == "launch_failed"
    assert "unreachable" in run.status_message
    assert Account.balance_for(funded) == before
    assert ApiKey.objects.get(pk=run.api_key_id).revoked_at is not None


def test_no_cpu_host_fails_to_launch_and_is_refunded(tmp_path, owner, funded):
    make_repo(tmp_path / "repo", {"run.py": "print(1)"})
    SandboxHost.objects.update(enabled=False)
    before = Account.balance_for(funded)
    run = launch(harness(funded, owner, tmp_path / "repo"), owner)
    assert run.status == "launch_failed" and "No enabled CPU sandbox host" in run.status_message
    assert Account.balance_for(funded) == before


def test_cancel_kills_the_sandbox_and_revokes_the_key_without_refund(tmp_path, owner, funded):
    make_repo(tmp_path / "repo", {"run.py": "import time\nprint('working', flush=True)\ntime.sleep(600)"})
    run = start_run(harness(funded, owner, tmp_path / "repo"), owner)
    worker = start_thread(execute_run, run.pk)
    wait_for(lambda: run_status(run) == "running")
    assert cancel_run(Run.objects.get(pk=run.pk))
    worker.join(30)
    assert not worker.is_alive()
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert ApiKey.objects.get(pk=run.api_key_id).revoked_at is not None
    assert not LedgerEntry.objects.filter(kind="refund").exists()
    assert not cancel_run(run)  # already ended


def test_the_run_page_shows_the_live_log_and_stops_polling_when_done(tmp_path, owner, funded, owner_client):
    make_repo(tmp_path / "repo", {"run.py": "import json; print('hello from the run'); json.dump({'score': 2}, open('results.json','w'))"})
    run = launch(harness(funded, owner, tmp_path / "repo"), owner)
    page = owner_client.get(f"/runs/{run.pk}/").content.decode()
    assert "hello from the run" in page and "Succeeded" in page and "$0.50" in page
    poll = owner_client.get(f"/runs/{run.pk}/", HTTP_HX_REQUEST="true")
    assert poll.status_code == 286
    harness_page = owner_client.get(f"/harnesses/{run.harness_id}/").content.decode()
    assert "<svg" in harness_page and f"#{run.pk}" in harness_page


def test_run_api_reports_status_score_log(tmp_path, owner, funded, api):
    make_repo(tmp_path / "repo", {"run.py": "import json; print('api-visible'); json.dump({'score': 5, 'model': 'm'}, open('results.json','w'))"})
    run = launch(harness(funded, owner, tmp_path / "repo"), owner)
    body = api.get(f"/api/v1/runs/{run.pk}").json()
    assert (body["status"], body["score"], body["model"], body["price_cents"]) == ("succeeded", 5.0, "m", 50)
    assert body["results"] == {"score": 5, "model": "m"}
    assert body["duration_seconds"] > 0
    log = api.get(f"/api/v1/runs/{run.pk}/log").json()
    assert "api-visible" in log["log"] and log["finished"] is True
    assert [r["id"] for r in api.get("/api/v1/runs").json()["results"]] == [run.pk]
    assert api.post(f"/api/v1/runs/{run.pk}/cancel").status_code == 409


def test_a_worker_killed_mid_run_is_reaped_and_refunded(tmp_path, owner, funded, settings, docker_backend, subprocess_env):
    import os
    import signal
    import subprocess
    import sys
    import time

    from belvedir.sandbox.reaper import reap

    make_repo(tmp_path / "repo", {"run.py": "import time\nprint('busy', flush=True)\ntime.sleep(600)"})
    before = Account.balance_for(funded)
    run = start_run(harness(funded, owner, tmp_path / "repo"), owner)
    env = {**subprocess_env, "BELVEDIR_ALLOW_LOCAL_REPOS": "1", "BELVEDIR_EGRESS_SOCKET_DIR": str(settings.EGRESS_SOCKET_DIR)}
    worker = subprocess.Popen(
        [sys.executable, "manage.py", "shell", "-c", f"from harnesses.execution import execute_run; execute_run({run.pk})"],
        env=env,
        start_new_session=True,
    )
    try:
        wait_for(lambda: run_status(run) == "running", timeout=90)
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
    assert [c.name for c in docker_backend.managed("run")] == [Owner("run", run.pk).container_name]

    settings.HARNESS_STALE_SECONDS = 1
    time.sleep(1.5)
    outcome = reap()
    run.refresh_from_db()
    assert outcome["reaped"]["run"] == 1 and outcome["leases_released"] == 1 and outcome["orphans_removed"] == 1
    assert run.status == "error" and "worker" in run.status_message
    assert Account.balance_for(funded) == before
    assert ApiKey.objects.get(pk=run.api_key_id).revoked_at is not None
    assert docker_backend.managed("run") == []
    assert run.egress_grant().revoked_at is not None  # the dead worker never revoked it; the reaper did
    assert not SandboxLease.objects.exists()
    assert reap()["reaped"]["run"] == 0
    assert LedgerEntry.objects.filter(kind="refund").count() == 1


LEAKY_RUN = """
import base64, json, os, sys, time, urllib.error, urllib.parse, urllib.request

secrets = [os.environ["MY_TOKEN"], os.environ["FRACTAL_API_KEY"], os.environ["BELVEDIR_CANARY_API_KEY"], PROJECT_SECRET]
def forms(value):
    raw = value.encode()
    return [value, urllib.parse.quote(value, safe=""),
            base64.b64encode(raw).decode(), base64.b64encode(b"a" + raw).decode(), base64.b64encode(b"ab" + raw).decode()]
every = [form for value in secrets for form in forms(value)]
for form in every:
    print("leak:", form, flush=True)
for value in secrets:
    # Two writes apart in time: two chunks of the log, the value cut between them.
    sys.stdout.write("split:" + value[: len(value) // 2]); sys.stdout.flush(); time.sleep(0.3)
    sys.stdout.write(value[len(value) // 2 :] + "\\n"); sys.stdout.flush()
print("short:", os.environ["SHORT"], flush=True)
attributes = [{"key": "session.id", "value": {"stringValue": os.environ["FRACTAL_RUN_ID"]}},
              {"key": "gen_ai.prompt.0.role", "value": {"stringValue": "user"}},
              {"key": "gen_ai.prompt.0.content", "value": {"stringValue": "my keys: " + " ".join(every)}}]
attributes += [{"key": f"leak.{i}", "value": {"stringValue": form}} for i, form in enumerate(every)]
span = {"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "leak " + secrets[0], "kind": 1,
        "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000000500000000", "attributes": attributes,
        "events": [{"timeUnixNano": "1700000000100000000", "name": "printed", "attributes": attributes[3:]}]}
request = urllib.request.Request(os.environ["FRACTAL_BASE_URL"] + "/api/v1/traces",
                                 data=json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode(),
                                 headers={"Authorization": "Bearer " + os.environ["FRACTAL_API_KEY"], "Content-Type": "application/json"})
try:
    sent = urllib.request.urlopen(request, timeout=10).status
except urllib.error.HTTPError as exc:
    sent = exc.code
json.dump({"score": 1, "model": secrets[0], "sent": sent, "leaks": every, secrets[2]: "as a key"}, open("results.json", "w"))
print("done", flush=True)
"""


def test_no_secret_a_run_writes_is_stored_and_each_is_reported_by_name(tmp_path, owner, funded, api, owner_client):
    import base64
    import json
    from urllib.parse import quote

    from django.db import connection

    project_secret = "hf_projectWideSecret1234"
    save_secret(funded, "HF_TOKEN", project_secret)
    make_repo(tmp_path / "repo", {"run.py": f"PROJECT_SECRET = {project_secret!r}\n" + LEAKY_RUN})
    h = harness(funded, owner, tmp_path / "repo")
    HarnessEnvVar.objects.create(harness=h, name="MY_TOKEN", value="tok/very+secret=123", secret=True)
    HarnessEnvVar.objects.create(harness=h, name="SHORT", value="pw-1234", secret=True)

    run = launch(h, owner)

    assert run.status == "succeeded", (run.status_message, run.log_tail)
    assert run.results["sent"] == 200 and "done" in run.log_tail
    secrets = ["tok/very+secret=123", run.secret_env[RUN_KEY_ENV], run.secret_env[CANARY_ENV], project_secret]
    assert run.secret_env[RUN_KEY_ENV].startswith("bv_live_") and run.secret_env[CANARY_ENV].startswith("sk-")
    with connection.cursor() as cursor:
        cursor.execute("SELECT string_agg(row_to_json(s)::text, '\n') FROM traces_span s WHERE session_id = %s", [str(run.pk)])
        spans = cursor.fetchone()[0]
    stored = {"log": run.log_tail, "results.json": json.dumps(run.results), "spans": spans}
    for secret in secrets:
        raw = secret.encode()
        for form in [secret, quote(secret, safe=""), *(base64.b64encode(b"ab"[:k] + raw).decode() for k in range(3))]:
            for place, text in stored.items():
                assert form not in text and form.replace("/", "\\/") not in text, (place, secret, form)
    assert run.log_tail.count(f"split:{MASK}") == 4 and run.log_tail.count("leak:") == 20
    assert run.results["model"] == MASK and MASK in run.results
    assert spans.count(MASK) >= 20
    # Shorter than 8 characters: not redacted, as the harness page says.
    assert "short: pw-1234" in run.log_tail
    # Each was found (and masked) in every place the run wrote, and is reported there by name.
    everywhere = ["log", "results.json", "spans"]
    found = [{"name": name, "places": everywhere} for name in sorted([RUN_KEY_ENV, CANARY_ENV, "HF_TOKEN", "MY_TOKEN"])]
    assert run.secret_reached_output == everywhere and run.secrets_reached_output == found
    assert api.get(f"/api/v1/runs/{run.pk}").json()["secrets_reached_output"] == found
    page = owner_client.get(f"/runs/{run.pk}/").content.decode()
    report = "; ".join(f"{name} in log, results.json, spans" for name in sorted([RUN_KEY_ENV, CANARY_ENV, "HF_TOKEN", "MY_TOKEN"]))
    assert run.secrets_report == report and f"A secret reached its output: {report}." in page


def test_a_run_that_prints_its_secret_in_hex_on_two_lines_stores_none_of_it_and_is_reported(tmp_path, owner, funded, api, owner_client):
    token = "tok_Live/Secret+Value=42"
    program = """
import os, sys, time
hexed = os.environ["API_TOKEN"].encode().hex().upper()
sys.stdout.write("token, in hex: " + hexed[:20] + "\\n"); sys.stdout.flush(); time.sleep(0.3)
sys.stdout.write(hexed[20:] + " (the rest)\\n"); sys.stdout.flush()
print("done")
"""
    make_repo(tmp_path / "repo", {"run.py": program})
    h = harness(funded, owner, tmp_path / "repo")
    HarnessEnvVar.objects.create(harness=h, name="API_TOKEN", value=token, secret=True)

    run = launch(h, owner)

    assert "done" in run.log_tail, (run.status, run.status_message, run.log_tail)
    assert f"token, in hex: {MASK}\n{MASK} (the rest)\n" in run.log_tail
    hexed, log = token.encode().hex(), run.log_tail.lower()
    assert not any(hexed[i : i + 8] in log for i in range(len(hexed) - 7))
    assert run.secrets_report == "API_TOKEN in log"
    assert api.get(f"/api/v1/runs/{run.pk}").json()["secrets_reached_output"] == [{"name": "API_TOKEN", "places": ["log"]}]
    assert "A secret reached its output: API_TOKEN in log." in owner_client.get(f"/runs/{run.pk}/").content.decode()
