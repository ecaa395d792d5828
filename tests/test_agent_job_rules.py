"""Jobs without sandboxes: what a job may be made of, its budget and refunds on the ledger, how trials are sent,
pass@k and pass^k against a count over every draw, the paired comparison against the evals' statistics, the
Harbor export with Terminal-Bench 2's rules, and the API, pages and admin.

Trials' outcomes are written onto their rows here: running them is tests/test_agent_jobs.py's part.
"""

import io
import itertools
import json
import re
import zipfile
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agent_tasks import jobs, trials
from agent_tasks.actions import import_task_set
from agent_tasks.agents import resolve
from agent_tasks.comparison import NotComparable, compare_jobs
from agent_tasks.harbor_export import export
from agent_tasks.harbor_export import trial_name as harbor_trial_name
from agent_tasks.models import Job, Trial
from agent_tasks.outputs import Outputs
from agent_tasks.results import summary
from belvedir.sandbox.errors import NoCapacity
from belvedir.sandbox.models import EgressDestination, EgressGrant, SandboxHost, SandboxLease
from billing import workloads
from billing.models import Account, LedgerEntry
from evals import statistics
from evals.comparison import paired_statistics
from evals.models import Deployment

from .concurrency import run_concurrently
from .harness_fixtures import fund
from .trial_endings import as_verified, ends_with

pytestmark = pytest.mark.django_db

PRICE = 5


def task_files(name: str, verifier: str = "echo 1 > /logs/verifier/reward.txt", solution: bool = True) -> dict[str, bytes]:
    files = {
        f"{name}/task.toml": b'version = "1.0"\n[agent]\ntimeout_sec = 60\n[verifier]\ntimeout_sec = 60\n',
        f"{name}/instruction.md": f"Do {name}.\n".encode(),
        f"{name}/environment/Dockerfile": f"FROM {django_settings.SANDBOX_IMAGE}\nWORKDIR /app\n".encode(),
        f"{name}/tests/test.sh": f"#!/bin/bash\n{verifier}\n".encode(),
    }
    if solution:
        files[f"{name}/solution/solve.sh"] = b"#!/bin/bash\ntrue\n"
    return files


def task_set(project, owner, names, name="set", **kwargs):
    files = {}
    for task in names:
        files.update(task_files(task, **kwargs))
    return import_task_set(project, owner, name, files)[0]


@pytest.fixture(autouse=True)
def priced(settings):
    settings.TRIAL_PRICE_CENTS = PRICE


@pytest.fixture
def host(db):
    SandboxHost.objects.update(enabled=False)
    return SandboxHost.objects.create(name="jobs", backend="fake", url="fake://jobs", capacity=4)


@pytest.fixture
def held(monkeypatch):
    """What advance sends to the queue, held here."""
    sent = []
    monkeypatch.setattr(jobs, "async_task", lambda name, trial_id, **kw: sent.append(trial_id))
    return sent


@pytest.fixture
def funded(project):
    fund(project, 1000)
    return project


def new_job(project, owner, version, **kwargs) -> Job:
    return jobs.create_job(project, owner, version=version, **{"agents": ["nop"], "budget_cents": 1000, **kwargs})


def score(job: Job, rewards: dict[tuple[str, str], list]):
    """Each (task, agent)'s trials ended with these rewards in attempt order (None: errored, "flag": 1 but flagged)."""
    for (task, agent), values in rewards.items():
        trials = job.trials.filter(task__name=task, agent=agent).order_by("attempt")
        for trial, value in zip(trials, values, strict=True):
            fields = {"status": "succeeded", "reward": value, "finished_at": timezone.now()}
            if value is None:
                fields = {"status": "errored", "error": "The verifier wrote no reward", "finished_at": timezone.now()}
            elif value == "flag":
                fields.update(reward=1.0, flagged=True, flag_reasons=["The agent wrote the reward"])
            Trial.objects.filter(pk=trial.pk).update(**fields)


# -- what a job may be made of ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        ({"agents": []}, "agents", "at least one agent"),
        ({"agents": ["claude"]}, "agents", "No agent named claude"),
        ({"attempts": 0}, "attempts", "1 to 100"),
        ({"attempts": 101}, "attempts", "1 to 100"),
        ({"tasks": ["nope"]}, "tasks", "has no task nope"),
        ({"runtime": "kata"}, "runtime", "auto, runc, runsc"),
        ({"budget_cents": PRICE - 1}, "budget", "covers no trial"),
        ({"attempts": 60, "agents": ["nop", "oracle"]}, "attempts", "at most 200"),
    ],
)
def test_a_job_that_cannot_be_made_names_the_field_and_stores_nothing(project, owner, settings, change, field, says):
    settings.JOB_MAX_TRIALS = 200
    version = task_set(project, owner, ["a", "b"])
    with pytest.raises(jobs.JobError, match=says) as refused:
        new_job(project, owner, version, **change)
    assert refused.value.field == field
    assert not Job.objects.exists() and not Trial.objects.exists()


def test_the_oracle_is_refused_for_tasks_without_a_solution_and_an_unbuildable_environment_is_named(project, owner):
    version = task_set(project, owner, ["a"], solution=False)
    with pytest.raises(jobs.JobError, match="a lack"):
        new_job(project, owner, version, agents=["oracle"])
    files = task_files("b")
    files["b/environment/Dockerfile"] = b"FROM ubuntu:22.04\n"
    other = import_task_set(project, owner, "other", files)[0]
    with pytest.raises(jobs.JobError, match="b: .*ubuntu:22.04 cannot be pulled"):
        new_job(project, owner, other)
    assert not Job.objects.exists()


