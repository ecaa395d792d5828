"""The one lifecycle of paid workloads (billing/workloads.py), as a contract every registered kind passes: charged
once, ended and refunded in one transaction, the money right after a crash between any two steps once the reaper
has passed, a cancel in every state, a lost host, and two workers racing over one.

Each kind has a maker here (what a waiting and a running one of it are); a registered kind without one fails the
suite, so the next kind cannot skip the contract. No sandbox runs: the lifecycle is what is under test.
"""

import dataclasses
from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.db import DataError
from django.utils import timezone

from agent_tasks import jobs, regrades, trials
from agent_tasks.actions import import_task_set
from agent_tasks.models import Grade
from agent_tasks.outputs import Outputs
from belvedir.sandbox import egress, owners
from belvedir.sandbox.models import EgressGrant
from belvedir.sandbox.owners import Owner
from billing import workloads
from billing.actions import grant_credit
from billing.models import Account, LedgerEntry
from harnesses.actions import RUNS
from harnesses.models import Harness, Run

from .concurrency import run_concurrently
from .harness_fixtures import fund

pytestmark = pytest.mark.django_db

PRICE = 7


@dataclass
class Maker:
    """How the suite makes rows of one kind: waiting (charged or not), running (charged), and stale (its worker gone)."""

    kind: workloads.PaidKind
    # Whether its kind is given credentials (an egress grant) when it runs.
    grants = True

    def waiting(self, project, owner, *, charged: bool):
        raise NotImplementedError

    def running(self, project, owner):
        raise NotImplementedError

    def stale(self, row):
        raise NotImplementedError


class RunMaker(Maker):
    def _harness(self, project, owner):
        return Harness.objects.create(project=project, created_by=owner, name="h", repo_url="https://example.com/r.git", run_command="true")

    def waiting(self, project, owner, *, charged):
        run = Run.objects.create(project=project, harness=self._harness(project, owner), created_by=owner, price_cents=PRICE, compute_type="cpu")
        if charged:  # a run is charged as it is made (harnesses.actions.start_run)
            workloads.charge(RUNS, run, PRICE, memo="test", user=owner)
        return run

    def running(self, project, owner):
        run = self.waiting(project, owner, charged=True)
        Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, heartbeat_at=timezone.now(), launched_at=timezone.now())
        egress.issue_grant(run.owner)
        run.refresh_from_db()
        return run

    def stale(self, row):
        Run.objects.filter(pk=row.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))


class TrialMaker(Maker):
    def _job(self, project, owner):
        files = {
            "t/task.toml": b'version = "1.0"\n',
            "t/instruction.md": b"Do it.\n",
            "t/tests/test.sh": b"exit 0\n",
            "t/environment/Dockerfile": b"FROM belvedir-sandbox:bookworm\n",
        }
        version = import_task_set(project, owner, f"s{Account.objects.count()}{timezone.now().timestamp()}", files)[0]
        return jobs.create_job(project, owner, version=version, agents=["nop"], budget_cents=1000)

    def waiting(self, project, owner, *, charged):
        trial = self._job(project, owner).trials.get()
        if charged:  # claimed and charged, then put back to wait for a host (jobs.run_job_trial on NoCapacity)
            jobs.claim(trial.pk)
            trial.__class__.objects.filter(pk=trial.pk).update(status="queued", sent_at=None, started_at=None)
        trial.refresh_from_db()
        return trial

    def running(self, project, owner):
        trial = jobs.claim(self._job(project, owner).trials.get().pk)
        egress.issue_grant(Owner(trials.OWNER_KIND, trial.pk))
        return trial

    def stale(self, row):
        row.__class__.objects.filter(pk=row.pk).update(deadline_at=timezone.now() - timedelta(seconds=1))


