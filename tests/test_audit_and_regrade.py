"""A task set's audit and a job's regrade in real sandboxes (runc), through `bv` against a live server whose worker
runs them: the audit names the attack a task is open to and exits 1; the regrade grades kept outputs by changed tests
with no agent run again, and flips exactly the trials it should."""

import json

import pytest
from click.testing import CliRunner
from django.conf import settings

from agent_tasks.actions import import_task_set
from agent_tasks.models import Grade, Trial
from belvedir.sandbox.models import SandboxHost
from belvedir_cli.main import cli

from .harness_fixtures import fund

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.docker]


@pytest.fixture
def bv(live_server, api_key, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))

    def run(*args):
        return CliRunner().invoke(cli, list(args), env={"BELVEDIR_API_KEY": api_key, "BELVEDIR_BASE_URL": live_server.url}, obj={})

    return run


@pytest.fixture
def host(db):
    SandboxHost.objects.update(enabled=False)
    return SandboxHost.objects.create(name="audits", url=settings.SANDBOX_DOCKER_URL, capacity=2)


def task(name: str, test: str, *, files: dict[str, bytes] | None = None, solve: str = "echo 42 > /app/answer", mode: str = "in_place") -> dict[str, bytes]:
    return {
        f"{name}/task.toml": f'version = "1.0"\n[verifier]\ntimeout_sec = 60\noutputs = ["/app/answer"]\nmode = "{mode}"\n[agent]\ntimeout_sec = 60\n'.encode(),
        f"{name}/instruction.md": b"Write 42 to /app/answer.\n",
        f"{name}/environment/Dockerfile": b"FROM belvedir-sandbox:bookworm\nWORKDIR /app\n" + (b"COPY app/ /app/\n" if files else b""),
        f"{name}/tests/test.sh": test.encode(),
        f"{name}/solution/solve.sh": solve.encode(),
        **{f"{name}/environment/app/{path}": data for path, data in (files or {}).items()},
    }


# Its verifier runs a checker the environment put in /app, which the agent can rewrite: open to test-inputs.
OPEN = "python3 /app/check.py && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt"
CHECKER = b"import sys\nsys.exit(open('/app/answer').read().strip() != '42')\n"


def test_bv_tasks_audit_names_the_attack_a_task_is_open_to_and_exits_1(bv, project, owner, worker, host):
    fund(project, 500)
    import_task_set(project, owner, "audited", task("open", OPEN, files={"check.py": CHECKER}))
    found = bv("tasks", "audit", "audited", "--runtime", "runc", "--wait", "--json")
    assert found.exit_code == 1, found.output
    verdict = json.loads(found.stdout)["tasks"][0]
    assert (verdict["task"], verdict["status"], verdict["hacks"]) == ("open", "hackable", ["test-inputs"]), verdict
    assert "scored 1 without solving it" in verdict["reasons"][0]
    shown = bv("tasks", "audit", "audited", "--show")
    assert shown.exit_code == 1 and "hackable" in shown.stdout and "test-inputs" in shown.stdout


def test_bv_jobs_regrade_grades_kept_outputs_by_changed_tests_and_flips_only_those_it_should(bv, project, owner, worker, host):
    fund(project, 500)
    strict = "grep -qx 42 /app/answer && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt"
    exists = "test -s /app/answer && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt"
    import_task_set(project, owner, "graded", task("strict", strict, mode="sealed") | task("exists", exists))
    ran = bv("jobs", "run", "graded", "--agent", "oracle", "--agent", "nop", "--budget", "1", "--runtime", "runc", "--wait", "--json")
    assert ran.exit_code == 0, ran.output
    job = json.loads(ran.stdout)
    assert {(t.task.name, t.agent): t.reward for t in Trial.objects.filter(job_id=job["id"]).select_related("task")} == {
        ("strict", "oracle"): 1.0,
        ("strict", "nop"): 0.0,
        ("exists", "oracle"): 1.0,
        ("exists", "nop"): 0.0,
    }
    # Version 2: `strict` now asks for 43 (its oracle's kept 42 fails it), `exists` is unchanged.
    stricter = strict.replace("42", "43")
    version = import_task_set(project, owner, "graded", task("strict", stricter, mode="sealed") | task("exists", exists))[0]
    assert version.changes["tasks"] == {"exists": {"change": "unchanged", "parts": []}, "strict": {"change": "regrade", "parts": ["tests"]}}
    trials_before = Trial.objects.count()
    regraded = bv("jobs", "regrade", str(job["id"]), "--task-set-version", "2", "--wait")
    assert regraded.exit_code == 0, regraded.output
    assert "4 graded, new − old reward -0.250" in regraded.stdout and "strict" in regraded.stdout
    grades = {(g.trial.task.name, g.trial.agent): (g.status, g.reward, g.runtime) for g in Grade.objects.select_related("trial__task")}
    assert grades == {
        ("strict", "oracle"): ("succeeded", 0.0, "runc"),
        ("strict", "nop"): ("succeeded", 0.0, "runc"),
        ("exists", "oracle"): ("succeeded", 1.0, "runc"),
        ("exists", "nop"): ("succeeded", 0.0, "runc"),
    }
    assert Trial.objects.count() == trials_before  # no agent ran again
    assert all(g.graded_digest == g.trial.graded_digest for g in Grade.objects.select_related("trial"))  # the very outputs graded before
