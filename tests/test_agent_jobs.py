"""Jobs in real sandboxes: agents × tasks × attempts through the queue's own path (claim, charge, run, settle,
advance), and hostile agents that fail their own trial and nothing else.

The fast tests of budgets, refunds, pass@k, comparisons and the export are in tests/test_agent_job_rules.py.
"""

from pathlib import Path

import pytest
from django.conf import settings

from agent_tasks import jobs
from agent_tasks.actions import import_task_set
from agent_tasks.models import Job, Trial
from agent_tasks.results import summary
from agent_tasks.trials import AGENTS, Agent
from belvedir.sandbox.models import SandboxHost
from billing.models import Account, LedgerEntry

from .harness_fixtures import fund

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "tasks"


class ShellAgent(Agent):
    def __init__(self, name: str, script: str):
        self.name, self.script = name, script

    def command(self, task):
        return self.script


@pytest.fixture
def local_host(db):
    SandboxHost.objects.update(enabled=False)
    return SandboxHost.objects.create(name="jobs-local", url=settings.SANDBOX_DOCKER_URL, capacity=2)


@pytest.fixture
def examples(project, owner):
    files = {f"tasks/{p.relative_to(EXAMPLES).as_posix()}": p.read_bytes() for p in sorted(EXAMPLES.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}
    return import_task_set(project, owner, "examples", files)[0]


@pytest.fixture
def worker(monkeypatch):
    """The queue, worked here: what advance sends is run by run_job_trial, as a worker would, in send order."""
    sent = []
    monkeypatch.setattr(jobs, "async_task", lambda name, trial_id, **kw: sent.append(trial_id))

    def drain(job):
        jobs.advance(job.pk)
        while sent:
            jobs.run_job_trial(sent.pop(0))
        job.refresh_from_db()
        return job

    return drain


def test_a_job_runs_every_agent_on_every_task_each_attempt_and_charges_each_trial_once(local_host, examples, project, owner, worker, settings):
    settings.TRIAL_PRICE_CENTS = 5
    fund(project, 1000)
    before = Account.balance_for(project)
    tasks = ["complete-fizzbuzz", "repair-json-config", "upper-names"]
    job = jobs.create_job(project, owner, version=examples, agents=["oracle", "nop"], tasks=tasks, attempts=2, budget_cents=100, runtime="runc")
    job = worker(job)

    assert job.status == Job.Status.FINISHED
    trials = list(job.trials.select_related("task"))
    assert len(trials) == 3 * 2 * 2
    assert {(t.task.name, t.agent, t.attempt, t.status) for t in trials} == {(n, a, k, "succeeded") for n in tasks for a in ("oracle", "nop") for k in (1, 2)}
    assert {t.reward for t in trials if t.agent == "oracle"} == {1.0} and {t.reward for t in trials if t.agent == "nop"} == {0.0}
    assert {t.runtime for t in trials} == {"runc"}
    charges = LedgerEntry.objects.filter(kind=LedgerEntry.Kind.RUN_CHARGE, reference__startswith="trial:")
    assert sorted(charges.values_list("reference", flat=True)) == sorted(f"trial:{t.pk}" for t in trials)
    assert Account.balance_for(project) == before - 12 * 5 and job.charged_cents == 60
    results = {entry["contestant"]: entry for entry in summary(job)}
    assert results["oracle"]["pass_at_k"]["1"]["value"] == 1.0 and results["oracle"]["pass_hat_k"]["2"]["value"] == 1.0
    assert results["nop"]["pass_at_k"]["2"]["value"] == 0.0 and results["nop"]["cost_per_solve_cents"] is None
    assert results["oracle"]["cost_per_solve_cents"] == 5.0


@pytest.mark.parametrize("runtime", ["runc", "runsc"])
def test_an_agent_that_kills_its_sandbox_forks_without_end_or_fills_the_disk_fails_alone_and_the_job_goes_on(
    local_host, examples, project, owner, worker, monkeypatch, settings, runtime
):
    hostile = {
        "killer": ShellAgent("killer", "kill -9 -1; kill -9 1; exit 0"),
        "forker": ShellAgent("forker", "f() { f | f & }; f; sleep 5"),
        "filler": ShellAgent("filler", "cat /dev/zero > /app/fill; dd if=/dev/zero of=/tmp/fill bs=1M count=100000; exit 0"),
    }
    monkeypatch.setitem(AGENTS, "killer", hostile["killer"])
    monkeypatch.setitem(AGENTS, "forker", hostile["forker"])
    monkeypatch.setitem(AGENTS, "filler", hostile["filler"])
    settings.SANDBOX_PIDS = 256  # the default, stated: at 512 the forking agent held gVisor's engine calls past 60 s
    settings.SANDBOX_MEMORY_MB = 256  # the writable places are tmpfs counted against it: the filler meets it soon
    fund(project, 1000)
    job = jobs.create_job(
        project, owner, version=examples, agents=["killer", "forker", "filler", "oracle"], tasks=["upper-names"], budget_cents=100, runtime=runtime
    )
    job = worker(job)

    trials = {t.agent: t for t in job.trials.all()}
    assert job.status == Job.Status.FINISHED
    assert (trials["oracle"].status, trials["oracle"].reward) == ("succeeded", 1.0)
    for name in hostile:
        trial = trials[name]
        # Each ends on its own: scored 0 by the verifier, or errored naming why; never the platform's fault, never a 1.
        assert trial.status in (Trial.Status.SUCCEEDED, Trial.Status.ERRORED), (name, trial.status)
        assert trial.reward in (0.0, None) and not trial.platform_fault, (name, trial.reward, trial.error)
    assert LedgerEntry.objects.filter(kind=LedgerEntry.Kind.REFUND).count() == 0