class GradeMaker(Maker):
    def _regrade(self, project, owner):
        files = {
            "t/task.toml": b'version = "1.0"\n[verifier]\noutputs = ["/app/x"]\n',
            "t/instruction.md": b"Do it.\n",
            "t/tests/test.sh": b"exit 0\n",
            "t/environment/Dockerfile": b"FROM belvedir-sandbox:bookworm\nWORKDIR /app\n",
        }
        version = import_task_set(project, owner, f"g{timezone.now().timestamp()}", files)[0]
        job = jobs.create_job(project, owner, version=version, agents=["nop"], budget_cents=1000)
        trial = trials.finish(jobs.claim(job.trials.get().pk), trials.TrialResult(reward=1.0, outputs=Outputs(entries={"/app/x": ("file", 0o644, b"x")})))
        # The trial's own charge, given back: the balance the contract counts is the grade's alone.
        grant_credit(Account.for_project(project), trial.price_cents, "the graded trial's charge", owner)
        return regrades.start(job, version, owner)

    def waiting(self, project, owner, *, charged):
        grade = self._regrade(project, owner).grades.get()
        if charged:  # claimed and charged, then put back to wait for a host (regrades.run_grade on NoCapacity)
            regrades.claim(grade.pk)
            Grade.objects.filter(pk=grade.pk).update(status="queued", sent_at=None, started_at=None)
        grade.refresh_from_db()
        return grade

    grants = False  # its sandbox has no network and no key

    def running(self, project, owner):
        return regrades.claim(self._regrade(project, owner).grades.get().pk)

    def stale(self, row):
        Grade.objects.filter(pk=row.pk).update(deadline_at=timezone.now() - timedelta(seconds=1))


MAKERS = {"run": RunMaker(RUNS), "trial": TrialMaker(trials.TRIALS), "grade": GradeMaker(regrades.GRADES)}


@pytest.fixture(params=sorted(MAKERS))
def maker(request, settings) -> Maker:
    settings.TRIAL_PRICE_CENTS = settings.GRADE_PRICE_CENTS = PRICE
    return MAKERS[request.param]


@pytest.fixture
def funded(project):
    fund(project, 1000)
    return project


def charges(row, kind) -> list[int]:
    return list(LedgerEntry.objects.filter(reference=kind.reference(row.pk)).order_by("pk").values_list("amount_cents", flat=True))


def grant_revoked(kind, row) -> bool:
    """Whether its credentials are gone: its egress grant revoked, or, for a kind that is given none (a grade's
    sandbox has no network), true whatever happened: what it never held cannot outlive it."""
    grant = EgressGrant.objects.for_owner(Owner(kind.name, row.pk)).first()
    return grant is None or grant.revoked_at is not None


def test_every_registered_kind_is_held_to_the_contract():
    assert {kind.name for kind in workloads.registered()} == set(MAKERS)
    # Each is a sandbox owner kind through its registration: the reaper and the health check reach it.
    assert all(owners.get(name) for name in MAKERS)


def test_a_charge_is_posted_once_however_often_it_is_asked(maker, funded, owner):
    row = maker.running(funded, owner)
    workloads.charge(maker.kind, row, PRICE, memo="again")
    assert charges(row, maker.kind) == [-PRICE]
    assert Account.balance_for(funded) == 1000 - PRICE


def test_an_end_at_the_platforms_fault_revokes_and_refunds_once_in_one_transaction(maker, funded, owner):
    kind = maker.kind
    row = maker.running(funded, owner)
    assert workloads.end(kind, row, kind.errored, refund_reason="engine lost", **workloads.fault_fields(kind, "engine lost"))
    assert not workloads.end(kind, row, kind.errored, refund_reason="engine lost again")  # ended already: nothing
    assert charges(row, kind) == [-PRICE, PRICE] and Account.balance_for(funded) == 1000
    assert (row.status, grant_revoked(kind, row)) == (kind.errored, True)


def test_an_end_that_is_the_workloads_own_failure_keeps_its_charge(maker, funded, owner):
    kind = maker.kind
    row = maker.running(funded, owner)
    assert workloads.end(kind, row, kind.errored, **{kind.message_field: "out of memory"})
    assert charges(row, kind) == [-PRICE] and grant_revoked(kind, row)


@pytest.mark.parametrize("step", ["revoking its credentials", "giving its charge back"])
def test_a_crash_inside_its_end_leaves_it_running_and_the_reaper_settles_it(maker, funded, owner, monkeypatch, step):
    kind = maker.kind
    row = maker.running(funded, owner)

    def crash(*args):
        raise ConnectionError(f"the worker died {step}")

    crashing = kind
    if step == "revoking its credentials":
        crashing = dataclasses.replace(kind, revoke=crash)
    else:
        monkeypatch.setattr(workloads, "refund_charge", crash)
    with pytest.raises(ConnectionError):
        workloads.end(crashing, row, kind.errored, refund_reason="engine lost", **workloads.fault_fields(kind, "engine lost"))
    row.refresh_from_db()
    assert row.status in kind.running and row.finished_at is None and (not grant_revoked(kind, row) or not maker.grants)
    assert charges(row, kind) == [-PRICE]
    monkeypatch.undo()
    maker.stale(row)
    assert workloads.reap(kind) == 1
    row.refresh_from_db()
    assert row.status == kind.errored and grant_revoked(kind, row)
    assert charges(row, kind) == [-PRICE, PRICE] and Account.balance_for(funded) == 1000