def test_an_agent_that_calls_a_model_runs_once_per_deployment_and_needs_one(project, owner):
    version = task_set(project, owner, ["a"])
    with pytest.raises(jobs.JobError, match="needs at least one deployment") as refused:
        new_job(project, owner, version, agents=["reference"])
    assert refused.value.field == "deployments"
    small, large = (Deployment.objects.create(project=project, name=n, base_url=f"https://{n}.example/v1", model=n) for n in ("small", "large"))
    job = new_job(project, owner, version, agents=["reference", "nop"], deployments=[small, large], attempts=2)
    columns = sorted({t.contestant for t in job.trials.select_related("deployment")})
    assert columns == ["nop", "reference · large", "reference · small"] and job.trials.count() == 6
    plain = Deployment.objects.create(project=project, name="plain", base_url="https://plain.example/v1", model="p", api_style="completions")
    with pytest.raises(jobs.JobError, match="plain serve plain completions"):
        new_job(project, owner, version, agents=["reference"], deployments=[small, plain])


def test_the_agents_own_account_gives_its_tokens_and_flags_commands_that_look_for_the_answer():
    trajectory = {
        "steps": [
            {"usage": {"prompt_tokens": 100, "completion_tokens": 7}, "commands": [{"command": "cat /tests/test.sh"}, {"command": "ls solution/"}]},
            {"usage": {"input_tokens": 50, "output_tokens": 3}, "commands": [{"command": "python3 attestation.py --tests-dir=x"}]},
            {"usage": {"prompt_tokens": True, "completion_tokens": -4}, "commands": [{"command": "echo 1 > /logs/verifier/reward.txt"}]},
            "not a step",
        ]
    }
    assert trials.tokens(trajectory) == (150, 10)
    flagged = trials.flags_in(trajectory)
    assert [f.split(": ", 1)[1] for f in flagged] == ["'cat /tests/test.sh'", "'ls solution/'", "'echo 1 > /logs/verifier/reward.txt'"]
    assert trials.flags_in({"steps": "nonsense"}) == [] and trials.tokens({}) == (0, 0)


def test_a_job_makes_every_trial_up_front_first_attempts_first(project, owner):
    version = task_set(project, owner, ["a", "b"])
    job = new_job(project, owner, version, agents=["oracle", "nop"], attempts=3)
    order = [(t.attempt, t.task.name, t.agent) for t in job.trials.select_related("task").order_by("pk")]
    assert order == [(k, task, agent) for k in (1, 2, 3) for task in ("a", "b") for agent in ("oracle", "nop")]
    assert set(job.trials.values_list("status", flat=True)) == {"queued"}


# -- sending, charging, refunding -------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_advance_sends_no_more_trials_than_the_hosts_have_free_places(project, owner, host, held):
    SandboxLease.objects.create(host=host, owner="run:busy")  # one of its 4 places taken by a run
    version = task_set(project, owner, ["a", "b", "c", "d"])
    job = new_job(project, owner, version, attempts=2)
    assert len(held) == 3  # sent on commit
    assert jobs.advance(job.pk) == 0  # sent and not started count against the room
    jobs.claim(held[0])  # started: holds its place through its lease from now on
    SandboxLease.objects.create(host=host, owner=f"trial:{held[0]}")
    assert jobs.advance(job.pk) == 0
    Trial.objects.filter(pk=held[0]).update(status="succeeded", reward=1.0)
    SandboxLease.objects.filter(owner=f"trial:{held[0]}").delete()
    assert jobs.advance(job.pk) == 1 and len(held) == 4


def test_a_trial_is_charged_once_at_its_claim_and_one_past_the_budget_is_skipped_uncharged(funded, owner):
    version = task_set(funded, owner, ["a", "b", "c"])
    job = new_job(funded, owner, version, budget_cents=2 * PRICE)
    before = Account.balance_for(funded)
    first, second, third = job.trials.order_by("pk")
    assert jobs.claim(first.pk).status == "running"
    assert jobs.claim(first.pk) is None  # a second message for the same trial
    assert jobs.claim(second.pk).status == "running"
    assert jobs.claim(third.pk) is None
    third.refresh_from_db()
    assert third.status == "skipped" and "budget ($0.10) is spent" in third.error and third.price_cents == 0
    assert Account.balance_for(funded) == before - 2 * PRICE
    assert sorted(LedgerEntry.objects.filter(kind="run_charge").values_list("reference", flat=True)) == sorted([f"trial:{first.pk}", f"trial:{second.pk}"])
    job.refresh_from_db()
    assert job.charged_cents == 2 * PRICE


@pytest.mark.django_db(transaction=True)
def test_two_workers_claiming_with_one_trials_budget_left_charge_once(funded, owner):
    version = task_set(funded, owner, ["a", "b"])
    job = new_job(funded, owner, version, budget_cents=PRICE)
    ids = list(job.trials.values_list("pk", flat=True))
    claimed = run_concurrently(lambda i: jobs.claim(ids[i]), 2)
    assert sum(1 for t in claimed if isinstance(t, Trial)) == 1
    assert LedgerEntry.objects.filter(kind="run_charge").count() == 1
    assert sorted(Trial.objects.values_list("status", flat=True)) == ["running", "skipped"]


def test_a_short_balance_or_a_debt_skips_the_trial_naming_it(project, owner):
    version = task_set(project, owner, ["a"])
    job = new_job(project, owner, version)
    trial = job.trials.get()
    assert jobs.claim(trial.pk) is None
    trial.refresh_from_db()
    assert trial.status == "skipped" and "Insufficient balance: $0.00 available, $0.05 needed" in trial.error
    assert not LedgerEntry.objects.filter(kind="run_charge").exists()


def no_capacity_once(then):
    """An `execute` whose first call finds no host free (a run took the place after the claim), then does `then`."""
    calls = []

    def execute(trial, agent=None, **kwargs):
        calls.append(trial.pk)
        if len(calls) == 1:
            raise NoCapacity("no place free")
        return then(trial, agent, **kwargs)

    return execute


