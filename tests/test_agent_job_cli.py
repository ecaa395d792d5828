"""`bv jobs` against a live server whose worker runs the job's trials through the queue's own path: run and wait,
list, show, trials, compare as a gate (exit 0, 1 or 2), cancel and export.

Each trial ends as its verifier would end it (tests/trial_endings.py): what the CLI shows is the job's, proven here;
the shipped tasks' oracle and nop in real sandboxes are tests/test_agent_trials.py's."""

import io
import json
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from django.conf import settings

from agent_tasks import jobs
from agent_tasks.actions import import_task_set
from belvedir.sandbox.models import SandboxHost
from belvedir_cli.main import cli

from .harness_fixtures import fund
from .trial_endings import as_verified

pytestmark = pytest.mark.django_db(transaction=True)

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "tasks"
SIX = ["complete-fizzbuzz", "count-errors", "create-files", "csv-totals", "dedupe-emails", "upper-names"]


@pytest.fixture
def bv(live_server, api_key, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))

    def run(*args):
        return CliRunner().invoke(cli, list(args), env={"BELVEDIR_API_KEY": api_key, "BELVEDIR_BASE_URL": live_server.url}, obj={})

    return run


def test_bv_jobs_runs_follows_compares_as_a_gate_and_exports(bv, project, owner, worker, tmp_path, monkeypatch):
    monkeypatch.setattr(jobs, "execute", as_verified)
    SandboxHost.objects.update(enabled=False)
    SandboxHost.objects.create(name="cli-jobs", backend="fake", url="fake://cli-jobs", capacity=2)
    files = {f"tasks/{p.relative_to(EXAMPLES).as_posix()}": p.read_bytes() for p in sorted(EXAMPLES.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}
    import_task_set(project, owner, "examples", files)
    fund(project, 500)
    tasks = [arg for name in SIX for arg in ("--task", name)]

    oracle = bv("jobs", "run", "examples", "--agent", "oracle", *tasks, "--budget", "1", "--runtime", "runc", "--wait", "--json")
    assert oracle.exit_code == 0, oracle.output
    a = json.loads(oracle.stdout)
    assert a["status"] == "finished" and a["results"][0]["pass_at_k"]["1"]["value"] == 1.0
    assert "job " in oracle.stderr and "6/6" in oracle.stderr  # progress, on stderr where stdout is not a terminal
    nop = bv("jobs", "run", "examples", "--agent", "nop", *tasks, "--budget", "1", "--runtime", "runc", "--wait")
    assert nop.exit_code == 0 and "nop" in nop.stdout and "0/6" in nop.stdout, nop.output
    b = json.loads(bv("jobs", "list", "--json").stdout)[0]["id"]

    worse = bv("jobs", "compare", str(a["id"]), str(b), "--fail-if-worse")
    assert worse.exit_code == 1 and "Verdict: worse (gate: fail)" in worse.stdout, worse.output
    better = bv("jobs", "compare", str(b), str(a["id"]), "--fail-if-worse")
    assert better.exit_code == 0 and "Verdict: better" in better.stdout
    missing = bv("jobs", "compare", str(a["id"]), "999999", "--fail-if-worse")
    assert missing.exit_code == 2 and "404" in missing.output

    trials = json.loads(bv("jobs", "trials", str(b), "--json").stdout)
    assert len(trials) == 6 and {t["reward"] for t in trials} == {0.0}
    assert json.loads(bv("jobs", "show", str(b), "--json").stdout)["charged_cents"] == 6 * settings.TRIAL_PRICE_CENTS
    out = tmp_path / "job.zip"
    exported = bv("jobs", "export", str(a["id"]), "-o", str(out))
    assert exported.exit_code == 0, exported.output
    with zipfile.ZipFile(io.BytesIO(out.read_bytes())) as archive:
        result = json.loads(archive.read(f"job-{a['id']}/result.json"))
    assert result["terminal_bench_2_rules"][0]["held"] is False  # one trial per task, not five
    assert json.loads(bv("jobs", "cancel", str(b), "--json").stdout)["skipped"] == 0