def test_one_ended_at_the_platforms_fault_without_its_refund_is_refunded_by_the_reaper_once(maker, funded, owner):
    """What a crash between two commits (the code before this lifecycle) left: ended, charged, unrefunded."""
    kind = maker.kind
    row = maker.running(funded, owner)
    kind.rows().filter(pk=row.pk).update(status=kind.errored, finished_at=timezone.now(), **workloads.fault_fields(kind, "engine lost"))
    assert workloads.reap(kind) == 1
    assert workloads.reap(kind) == 0
    assert charges(row, kind) == [-PRICE, PRICE] and Account.balance_for(funded) == 1000


def test_bookkeeping_that_fails_ends_it_errored_at_once_and_refunded(maker, funded, owner):
    kind = maker.kind
    row = maker.running(funded, owner)
    # A value PostgreSQL refuses (a NUL in text): the end is stored without it, errored, never left running.
    assert workloads.end(kind, row, kind.errored, **{kind.message_field: "bad\x00text"})
    assert row.status == kind.errored and "could not store" in getattr(row, kind.message_field)
    assert charges(row, kind) == [-PRICE, PRICE] and grant_revoked(kind, row)


def test_bookkeeping_that_fails_really_raises_without_the_fallback(maker, funded, owner):
    """The fault the previous test relies on is real: the field alone cannot be stored."""
    row = maker.running(funded, owner)
    with pytest.raises(DataError):
        maker.kind.rows().filter(pk=row.pk).update(**{maker.kind.message_field: "bad\x00text"})


def test_a_cancel_before_it_started_gives_its_charge_back_and_one_uncharged_costs_nothing(maker, funded, owner):
    kind = maker.kind
    charged = maker.waiting(funded, owner, charged=True)
    assert workloads.cancel(kind, charged, "cancelled by a user")
    assert (charged.status, charges(charged, kind)) == (kind.cancelled, [-PRICE, PRICE])
    assert not workloads.cancel(kind, charged, "again")
    if kind.name == "trial":  # a run is charged as it is made: it is never waiting uncharged
        uncharged = maker.waiting(funded, owner, charged=False)
        assert workloads.cancel(kind, uncharged, "cancelled by a user")
        assert (uncharged.status, charges(uncharged, kind)) == (kind.cancelled, [])
    assert Account.balance_for(funded) == 1000


def test_a_cancel_while_it_runs_is_charged_or_lets_it_finish_as_its_kind_says(maker, funded, owner):
    kind = maker.kind
    row = maker.running(funded, owner)
    assert workloads.cancel(kind, row, "cancelled by a user") == kind.cancel_stops
    row.refresh_from_db()
    assert row.status == (kind.cancelled if kind.cancel_stops else kind.running[0])
    assert charges(row, kind) == [-PRICE] and grant_revoked(kind, row) == (kind.cancel_stops or not maker.grants)


def test_a_cancel_after_it_ended_changes_nothing(maker, funded, owner):
    kind = maker.kind
    row = maker.running(funded, owner)
    workloads.end(kind, row, kind.errored, refund_reason="engine lost", **workloads.fault_fields(kind, "engine lost"))
    assert not workloads.cancel(kind, row, "too late")
    assert row.status == kind.errored and charges(row, kind) == [-PRICE, PRICE]


def test_a_lost_host_ends_what_ran_there_errored_and_refunded(maker, funded, owner):
    kind = maker.kind
    lost, waiting = maker.running(funded, owner), maker.waiting(funded, owner, charged=True)
    assert owners.get(kind.name).host_lost([str(lost.pk), str(waiting.pk), "x"], None) == 1
    lost.refresh_from_db()
    waiting.refresh_from_db()
    assert lost.status == kind.errored and charges(lost, kind) == [-PRICE, PRICE] and grant_revoked(kind, lost)
    assert waiting.status in kind.waiting  # not running on the host: untouched


@pytest.mark.django_db(transaction=True)
def test_two_workers_ending_one_workload_at_once_refund_it_once(maker, funded, owner):
    kind = maker.kind
    row = maker.running(funded, owner)
    maker.stale(row)

    def race(i):
        if i % 2:
            return workloads.reap(kind)
        return int(workloads.end(kind, kind.rows().get(pk=row.pk), kind.errored, refund_reason="engine lost", **workloads.fault_fields(kind, "engine lost")))

    assert sum(run_concurrently(race, 6)) == 1
    assert charges(row, kind) == [-PRICE, PRICE] and Account.balance_for(funded) == 1000