@pytest.mark.django_db(transaction=True)
def test_a_job_runs_every_agent_on_every_task_each_attempt_through_the_queue_and_charges_each_trial_once(project, owner, host, held, monkeypatch):
    monkeypatch.setattr(jobs, "execute", as_verified)
    fund(project, 1000)
    before = Account.balance_for(project)
    tasks = ["complete-fizzbuzz", "repair-json-config", "upper-names"]
    version = task_set(project, owner, tasks)
    job = jobs.create_job(project, owner, version=version, agents=["oracle", "nop"], tasks=tasks, attempts=2, budget_cents=100, runtime="runc")
    assert len(held) == 4  # as many as the host has places, sent on commit
    while held:  # as a worker would: each sent trial run in send order, each sending the job's next
        jobs.run_job_trial(held.pop(0))
    job.refresh_from_db()

    assert job.status == Job.Status.FINISHED
    ran = list(job.trials.select_related("task"))
    assert {(t.task.name, t.agent, t.attempt, t.status) for t in ran} == {(n, a, k, "succeeded") for n in tasks for a in ("oracle", "nop") for k in (1, 2)}
    assert len(ran) == 12 and {t.runtime for t in ran} == {"runc"}  # the job's runtime reached each trial
    charges = LedgerEntry.objects.filter(kind=LedgerEntry.Kind.RUN_CHARGE, reference__startswith="trial:")
    assert sorted(charges.values_list("reference", flat=True)) == sorted(f"trial:{t.pk}" for t in ran)
    assert Account.balance_for(project) == before - 12 * PRICE and job.charged_cents == 12 * PRICE
    results = {entry["contestant"]: entry for entry in summary(job)}
    assert results["oracle"]["pass_at_k"]["1"]["value"] == 1.0 and results["oracle"]["pass_hat_k"]["2"]["value"] == 1.0
    assert results["nop"]["pass_at_k"]["2"]["value"] == 0.0 and results["nop"]["cost_per_solve_cents"] is None
    assert results["oracle"]["cost_per_solve_cents"] == PRICE


def test_a_trial_waiting_again_for_a_host_keeps_its_one_charge(funded, owner, host, held, monkeypatch):
    version = task_set(funded, owner, ["a"])
    job = new_job(funded, owner, version)
    trial = job.trials.get()
    monkeypatch.setattr(jobs, "execute", no_capacity_once(ends_with(reward=1.0)))
    jobs.run_job_trial(trial.pk)
    trial.refresh_from_db()
    assert (trial.status, trial.price_cents) == ("queued", PRICE) and trial.sent_at  # waiting, and sent again
    jobs.run_job_trial(trial.pk)
    trial.refresh_from_db()
    assert (trial.status, trial.reward) == ("succeeded", 1.0)
    assert LedgerEntry.objects.filter(kind="run_charge").count() == 1
    assert not LedgerEntry.objects.filter(kind="refund").exists()
    job.refresh_from_db()
    assert (job.charged_cents, job.status) == (PRICE, "finished")


def test_a_trial_the_platform_failed_is_refunded_once_and_one_the_agent_failed_is_not(funded, owner):
    version = task_set(funded, owner, ["a", "b"])
    job = new_job(funded, owner, version)
    platform, agent = (jobs.claim(t.pk) for t in job.trials.order_by("pk"))
    trials.finish(platform, trials.TrialResult(error="The platform failed; retry this trial: engine gone", platform_fault=True))
    trials.finish(agent, trials.TrialResult(error="The sandbox stopped: out of memory"))
    # A second end of the same trial (a worker's retry, the reaper) changes nothing.
    trials.finish(platform, trials.TrialResult(error="again", platform_fault=True))
    refunds = LedgerEntry.objects.filter(kind="refund")
    assert list(refunds.values_list("reference", "amount_cents")) == [(f"trial:{platform.pk}", PRICE)]
    job.refresh_from_db()
    assert job.charged_cents == PRICE
    assert summary(job)[0]["cost_cents"] == PRICE


def test_a_trial_whose_worker_died_is_errored_refunded_and_its_job_moves_on(funded, owner, host, held):
    version = task_set(funded, owner, ["a"])
    job = new_job(funded, owner, version)
    trial = jobs.claim(job.trials.get().pk)
    Trial.objects.filter(pk=trial.pk).update(deadline_at=timezone.now() - timedelta(seconds=1))
    assert workloads.reap(trials.TRIALS) == 1
    trial.refresh_from_db()
    assert (trial.status, trial.platform_fault) == ("errored", True) and "Retry it" in trial.error
    assert LedgerEntry.objects.filter(kind="refund", reference=f"trial:{trial.pk}").count() == 1
    job.refresh_from_db()
    # Its one trial errored: the job ends failed, saying so, not finished with nothing to show.
    assert (job.status, job.charged_cents) == ("failed", 0) and job.status_message.startswith("1 of its 1 trials errored (none may")


def test_cancel_skips_the_waiting_trials_refunds_any_charged_and_lets_running_ones_finish(funded, owner, held, monkeypatch):
    version = task_set(funded, owner, ["a", "b", "c", "d"])
    job = new_job(funded, owner, version)
    first, waited, *_ = job.trials.order_by("pk")
    running = jobs.claim(first.pk)
    # Claimed and charged, then put back to wait for a host: the cancel must give its charge back.
    monkeypatch.setattr(jobs, "execute", no_capacity_once(ends_with(reward=1.0)))
    jobs.run_job_trial(waited.pk)
    before = Account.balance_for(funded)
    assert jobs.cancel(job) == 3
    assert jobs.cancel(job) == 0
    assert sorted(job.trials.values_list("status", flat=True)) == ["running", "skipped", "skipped", "skipped"]
    assert jobs.claim(running.pk) is None
    assert list(LedgerEntry.objects.filter(kind="refund").values_list("reference", "amount_cents")) == [(f"trial:{waited.pk}", PRICE)]
    assert Account.balance_for(funded) == before + PRICE
    job.refresh_from_db()
    assert job.charged_cents == PRICE  # the running one's


def test_a_trial_whose_deployment_was_deleted_is_skipped_uncharged(funded, owner, settings):
    version = task_set(funded, owner, ["a"])
    deployment = Deployment.objects.create(project=funded, name="gone", base_url="http://127.0.0.2:9/v1", model="m")
    job = new_job(funded, owner, version, agents=["reference"], deployments=[deployment])
    deployment.delete()
    trial = job.trials.get()
    assert jobs.claim(trial.pk) is None
    trial.refresh_from_db()
    assert trial.status == "skipped" and "deployment was deleted" in trial.error and trial.price_cents == 0
    assert not LedgerEntry.objects.filter(kind="run_charge").exists()


# -- results ------------------------------------------------------------------------------------------------------------


def reference(values: list, k: int) -> tuple[float, float]:
    """pass@k and pass^k by brute force: the share of every k-draw of the scored trials with one / all solved."""
    scored = [v for v in values if v is not None]
    draws = list(itertools.combinations(scored, k))
    return sum(any(v == 1 for v in d) for d in draws) / len(draws), sum(all(v == 1 for v in d) for d in draws) / len(draws)


def test_pass_at_k_and_pass_hat_k_match_a_count_over_every_draw_averaged_over_tasks(project, owner):
    version = task_set(project, owner, ["a", "b", "c", "d"])
    job = new_job(project, owner, version, attempts=5)
    rewards = {
        ("a", "nop"): [1.0, 0.0, 1.0, 1.0, 0.0],
        ("b", "nop"): [0.0, 0.0, 0.0, 1.0, None],  # one errored: counted nowhere
        ("c", "nop"): [1.0, 1.0, 1.0, 1.0, 1.0],
        ("d", "nop"): [0.5, 0.0, 1.0, 0.25, 0.0],  # partial rewards solve nothing
    }
    score(job, rewards)
    entry = summary(job)[0]
    for k in (1, 3, 5):
        per_task = [reference(values, k) for values in rewards.values() if sum(v is not None for v in values) >= k]
        found_at, found_hat = entry["pass_at_k"][str(k)], entry["pass_hat_k"][str(k)]
        assert found_at["value"] == pytest.approx(sum(p for p, _ in per_task) / len(per_task))
        assert found_hat["value"] == pytest.approx(sum(h for _, h in per_task) / len(per_task))
        assert found_at["tasks"] == len(per_task) == (4 if k < 5 else 3)
        assert found_at["ci"] == statistics.bootstrap_mean([p for p, _ in per_task]).as_list()
    assert (entry["solved"], entry["succeeded"], entry["errored"]) == (10, 19, 1)
    assert entry["mean_reward"]["value"] == pytest.approx((0.6 + 0.25 + 1.0 + 1.75 / 5) / 4)


# -- comparisons ----------------------------------------------------------------------------------------------------------

TASKS = [f"t{i}" for i in range(8)]


def two_jobs(project, owner, a_rewards, b_rewards, attempts=1):
    version = task_set(project, owner, TASKS)
    a, b = (new_job(project, owner, version, attempts=attempts) for _ in range(2))
    score(a, {(t, "nop"): v for t, v in zip(TASKS, a_rewards, strict=True)})
    score(b, {(t, "nop"): v for t, v in zip(TASKS, b_rewards, strict=True)})
    return a, b


def test_two_jobs_compare_paired_by_task_with_the_evals_statistics_and_gate(project, owner):
    a, b = two_jobs(project, owner, [[1.0]] * 8, [[0.0]] * 6 + [[1.0]] * 2)
    found = compare_jobs(a, b)
    expected = paired_statistics([1.0] * 8, [0.0] * 6 + [1.0] * 2)
    assert {key: found[key] for key in expected} == expected
    assert found["test"] == "mcnemar" and found["mcnemar_p"] == pytest.approx(2 * 0.5**6)
    assert (found["verdict"], found["gate"], found["n"]) == ("worse", "fail", 8)
    assert [row["task"] for row in found["tasks"]] == TASKS[:6]
    assert compare_jobs(b, a)["gate"] == "pass"


def test_with_several_attempts_each_task_is_its_mean_reward_and_the_test_a_paired_t(project, owner):
    a, b = two_jobs(project, owner, [[1.0, 0.0]] * 8, [[1.0, 1.0]] * 4 + [[0.0, 1.0]] * 4, attempts=2)
    found = compare_jobs(a, b)
    expected = paired_statistics([0.5] * 8, [1.0] * 4 + [0.5] * 4)
    assert {key: found[key] for key in expected} == expected and found["test"] == "paired t"


def test_a_task_changed_between_the_jobs_and_flagged_trials_are_left_out_and_listed(project, owner):
    version = task_set(project, owner, ["a", "b", "c"])
    changed = {}
    for name in ("a", "b", "c"):
        changed.update(task_files(name, verifier="echo 0 > /logs/verifier/reward.txt" if name == "c" else "echo 1 > /logs/verifier/reward.txt"))
    version_2 = import_task_set(project, owner, "set", changed)[0]
    a, b = new_job(project, owner, version), new_job(project, owner, version_2)
    score(a, {("a", "nop"): [1.0], ("b", "nop"): [1.0], ("c", "nop"): [1.0]})
    score(b, {("a", "nop"): ["flag"], ("b", "nop"): [0.0], ("c", "nop"): [0.0]})
    found = compare_jobs(a, b, set_aside_flagged=True)
    flagged = b.trials.get(task__name="a").pk
    assert (found["changed_tasks"], found["unpaired_tasks"], found["set_aside_trials"], found["n"]) == (["c"], ["a"], [flagged], 1)
    assert compare_jobs(a, b)["n"] == 2


def test_a_job_of_several_contestants_needs_one_named(project, owner):
    version = task_set(project, owner, ["a"])
    a, b = new_job(project, owner, version, agents=["oracle", "nop"]), new_job(project, owner, version)
    with pytest.raises(NotComparable, match="2 contestants"):
        compare_jobs(a, b)
    with pytest.raises(NotComparable, match="no contestant 'x'"):
        compare_jobs(a, b, contestant_a="x")
    score(a, {("a", "oracle"): [1.0], ("a", "nop"): [0.0]})
    score(b, {("a", "nop"): [0.0]})
    assert compare_jobs(a, b, contestant_a="oracle")["delta"] == -1.0


# -- export ---------------------------------------------------------------------------------------------------------------


def unzip(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_the_export_is_harbors_job_layout_and_checks_terminal_bench_2s_rules(project, owner):
    version = task_set(project, owner, ["a", "b"])
    good = new_job(project, owner, version, attempts=5)
    score(good, {("a", "nop"): [1.0] * 5, ("b", "nop"): [0.0, 0.0, 1.0, 0.0, None]})
    files = unzip(export(good))
    root = f"job-{good.pk}"
    assert json.loads(files[f"{root}/config.json"])["n_attempts"] == 5
    result = json.loads(files[f"{root}/result.json"])
    assert [rule["held"] for rule in result["terminal_bench_2_rules"]] == [True, True, True] and result["submittable"]
    trials = {name.split("/")[1] for name in files if name.count("/") >= 2}
    assert len(trials) == 10 and "a__nop__1" in trials
    one = json.loads(files[f"{root}/a__nop__1/result.json"])
    assert one["verifier_result"] == {"rewards": {"reward": 1.0}} and one["task_checksum"] == version.tasks.get(name="a").digest
    errored = json.loads(files[f"{root}/b__nop__5/result.json"])
    assert errored["verifier_result"] is None and errored["exception_info"]["exception_message"] == "The verifier wrote no reward"
    assert json.loads(files[f"{root}/a__nop__1/egress.json"]) == []

    short = new_job(project, owner, version, attempts=1, deny_hosts=["answers.example"])
    score(short, {("a", "nop"): [1.0], ("b", "nop"): [1.0]})
    Trial.objects.filter(job=short, task__name="a").update(limits={"cpus": 2.0, "memory_mb": 8192, "held": ["memory_mb 65536 held to 8192"]})
    trial = short.trials.get(task__name="b")
    grant = EgressGrant.objects.create(owner_kind="trial", owner_id=str(trial.pk), token_hash="x" * 64, domains=[], max_bytes=1)
    EgressDestination.objects.create(grant=grant, host="answers.example", port=443, requests=1, last_at=timezone.now())
    rules = json.loads(unzip(export(short))[f"job-{short.pk}/result.json"])["terminal_bench_2_rules"]
    assert [rule["held"] for rule in rules] == [False, False, False]
    assert rules[0]["broken_by"] == ["a by nop: 1", "b by nop: 1"]
    assert rules[1]["broken_by"] == ["a__nop__1: memory_mb 65536 held to 8192"]
    assert rules[2]["broken_by"] == ["b__nop__1 reached answers.example"]


def queries(action) -> int:
    with CaptureQueriesContext(connection) as captured:
        action()
    return len(captured)


def test_the_export_reads_every_trials_egress_record_in_one_query(project, owner):
    version = task_set(project, owner, ["a", "b"])
    small, large = new_job(project, owner, version, attempts=1), new_job(project, owner, version, attempts=5)
    for job in (small, large):
        score(job, {("a", "nop"): [1.0] * job.attempts, ("b", "nop"): [0.0] * job.attempts})
        trial = job.trials.get(task__name="b", attempt=1)
        grant = EgressGrant.objects.create(owner_kind="trial", owner_id=str(trial.pk), token_hash=f"{job.pk:064d}", domains=[], max_bytes=1)
        EgressDestination.objects.create(grant=grant, host="models.example", port=443, requests=2, last_at=timezone.now())
    assert queries(lambda: export(small)) == queries(lambda: export(large))
    record = json.loads(unzip(export(large))[f"job-{large.pk}/b__nop__1/egress.json"])
    assert [(d["host"], d["requests"], d["refused"]) for d in record] == [("models.example", 2, "")]


# -- API, pages, admin ----------------------------------------------------------------------------------------------------


def test_the_jobs_list_page_and_api_count_every_jobs_trials_in_the_same_query(funded, owner, api, owner_client, held):
    version = task_set(funded, owner, ["a", "b"])
    new_job(funded, owner, version)
    owner_client.get("/jobs/"), api.get("/api/v1/jobs")  # a key's first use and a session's first page write once
    one = (queries(lambda: owner_client.get("/jobs/")), queries(lambda: api.get("/api/v1/jobs")))
    for _ in range(3):
        new_job(funded, owner, version, attempts=2)
    assert (queries(lambda: owner_client.get("/jobs/")), queries(lambda: api.get("/api/v1/jobs"))) == one
    listed = api.get("/api/v1/jobs").json()["results"]
    # Newest first, as ever (a query that groups drops Meta.ordering unless told again).
    assert [job["progress"]["total"] for job in listed] == [4, 4, 4, 2] and all(job["progress"]["queued"] == job["progress"]["total"] for job in listed)
    page = owner_client.get("/jobs/").content.decode()
    assert "0/4" in page and [int(pk) for pk in re.findall(r'href="/jobs/(\d+)/"', page)][:4] == [job["id"] for job in listed]


def test_the_api_starts_lists_shows_compares_cancels_and_exports_a_job(funded, owner, api, outsider_api, held):
    version = task_set(funded, owner, ["a", "b"])
    Deployment.objects.create(project=funded, name="m", base_url="https://example.com/v1", model="m")
    made = api.post("/api/v1/jobs", {"task_set": "set", "agents": ["oracle", "nop"], "attempts": 2, "budget": "1"}, format="json")
    assert made.status_code == 201, made.content
    body = made.json()
    assert (body["task_set"], body["version"], body["budget_cents"], body["progress"]["total"]) == ("set", version.number, 100, 8)
    job = Job.objects.get(pk=body["id"])
    score(job, {("a", "oracle"): [1.0, 1.0], ("b", "oracle"): [1.0, 0.0], ("a", "nop"): [0.0, 0.0], ("b", "nop"): [0.0, 0.0]})

    shown = api.get(f"/api/v1/jobs/{job.pk}").json()
    assert {entry["contestant"]: entry["pass_at_k"]["2"]["value"] for entry in shown["results"]} == {"oracle": 1.0, "nop": 0.0}
    listed = api.get("/api/v1/jobs").json()
    assert [j["id"] for j in listed["results"]] == [job.pk]
    trials = api.get(f"/api/v1/jobs/{job.pk}/trials", {"status": "succeeded"}).json()
    assert trials["count"] == 8 and {t["contestant"] for t in trials["results"]} == {"oracle", "nop"}
    one = api.get(f"/api/v1/trials/{trials['results'][0]['id']}").json()
    assert one["egress"] == [] and "agent_output" in one
    other = Job.objects.get(
        pk=api.post("/api/v1/jobs", {"task_set": version.task_set.pk, "agents": ["nop"], "attempts": 2, "budget": "1"}, format="json").json()["id"]
    )
    score(other, {("a", "nop"): [1.0, 1.0], ("b", "nop"): [0.0, 0.0]})
    compared = api.get(f"/api/v1/jobs/{job.pk}/compare/{other.pk}", {"contestant_a": "nop"}).json()
    assert (compared["n"], compared["delta"]) == (2, 0.5)
    assert api.get(f"/api/v1/jobs/{job.pk}/compare/{other.pk}").status_code == 400
    exported = api.get(f"/api/v1/jobs/{job.pk}/export")
    assert exported["Content-Type"] == "application/zip" and f"job-{job.pk}/result.json" in unzip(exported.content)
    cancelled = api.post(f"/api/v1/jobs/{other.pk}/cancel").json()
    assert (cancelled["status"], cancelled["skipped"]) == ("cancelled", 0)

    for path in (f"/api/v1/jobs/{job.pk}", f"/api/v1/jobs/{job.pk}/trials", f"/api/v1/trials/{one['id']}", f"/api/v1/jobs/{job.pk}/export"):
        assert outsider_api.get(path).status_code == 404
    assert outsider_api.post("/api/v1/jobs", {"task_set": "set", "agents": ["nop"], "budget": "1"}, format="json").status_code == 400


def test_a_trials_kept_outputs_and_graded_digest_show_on_its_page_api_and_export(funded, owner, api, outsider_api, owner_client):
    version = task_set(funded, owner, ["a"])
    job = new_job(funded, owner, version)
    trial = trials.finish(jobs.claim(job.trials.get().pk), trials.TrialResult(reward=1.0, verifier_mode="sealed", outputs=KEPT))
    assert (trial.graded_digest, trial.verifier_mode) == (KEPT.digest, "sealed")
    shown = api.get(f"/api/v1/trials/{trial.pk}").json()
    assert (shown["verifier_mode"], shown["graded_digest"]) == ("sealed", KEPT.digest)
    assert {k: shown["outputs"][k] for k in ("digest", "size", "file_count", "dropped")} == {
        "digest": KEPT.digest,
        "size": 6,
        "file_count": 1,
        "dropped": ["/app/p: a named pipe"],
    }
    download = api.get(shown["outputs"]["url"])
    assert download["Content-Type"] == "application/gzip" and Outputs.from_archive(download.content, ["/app/out.txt"]).digest == KEPT.digest
    page = owner_client.get(f"/trials/{trial.pk}/").content.decode()
    assert "<strong>Sealed</strong>" in page and KEPT.digest[:16] in page and "/app/p: a named pipe" in page
    assert owner_client.get(f"/trials/{trial.pk}/outputs.tar.gz").content == download.content
    result = json.loads(unzip(api.get(f"/api/v1/jobs/{job.pk}/export").content)[f"job-{job.pk}/{harbor_trial_name(trial)}/result.json"])
    assert (result["belvedir"]["graded_digest"], result["belvedir"]["verifier_mode"]) == (KEPT.digest, "sealed")
    assert outsider_api.get(f"/api/v1/trials/{trial.pk}/outputs").status_code == 404
    assert owner_client.get(f"/trials/{trial.pk + 1}/outputs.tar.gz").status_code == 404


KEPT = Outputs(entries={"/app/out.txt": ("file", 0o644, b"hello\n")}, dropped=["/app/p: a named pipe"])


@pytest.mark.parametrize(
    ("payload", "answer"),
    [
        ({"task_set": "missing"}, {"task_set": ["No task set 'missing' in this project."]}),
        ({"version": 9}, {"version": ["set has no version 9."]}),
        ({"deployments": ["elsewhere"]}, {"deployments": ["No deployment 'elsewhere' in this project."]}),
        ({"budget": "lots"}, {"budget": ["'lots' is not an amount in dollars."]}),
        (
            {"agents": ["oracle", "claude"]},
            {
                "detail": "No agent named claude; the agents are nop, oracle, reference, the red team's (red-team:ATTACK, the attacks being "
                "planted-tools, python-hooks, shell-hooks, environment-hooks, process-left-behind, reward-write, verifier-links, test-inputs, "
                "printed-reward), or pip:PACKAGE or npm:PACKAGE with a command.",
                "field": "agents",
            },
        ),
        ({"attempts": 1000}, {"attempts": ["Ensure this value is less than or equal to 100."]}),
    ],
)
def test_a_refused_job_answers_400_naming_what_is_wrong_and_stores_nothing(project, owner, api, payload, answer):
    task_set(project, owner, ["a"])
    response = api.post("/api/v1/jobs", {"task_set": "set", "agents": ["nop"], "budget": "1", **payload}, format="json")
    assert (response.status_code, response.json()) == (400, answer)
    assert not Job.objects.exists()


def test_the_pages_start_a_job_show_its_matrix_a_trial_and_a_comparison(funded, owner, owner_client, held, outsider_client):
    version = task_set(funded, owner, ["a", "b"])
    page = owner_client.get("/jobs/")
    assert page.status_code == 200 and b"New job" in page.content
    made = owner_client.post("/jobs/", {"version": version.pk, "agents": ["oracle", "nop"], "attempts": 2, "budget": "1", "runtime": "auto"})
    job = Job.objects.get()
    assert made.status_code == 302 and made["Location"] == job.get_absolute_url()
    score(job, {("a", "oracle"): [1.0, "flag"], ("b", "oracle"): [1.0, None], ("a", "nop"): [0.0, 0.0], ("b", "nop"): [0.0, 0.0]})
    shown = owner_client.get(job.get_absolute_url()).content.decode()
    assert "pass@2" in shown and "pass^2" in shown and "<svg" in shown and "✓⚑" in shown and 'class="trial trial-errored"' in shown
    trial = job.trials.get(task__name="a", agent="oracle", attempt=2)
    trial_page = owner_client.get(trial.get_absolute_url()).content.decode()
    assert "Flagged:" in trial_page and "The agent wrote the reward" in trial_page
    assert "<code>FROM belvedir-sandbox:bookworm</code>" in trial_page and "no build: its files go in at each trial" in trial_page
    other = new_job(funded, owner, version, attempts=2)
    score(other, {("a", "nop"): [1.0, 1.0], ("b", "nop"): [1.0, 1.0]})
    compared = owner_client.get(f"/jobs/{job.pk}/compare/", {"other": other.pk, "contestant_a": "nop"}).content.decode()
    assert "Verdict: not decisive</strong> (gate: pass) on 2 paired tasks" in compared and "<td>b</td><td>0.000</td><td>1.000</td><td>better</td>" in compared
    refused = owner_client.get(f"/jobs/{job.pk}/compare/", {"other": other.pk}, follow=True).content.decode()
    assert "2 contestants" in refused
    bad = owner_client.post("/jobs/", {"version": version.pk, "agents": ["oracle"], "attempts": 2, "budget": "0.01", "runtime": "auto"})
    assert b"covers no trial" in bad.content and Job.objects.count() == 2
    assert outsider_client.get(job.get_absolute_url()).status_code == 404 and outsider_client.get(trial.get_absolute_url()).status_code == 404


def test_staff_cancel_jobs_from_the_admin(project, owner, admin_client):
    version = task_set(project, owner, ["a"])
    job = new_job(project, owner, version)
    assert admin_client.get("/admin/agent_tasks/job/").status_code == 200
    assert admin_client.get(f"/admin/agent_tasks/job/{job.pk}/change/").status_code == 200
    admin_client.post("/admin/agent_tasks/job/", {"action": "cancel_jobs", "_selected_action": [job.pk]})
    job.refresh_from_db()
    assert job.status == "cancelled" and job.trials.get().status == "skipped"


def test_retrying_a_jobs_errors_adds_a_trial_per_errored_slot_charged_anew_and_the_numbers_count_it(funded, owner, api, held):
    version = task_set(funded, owner, ["a", "b"])
    job = new_job(funded, owner, version)
    errored = trials.finish(
        jobs.claim(job.trials.get(task__name="a").pk), trials.TrialResult(error="The platform failed; retry this trial: engine gone", platform_fault=True)
    )
    score(job, {("b", "nop"): [0.0]})
    jobs.advance(job.pk)
    job.refresh_from_db()
    assert job.status == "failed"  # 1 of its 2 trials errored, past the tenth a job may lose
    answer = api.post(f"/api/v1/jobs/{job.pk}/retry-errors").json()
    assert (answer["retried"], answer["status"]) == (1, "running")
    again = job.trials.filter(task__name="a").order_by("pk").last()
    assert again.pk != errored.pk and (again.status, again.attempt) == ("queued", 1)
    assert jobs.retry_errors(job) == 0  # the slot's newest trial is waiting, not errored
    assert jobs.claim(again.pk).status == "running"
    assert LedgerEntry.objects.filter(kind="run_charge", reference=f"trial:{again.pk}").count() == 1
    Trial.objects.filter(pk=again.pk).update(status="succeeded", reward=1.0)
    entry = summary(job)[0]
    assert (entry["solved"], entry["succeeded"], entry["errored"], entry["pass_at_k"]["1"]["value"]) == (1, 2, 1, 0.5)
    jobs.advance(job.pk)
    job.refresh_from_db()
    assert (job.status, job.status_message) == ("finished", "")  # the retried slot answered: its old error counts no more


def test_an_agent_whose_trajectory_crashes_nothing_errors_alone_and_its_slot_is_retried_a_bounded_number_of_times(funded, owner, held, owner_client, api):
    """{"steps": [{"commands": 5}]} crashed the flag check (a refunded platform fault, retried without end): read
    defensively now, and a slot that keeps erroring is tried MAX_RETRIES times again, then left."""
    version = task_set(funded, owner, ["a"])
    job = new_job(funded, owner, version)
    odd = {"steps": [{"commands": 5}, {"commands": [5, {"command": 7}], "usage": "lots"}, "x"], "model": ["m"]}
    trial = trials.finish(jobs.claim(job.trials.get().pk), trials.TrialResult(reward=0.0, trajectory=odd))
    assert (trial.status, trial.platform_fault, trial.input_tokens, trial.flagged) == ("succeeded", False, 0, False)
    assert trial.steps == [{"text": "", "usage": {}, "commands": []}, {"text": "", "usage": {}, "commands": [{"command": "", "output": ""}]}]
    assert owner_client.get(trial.get_absolute_url()).status_code == 200 and api.get(f"/api/v1/trials/{trial.pk}").status_code == 200
    Trial.objects.filter(pk=trial.pk).update(status="errored", reward=None, error="The sandbox stopped")
    for _ in range(jobs.MAX_RETRIES):
        assert jobs.retry_errors(job) == 1
        Trial.objects.filter(job=job, status="queued").update(status="errored", error="The sandbox stopped")
    assert jobs.retry_errors(job) == 0  # the slot was tried three times again: left, errored
    assert job.trials.count() == 1 + jobs.MAX_RETRIES


@pytest.mark.parametrize(
    ("agent", "commands", "says"),
    [
        ("pip:mini-swe-agent", {}, "say how to run it once installed"),
        ("pip:mini-swe-agent>=1.0", {"pip:mini-swe-agent>=1.0": "mini"}, "give pip:NAME or pip:NAME==VERSION"),
        ("pip:mini-swe-agent[full]", {"pip:mini-swe-agent[full]": "mini"}, "give pip:NAME or pip:NAME==VERSION"),
        ("pip:https://evil.example/x.whl", {"pip:https://evil.example/x.whl": "x"}, "give pip:NAME or pip:NAME==VERSION"),
        ("npm:@anthropic-ai/claude-code", {}, "say how to run it once installed"),
        ("npm:@anthropic-ai/claude-code@^2.0.0", {"npm:@anthropic-ai/claude-code@^2.0.0": "claude"}, "give npm:NAME or npm:NAME@VERSION"),
        ("npm:left-pad@latest", {"npm:left-pad@latest": "x"}, "an exact version"),
        ("npm:git+https://evil.example/x.git", {"npm:git+https://evil.example/x.git": "x"}, "give npm:NAME or npm:NAME@VERSION"),
        ("npm:Upper@1.0.0", {"npm:Upper@1.0.0": "x"}, "give npm:NAME or npm:NAME@VERSION"),
    ],
)
def test_an_agent_from_a_package_index_is_named_exactly_and_needs_its_command(project, owner, agent, commands, says):
    version = task_set(project, owner, ["a"])
    deployment = Deployment.objects.create(project=project, name="m", base_url="https://m.example/v1", model="m")
    with pytest.raises(jobs.JobError, match=re.escape(says)):
        new_job(project, owner, version, agents=[agent], deployments=[deployment], agent_commands=commands)
    assert not Job.objects.exists()


def test_a_pinned_pip_agent_is_installed_from_the_operators_index_and_run_by_its_jobs_command(project, owner, settings):
    version = task_set(project, owner, ["a"])
    deployment = Deployment.objects.create(project=project, name="m", base_url="https://m.example/v1", model="m")
    job = new_job(
        project, owner, version, agents=["pip:mini-swe-agent==1.9.0"], deployments=[deployment], agent_commands={"pip:mini-swe-agent==1.9.0": "mini --yolo"}
    )
    assert job.trials.get().contestant == "pip:mini-swe-agent==1.9.0 · m" and job.agent_commands == {"pip:mini-swe-agent==1.9.0": "mini --yolo"}
    agent = resolve("pip:mini-swe-agent==1.9.0", job.agent_commands)
    command = agent.command(job.trials.get().task)
    assert "--index-url https://pypi.org/simple mini-swe-agent==1.9.0 &&" in command and "--trusted-host" not in command and command.endswith("&& mini --yolo")
    assert agent.setup(job.trials.get().task, deployment).domains == ["m.example", "pypi.org"]
    settings.AGENT_PIP_INDEX_URL = "http://mirror.internal:3141/root/pypi/+simple"
    assert "--trusted-host mirror.internal --index-url http://mirror.internal:3141/root/pypi/+simple" in agent.command(job.trials.get().task)


def test_a_pinned_npm_agent_is_installed_from_the_operators_registry_and_run_by_its_jobs_command(project, owner, settings):
    version = task_set(project, owner, ["a"])
    deployment = Deployment.objects.create(project=project, name="m", base_url="https://m.example/v1", model="m")
    name = "npm:@openai/codex@0.63.0"
    job = new_job(project, owner, version, agents=[name], deployments=[deployment], agent_commands={name: "codex exec --full-auto"})
    assert job.trials.get().contestant == f"{name} · m"
    agent = resolve(name, job.agent_commands)
    command = agent.command(job.trials.get().task)
    assert "--registry https://registry.npmjs.org/ @openai/codex@0.63.0 &&" in command and command.endswith("&& codex exec --full-auto")
    assert agent.setup(job.trials.get().task, deployment).domains == ["m.example", "registry.npmjs.org"]


def test_the_job_form_takes_agents_from_pip_with_their_commands_and_names_a_bad_line(project, owner, owner_client, held):
    version = task_set(project, owner, ["a"])
    deployment = Deployment.objects.create(project=project, name="m", base_url="https://m.example/v1", model="m")
    form = {"version": version.pk, "deployments": [deployment.pk], "attempts": 1, "budget": "1", "runtime": "auto"}
    bad = owner_client.post("/jobs/", {**form, "extra_agents": "mini-swe-agent"})
    assert "Line 1: give pip:PACKAGE = COMMAND or npm:PACKAGE = COMMAND." in bad.content.decode() and not Job.objects.exists()
    lines = "pip:mini-swe-agent==1.9.0 = mini --yolo\nnpm:@openai/codex@0.63.0=codex exec\n"
    made = owner_client.post("/jobs/", {**form, "agents": ["nop"], "extra_agents": lines})
    job = Job.objects.get()
    assert made.status_code == 302 and job.agents == ["nop", "pip:mini-swe-agent==1.9.0", "npm:@openai/codex@0.63.0"]
    assert job.agent_commands == {"pip:mini-swe-agent==1.9.0": "mini --yolo", "npm:@openai/codex@0.63.0": "codex exec"}


def test_a_task_whose_limits_could_outlive_a_workers_task_is_refused_naming_it(project, owner, settings):
    files = task_files("long")
    files["long/task.toml"] = b'version = "1.0"\n[agent]\ntimeout_sec = 2900\n[verifier]\ntimeout_sec = 600\n[environment]\nbuild_timeout_sec = 600\n'
    version = import_task_set(project, owner, "long", files)[0]
    settings.SANDBOX_BUILD_MAX_SECONDS = 900
    with pytest.raises(jobs.JobError, match=r"long: its build, agent and verifier limits add up to 4430 s .* at most 3900 s here"):
        new_job(project, owner, version, agents=["nop"])
    assert not Job.objects.exists()
    # Held to the platform's most for builds, the same task fits.
    settings.SANDBOX_BUILD_MAX_SECONDS = 60
    assert new_job(project, owner, version, agents=["nop"]).trials.count() == 1
