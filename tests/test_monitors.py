"""Monitors: a suite on a cron schedule against a deployment, each run judged paired against its baseline at the
false-alarm rate the team chose, and the alerts a regression opens (deduplicated, signed, emailed, resolved)."""

import hashlib
import hmac
import json
import threading
import time
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
import time_machine
from django.core import mail
from django.db import connection
from django.utils import timezone

from belvedir.core.actions import create_account
from belvedir.core.models import Membership
from billing.actions import post_entry
from billing.models import Account, LedgerEntry
from evals.benchmarks import gsm8k
from evals.models import Deployment, Eval, SuiteRun
from evals.suites.actions import save_suite
from monitors import actions, cusum, deliveries, live, runs, schedule, sensitivity, simulation, verdicts
from monitors.actions import create_monitor, webhook_secret
from monitors.models import Alert, Delivery, Monitor, MonitorRun
from traces.models import Evaluator, EvaluatorScore, TraceSession

from .fakes.openai_server import FakeOpenAI
from .harness_fixtures import wait_for
from .test_cli import bv  # noqa: F401  (the fixture: bv against a live server)

GSM8K = {row.input: row.reference for row in gsm8k.rows()}
NIGHT = datetime(2026, 12, 1, 3, 0, 30, tzinfo=UTC)
NIGHTLY_ALPHA = 0.3 / (365 / 12)  # the default 0.3 false alarms a month over a nightly schedule's runs


class Receiver:
    """A webhook endpoint on loopback that keeps what it was sent; `status` and `delay` say how it answers."""

    def __init__(self, status: int = 200, delay: float = 0.0):
        self.status, self.delay, self.received = status, delay, []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.received.append({"headers": dict(self.headers), "body": body, "at": time.time()})
                time.sleep(receiver.delay)
                self.send_response(receiver.status)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    found = Receiver()
    yield found
    found.close()


def verified(secret: str, message: dict) -> dict:
    """The body, once its signature checks out the way a receiver checks it."""
    parts = dict(part.split("=", 1) for part in message["headers"]["Belvedir-Signature"].split(","))
    stamp, mac = parts["t"], parts["v1"]
    expected = hmac.new(secret.encode(), f"{stamp}.".encode() + message["body"], hashlib.sha256).hexdigest()
    assert hmac.compare_digest(mac, expected) and abs(message["at"] - int(stamp)) < 300
    return json.loads(message["body"])


# -- the schedule -----------------------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_nightly_schedule_runs_once_a_night_once_after_three_missed_and_never_twice_under_two_workers(project, owner):
    deployment = Deployment.objects.create(project=project, name="d", base_url="https://api.example.com/v1", model="m")
    with time_machine.travel(NIGHT - timedelta(hours=12), tick=False):
        monitor = create_monitor(project, owner, {"name": "nightly", "suite": "quick", "deployment": "d", "cron": "0 3 * * *"})
    assert monitor.next_run_at == NIGHT.replace(second=0) and monitor.deployment == deployment

    def due_times():
        return sorted(MonitorRun.objects.filter(monitor=monitor).values_list("due_at", flat=True))

    assert runs.claim_due(NIGHT - timedelta(minutes=5)) == []
    assert len(runs.claim_due(NIGHT)) == 1 and runs.claim_due(NIGHT + timedelta(minutes=30)) == []
    assert len(runs.claim_due(NIGHT + timedelta(days=1))) == 1
    # The worker was down for three nights: one run when it returns, for the earliest time it missed.
    back = NIGHT + timedelta(days=4, hours=2)
    claimed = runs.claim_due(back)
    assert [r.due_at for r in claimed] == [NIGHT.replace(second=0) + timedelta(days=2)]
    monitor.refresh_from_db()
    assert monitor.next_run_at == NIGHT.replace(second=0) + timedelta(days=5)

    # Two workers tick at once, each on its own connection: the night's run is made once.
    barrier, found = threading.Barrier(2), []

    def worker():
        barrier.wait()
        try:
            found.append(len(runs.claim_due(NIGHT + timedelta(days=5))))
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(found) == [0, 1]
    assert len(due_times()) == 4 and len(set(due_times())) == 4


@pytest.mark.django_db
def test_cron_expressions_are_checked():
    assert schedule.check(" 0  3 * * * ") == "0 3 * * *"
    assert schedule.runs_per_month("0 3 * * *") == pytest.approx(365 / 12) and schedule.runs_per_month("0 * * * *") == pytest.approx(365 * 24 / 12)
    # Counted over a year: a schedule of some months only is not judged by January's (it would be 0 runs there).
    assert schedule.runs_per_month("0 3 * 3-12 *") == pytest.approx((365 - 31 - 28) / 12)
    for bad, says in [
        ("* * * * * *", "6 fields"),
        ("0 0 31 2 *", "never runs"),
        ("61 * * * *", "not a cron expression"),
        ("", "1 to 100 characters"),
        ("x" * 101, "1 to 100 characters"),
    ]:
        with pytest.raises(schedule.CronError, match=says):
            schedule.check(bad)


@pytest.mark.django_db
def test_bad_monitors_are_refused_naming_the_field(api, project, owner, outsider_api, settings):
    settings.EVAL_ALLOW_PRIVATE_URLS = False
    Deployment.objects.create(project=project, name="d", base_url="https://api.example.com/v1", model="m")
    good = {"name": "n", "suite": "quick", "deployment": "d", "cron": "0 3 * * *"}
    for change, field, says in [
        ({"cron": "* * * * * *"}, "cron", "at most once a minute"),
        ({"cron": "0 0 30 2 *"}, "cron", "never runs"),
        ({"suite": "nope"}, "suite", "No suite named 'nope'"),
        ({"deployment": "other"}, "deployment", "no deployment 'other'"),
        ({"webhook_url": "http://10.0.0.5/hook"}, "webhook_url", "private"),
        ({"min_drop": 2}, "min_drop", "between"),
        ({"false_alarms_per_month": 0}, "false_alarms_per_month", "between"),
        ({"baseline": 999999}, "baseline", "no suite run #999999"),
    ]:
        response = api.post("/api/v1/monitors", {**good, **change}, format="json")
        assert response.status_code == 400 and response.json()["field"] == field and says in response.json()["detail"], (change, response.json())
    assert not Monitor.objects.exists()
    created = api.post("/api/v1/monitors", good, format="json")
    assert created.status_code == 201 and "webhook_secret" not in created.json() and created.json()["alpha"] == pytest.approx(NIGHTLY_ALPHA)
    assert api.post("/api/v1/monitors", good, format="json").json()["field"] == "name"
    pk = created.json()["id"]
    patched = api.patch(f"/api/v1/monitors/{pk}", {"webhook_url": "https://93.184.215.14/hook", "min_drop": 0.05}, format="json")
    assert patched.status_code == 200 and patched.json()["webhook_secret"].startswith("whsec_") and patched.json()["min_drop"] == 0.05
    assert api.patch(f"/api/v1/monitors/{pk}", {"cron": "0 0 31 2 *"}, format="json").json()["field"] == "cron"
    assert Monitor.objects.get().cron == "0 3 * * *"
    assert outsider_api.get(f"/api/v1/monitors/{pk}").status_code == 404 and outsider_api.post(f"/api/v1/monitors/{pk}/run").status_code == 404


# -- verdicts and their rates -------------------------------------------------------------------------------------------


def row(n: int, worse: int, better: int, right_both: int) -> dict:
    a = [1.0] * (right_both + worse) + [0.0] * better + [0.0] * (n - right_both - worse - better)
    b = [1.0] * right_both + [0.0] * worse + [1.0] * better + [0.0] * (n - right_both - worse - better)
    return simulation.compared(a, b)


def test_a_run_with_too_few_rows_is_inconclusive_and_says_how_many_would_decide():
    # 100 rows with 10 flipping each way: no change, but 100 rows cannot rule out a 3-point drop at 0.01.
    found = verdicts.decide([row(100, 10, 10, 60)], 0.01, 0.03)
    assert found.verdict == verdicts.INCONCLUSIVE
    needed = found.benchmarks[0]["rows_needed"]
    sd = (20 / 100) ** 0.5
    assert needed == sensitivity.rows_needed(0.03, sd, 0.01) and needed > 100 and f"about {needed:,} would catch 3.0 points" in found.reason
    # The same flip rate over that many rows: passed.
    assert verdicts.decide([row(needed, needed // 10, needed // 10, needed // 2)], 0.01, 0.03).verdict == verdicts.PASSED
    # 400 rows that all answered as before measure a quiet deployment (the rule of three), not a coin.
    assert verdicts.decide([row(400, 0, 0, 300)], 0.01, 0.03).verdict == verdicts.PASSED
    assert verdicts.decide([row(400, 12, 0, 288)], 0.01, 0.03).verdict == verdicts.REGRESSED
    # Twelve flips are significant at 0.05 and 0.01, eight are not at 0.001: the monitor's alpha decides, not 0.05.
    assert verdicts.decide([row(400, 8, 0, 292)], 0.05, 0.03).verdict == verdicts.REGRESSED
    assert verdicts.decide([row(400, 8, 0, 292)], 0.001, 0.03).verdict != verdicts.REGRESSED


def test_an_unchanged_sampled_deployment_false_alarms_at_no_more_than_the_stated_rate_and_a_drop_is_caught():
    # The stated rate: 0.01 a run. 600 deployments, each its own baseline and one run, so the runs are independent:
    # Binomial(600, 0.01) exceeds 14 with probability below 0.1 %.
    at_alpha, min_drop = 0.01, 0.05
    rows = sensitivity.rows_needed(min_drop, 0.5, at_alpha)
    unchanged = [simulation.monitor(1, rows, at_alpha, min_drop, seed=7000 + s).verdicts[0] for s in range(600)]
    assert unchanged.count(verdicts.REGRESSED) <= 14
    # One deployment for 50 nights against one baseline at 0.001 a run: 0.05 alarms expected, two or more at most
    # 2.5 % of the time (Markov's inequality: the runs share a baseline, so the binomial does not apply).
    quiet = simulation.monitor(50, sensitivity.rows_needed(min_drop, 0.5, 0.001), 0.001, min_drop, seed=8)
    assert quiet.verdicts.count(verdicts.REGRESSED) <= 1
    # A drop of min_drop: rows sized for 80 % power catch it on the first run after it, for most baselines. Twenty
    # deployments (seeds), each its own baseline: Binomial(20, 0.8) below 11 has probability 0.3 %.
    caught = [simulation.monitor(3, rows, at_alpha, min_drop, drop=min_drop, drop_from=2, seed=100 + s).verdicts[2] for s in range(20)]
    assert caught.count(verdicts.REGRESSED) >= 11


# -- a monitor from first night to recovery -------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("loopback_deployments")
def test_a_three_point_drop_regresses_once_alerts_once_signed_and_emailed_and_resolves_on_recovery(api, worker, project, owner, receiver):
    dropped: set[str] = set()

    def reply(text: str) -> str:
        return "#### -1" if text in dropped else f"So\n#### {GSM8K.get(text, '0')}"

    # Alice proved her address (the fixture's account is verified); Bob only typed his: he is not mailed a project's alerts.
    Membership.objects.create(project=project, user=create_account(username="bob", password=None, email="bob@example.com", verified=False))
    with FakeOpenAI(answer=reply) as server:
        Deployment.objects.create(project=project, name="prod", base_url=server.url, model="prod", max_in_flight=50)
        save_suite(project, owner, "nightly", [{"benchmark": "gsm8k", "sample_limit": 400}])
        with time_machine.travel(NIGHT - timedelta(hours=1), tick=False):
            created = api.post(
                "/api/v1/monitors",
                {"name": "prod nightly", "suite": "nightly", "deployment": "prod", "cron": "0 3 * * *", "webhook_url": receiver.url},
                format="json",
            )
        assert created.status_code == 201, created.content
        secret, monitor = created.json()["webhook_secret"], Monitor.objects.get()
        assert secret == webhook_secret(monitor) and created.json()["alpha"] == pytest.approx(NIGHTLY_ALPHA)

        def night(n: int) -> MonitorRun:
            with time_machine.travel(NIGHT + timedelta(days=n), tick=True):
                assert runs.tick()["started"] == 1
                wait_for(lambda: not Eval.objects.filter(status__in=Eval.ACTIVE).exists(), timeout=120)
                runs.tick()
                deliveries.deliver_due()
            return monitor.runs.first()

        assert night(0).verdict == "baseline"
        assert [night(1).verdict, night(2).verdict] == ["passed", "passed"]
        # The fourth night the deployment gets 12 of its 400 rows wrong: three points.
        inputs = list(Eval.objects.get(suite_run=monitor.runs.first().suite_run).samples.values_list("input", flat=True))
        dropped.update(sorted(inputs)[:12])
        fourth = night(3)
        assert fourth.verdict == "regressed" and fourth.benchmarks[0]["delta"] == pytest.approx(-0.03)
        # Against the first night's run, pinned as the baseline when it succeeded.
        first = monitor.runs.get(due_at=NIGHT.replace(second=0)).suite_run
        monitor.refresh_from_db()
        assert fourth.baseline == monitor.baseline == first
        assert "gsm8k −3.0 points" in fourth.reason
        alert = Alert.objects.get()
        assert (alert.kind, alert.state, alert.repeats) == ("regressed", "open", 0)
        [message] = receiver.received
        body = verified(secret, message)
        assert body["event"] == "opened" and body["alert"]["id"] == alert.pk and "gsm8k −3.0 points" in body["text"]
        [email] = mail.outbox
        assert email.to == ["alice@example.com"] and "regressed on prod" in email.subject

        # The fifth night finds the same: the open alert counts it, nothing is sent again.
        assert night(4).verdict == "regressed"
        alert.refresh_from_db()
        assert alert.repeats == 1 and len(receiver.received) == 1 and len(mail.outbox) == 1 and Alert.objects.count() == 1

        # Fixed: the sixth night passes against the baseline, and the alert resolves, once.
        dropped.clear()
        assert night(5).verdict == "passed"
        alert.refresh_from_db()
        assert alert.state == "resolved" and len(receiver.received) == 2 and verified(secret, receiver.received[1])["event"] == "resolved"
        assert len(mail.outbox) == 2 and mail.outbox[1].subject.startswith("Resolved: ")
    assert not Delivery.objects.exclude(state="sent").exists()


@pytest.mark.django_db(transaction=True)
def test_a_schedule_over_its_monthly_budget_is_skipped_with_an_alert(project, owner):
    Deployment.objects.create(project=project, name="d", base_url="https://api.example.com/v1", model="m", input_price_per_million=1)
    with time_machine.travel(NIGHT - timedelta(hours=1), tick=False):
        monitor = create_monitor(project, owner, {"name": "n", "suite": "quick", "deployment": "d", "cron": "0 3 * * *", "monthly_budget": "0"})
    with time_machine.travel(NIGHT, tick=False):
        runs.tick()
    run = monitor.runs.get()
    assert run.verdict == "skipped" and "monthly budget" in run.reason and run.suite_run is None
    alert = Alert.objects.get()
    assert alert.kind == "skipped" and Delivery.objects.filter(alert=alert, channel="email").count() == 1
    # The next night the project owes a disputed dollar: skipped again, named, the open alert repeated.
    actions.update_monitor(monitor, {"monthly_budget": None})
    post_entry(Account.for_project(project), kind=LedgerEntry.Kind.DISPUTE, amount_cents=-100, reference="txn_debt", memo="disputed")
    with time_machine.travel(NIGHT + timedelta(days=1), tick=False):
        runs.tick()
    night = monitor.runs.first()
    assert night.verdict == "skipped" and "in debt" in night.reason and not SuiteRun.objects.exists()
    alert.refresh_from_db()
    assert alert.repeats == 1 and Delivery.objects.count() == 1


# -- deliveries ---------------------------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("loopback_deployments")
def test_a_webhook_that_hangs_or_fails_is_retried_with_backoff_then_failing_and_holds_up_no_other(project, owner, monkeypatch):
    monkeypatch.setattr(deliveries, "TIMEOUT_SECONDS", 0.5)
    Deployment.objects.create(project=project, name="d", base_url="https://api.example.com/v1", model="m")
    hanging, failing, fine = Receiver(delay=3), Receiver(status=500), Receiver()
    try:
        for receiver in (hanging, failing, fine):
            monitor = create_monitor(
                project,
                owner,
                {"name": receiver.url, "suite": "quick", "deployment": "d", "cron": "0 3 * * *", "webhook_url": receiver.url, "email_members": False},
            )
            Alert.objects.create(project=project, monitor=monitor, kind="regressed", title="t", message="m").deliveries.create(channel="webhook")
        now = timezone.now()
        started = time.monotonic()
        assert deliveries.deliver_due(now) == {"sent": 1, "failed": 2}
        assert time.monotonic() - started < 2.5  # side by side: the hanging one's wait is not added to the others'
        state = {d.alert.monitor.webhook_url: d for d in Delivery.objects.select_related("alert__monitor")}
        assert state[fine.url].state == "sent"
        assert "did not answer within" in state[hanging.url].last_error and "HTTP 500" in state[failing.url].last_error
        assert state[failing.url].next_attempt_at == now + timedelta(seconds=30)
        # Each later attempt waits twice as long; the sixth failure marks it failing.
        for _ in range(2, deliveries.MAX_ATTEMPTS + 1):
            now = Delivery.objects.get(pk=state[failing.url].pk).next_attempt_at
            deliveries.deliver_due(now)
        found = Delivery.objects.get(pk=state[failing.url].pk)
        assert (found.state, found.attempts) == ("failing", deliveries.MAX_ATTEMPTS) and len(failing.received) == deliveries.MAX_ATTEMPTS
        assert len(fine.received) == 1
    finally:
        for receiver in (hanging, failing, fine):
            receiver.close()


# -- the surfaces: page, CLI ------------------------------------------------------------------------------------------


def decided_monitor(project, owner) -> Monitor:
    """A monitor with a baseline, a passed run and a regressed one (its alert open), as ticks leave them."""
    deployment = Deployment.objects.create(project=project, name="prod", base_url="https://api.example.com/v1", model="m")
    monitor = create_monitor(project, owner, {"name": "prod nightly", "suite": "quick", "deployment": deployment, "cron": "0 3 * * *"})
    for day, (verdict, delta) in enumerate([("baseline", None), ("passed", 0.004), ("regressed", -0.031)]):
        entry = [] if delta is None else [{"benchmark": "gsm8k", "n": 400, "delta": delta, "delta_ci": [delta - 0.015, delta + 0.015], "p_adjusted": 0.002}]
        run = MonitorRun.objects.create(monitor=monitor, due_at=NIGHT + timedelta(days=day), verdict=verdict, reason=f"{verdict} night", benchmarks=entry)
    Alert.objects.create(project=project, monitor=monitor, kind="regressed", title="prod nightly: regressed on prod", message="Worse on gsm8k.", first_run=run)
    return monitor


@pytest.mark.django_db
def test_the_monitor_page_draws_its_history_with_intervals_and_its_alert_is_acknowledged_there(owner_client, project, owner):
    monitor = decided_monitor(project, owner)
    listed = owner_client.get("/monitors/").content.decode()
    assert "prod nightly: regressed on prod" in listed and 'verdict-regressed">regressed' in listed
    page = owner_client.get(f"/monitors/{monitor.pk}/").content.decode()
    # Two decided runs on the chart (the baseline has no delta), each with its interval; 0 is the baseline.
    assert page.count("<title>") >= 2 and "delta vs baseline (points)" in page and "95 % interval" in page
    assert f"tested at a false-alarm rate of <strong>{NIGHTLY_ALPHA:.2g}</strong>" in page and "regressed night" in page
    # What the rows that catch min_drop would cost, at the last run's cost a row: 400 rows for $0.40, 3,000 needed.
    last = monitor.runs.first()
    last.suite_run = SuiteRun.objects.create(project=project, suite_name="quick", entries=[])
    Eval.objects.create(project=project, deployment=monitor.deployment, suite_run=last.suite_run, benchmark="gsm8k", seed=1, done_count=400, cost="0.40")
    last.benchmarks = [{**last.benchmarks[0], "rows_needed": 3000, "detectable_drop": 0.05}]
    last.save()
    page = owner_client.get(f"/monitors/{monitor.pk}/").content.decode()
    assert "<td>3,000</td><td>$3.00</td>" in page and "<td>5.0 points</td>" in page
    alert = Alert.objects.get()
    response = owner_client.post(f"/alerts/{alert.pk}/ack/", {"next": "list"})
    assert response.status_code == 302 and response["Location"] == "/monitors/"
    alert.refresh_from_db()
    assert alert.state == "acknowledged" and alert.acknowledged_by == owner
    created = owner_client.post(
        "/monitors/",
        {
            "suite_monitor": "1",
            "name": "every minute",
            "suite": "quick",
            "deployment": monitor.deployment_id,
            "cron": "* * * * * *",
            "min_drop": 3,
            "false_alarms_per_month": 0.3,
        },
    )
    assert created.status_code == 400 and "at most once a minute" in created.content.decode() and Monitor.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_bv_lists_shows_and_acknowledges(bv, project, owner):
    monitor = decided_monitor(project, owner)
    listed = bv("monitors", "list")
    assert listed.exit_code == 0 and "regressed" in listed.output
    assert [(m["name"], m["last_verdict"], m["open_alerts"]) for m in json.loads(bv("monitors", "list", "--json").stdout)] == [("prod nightly", "regressed", 1)]
    shown = json.loads(bv("monitors", "show", "prod nightly", "--json").stdout)
    assert shown["id"] == monitor.pk and [r["verdict"] for r in shown["runs"]] == ["regressed", "passed", "baseline"]
    alerts = json.loads(bv("monitors", "alerts", "--json").stdout)
    assert [a["kind"] for a in alerts] == ["regressed"]
    assert bv("monitors", "ack", str(alerts[0]["id"])).exit_code == 0 and Alert.objects.get().state == "acknowledged"
    refused = bv("monitors", "run", "nope")
    assert refused.exit_code != 0 and "No monitor named 'nope'" in refused.output


# -- live monitors ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("p0", [0.8, 0.95, 0.99])
def test_the_cusum_threshold_keeps_the_false_alarm_rate_it_states_against_simulation(p0):
    # Plain simulation of the detector, not its Markov chain: 1,000 run lengths under p0 have a standard error of
    # about 3 % of their mean, so a mean below 0.85 x the target would be a rate over the stated one, not chance.
    # 0.99 falling to 0.985: steps of 0.005 and 0.41, where a grid of fixed size rounds the small one away.
    target, p1 = 2000, p0 - (0.005 if p0 == 0.99 else 0.03)
    h = cusum.threshold(p0, p1, target)
    quiet = cusum.simulate_run_length(h, p0, p1, p0, np.random.default_rng(11), chains=1000)
    assert quiet.mean() >= 0.85 * target
    dropped = cusum.simulate_run_length(h, p0, p1, p1, np.random.default_rng(12), chains=1000)
    assert dropped.mean() < target / 3  # and it does fire when the rate falls


def add_scores(evaluator, pattern: str, when, session_at=None) -> None:
    """Scores stored at `when`, in this order: "1" a pass, "0" a fail (what the evaluator pipeline stores)."""
    project = evaluator.project
    start = TraceSession.objects.count()
    sessions = TraceSession.objects.bulk_create(
        TraceSession(project=project, session_id=f"s{start + i}", first_span_at=when, last_span_at=when) for i in range(len(pattern))
    )
    EvaluatorScore.objects.bulk_create(
        EvaluatorScore(
            evaluator=evaluator, version=1, project=project, session=session, status="scored", value=float(mark), session_at=session_at or when, scored_at=when
        )
        for session, mark in zip(sessions, pattern, strict=True)
    )


def live_monitor(project, owner) -> Monitor:
    """A live monitor past its warm-up, two days of traffic charted."""
    evaluator = Evaluator.objects.create(project=project, name="grounded", scorer={"name": "contains", "options": {"expected": "x"}})
    monitor = create_monitor(project, owner, {"kind": "live", "name": "grounded live", "evaluator": evaluator, "floor": 0.5})
    now = timezone.now() + timedelta(seconds=1)
    add_scores(evaluator, "11110" * 40, now, session_at=now - timedelta(days=1))
    add_scores(evaluator, "11100" * 20, now)
    live.check(monitor.pk, now + timedelta(minutes=1))
    return monitor


@pytest.mark.django_db
def test_a_live_pass_rate_that_falls_alerts_once_with_its_floor_and_resolves_when_it_recovers(api, owner_client, project, owner):
    evaluator = Evaluator.objects.create(project=project, name="grounded", scorer={"name": "contains", "options": {"expected": "x"}})
    for payload, field in [
        ({"kind": "live", "name": "l"}, "evaluator"),
        ({"kind": "live", "name": "l", "evaluator": "grounded", "cron": "0 3 * * *"}, "cron"),
        ({"kind": "live", "name": "l", "evaluator": "grounded", "reference_rate": 1.5}, "reference_rate"),
        ({"name": "s", "suite": "quick", "deployment": "x", "cron": "0 3 * * *", "evaluator": "grounded"}, "evaluator"),
        ({"kind": "live", "name": "l", "metric": "tokens"}, "ceiling"),
        ({"kind": "live", "name": "l", "metric": "tokens", "ceiling": 5000, "evaluator": "grounded"}, "evaluator"),
        ({"kind": "live", "name": "l", "metric": "success_rate", "ceiling": 5}, "ceiling"),
    ]:
        refused = api.post("/api/v1/monitors", payload, format="json")
        assert refused.status_code == 400 and refused.json()["field"] == field, refused.json()
    created = api.post("/api/v1/monitors", {"kind": "live", "name": "grounded live", "evaluator": "grounded", "min_drop": 0.05, "floor": 0.7}, format="json")
    assert created.status_code == 201, created.content
    monitor = Monitor.objects.get()
    # What was scored before the monitor existed is not its evidence: it starts from now.
    start = timezone.now()
    add_scores(evaluator, "0" * 300, start - timedelta(days=2))

    def tick(at):
        with time_machine.travel(at, tick=False):
            return runs.tick()

    day0 = start + timedelta(minutes=1)
    add_scores(evaluator, "11110" * 40, day0)  # 200 scores at 80 %: the reference is learned from them
    tick(day0 + timedelta(minutes=1))
    monitor.refresh_from_db()
    assert monitor.reference_rate == pytest.approx(0.8) and monitor.cusum == 0 and monitor.cusum_h > 0
    add_scores(evaluator, "11110" * 200, day0 + timedelta(minutes=2))  # a thousand more at the reference: no alert
    tick(day0 + timedelta(minutes=3))
    monitor.refresh_from_db()
    assert monitor.cusum < monitor.cusum_h and not Alert.objects.exists()

    day2 = day0 + timedelta(days=2)
    add_scores(evaluator, "11100" * 40, day2)  # 60 % two days later
    tick(day2 + timedelta(minutes=1))
    monitor.refresh_from_db()
    assert monitor.cusum > monitor.cusum_h
    assert sorted(Alert.objects.values_list("kind", flat=True)) == ["limit", "regressed"]
    fell = Alert.objects.get(kind="regressed")
    assert "reference 80.0%" in fell.message and "the last 24 hours passed 60.0% of 200 (95 % interval" in fell.message
    # More of the same, and minutes with nothing new: the open alerts stay as they are, nothing is sent again.
    add_scores(evaluator, "11100" * 10, day2 + timedelta(minutes=2))
    for minute in (3, 4, 5):
        tick(day2 + timedelta(minutes=minute))
    assert Alert.objects.count() == 2 and set(Alert.objects.values_list("repeats", flat=True)) == {0}
    assert Delivery.objects.filter(event="opened").count() == 2  # one email each

    add_scores(evaluator, "1" * 400, day2 + timedelta(minutes=6))  # fixed: the evidence is cancelled, the day's rate over the floor
    tick(day2 + timedelta(minutes=7))
    monitor.refresh_from_db()
    assert monitor.cusum == 0 and not Alert.objects.open().exists()
    body = api.get(f"/api/v1/monitors/{monitor.pk}").json()
    assert body["kind"] == "live" and body["evaluator"] == "grounded" and body["cusum_h"] == pytest.approx(monitor.cusum_h)
    page = owner_client.get(f"/monitors/{monitor.pk}/").content.decode()
    assert "Reference rate <strong>80.0%</strong>" in page and "at 2,150 a month" in page and "no evidence of a drop" in page
    assert page.count("<title>") >= 3  # the days' rates on the chart, each with its interval
    assert api.post(f"/api/v1/monitors/{monitor.pk}/run").json()["field"] == "monitor"  # live traffic has no runs to start


@pytest.mark.django_db(transaction=True)
def test_a_run_due_while_the_project_is_at_its_limit_of_active_evals_is_skipped_saying_so(project, owner, settings):
    settings.PROJECT_MAX_ACTIVE_EVALS = 1
    deployment = Deployment.objects.create(project=project, name="d", base_url="https://api.example.com/v1", model="m")
    Eval.objects.create(project=project, deployment=deployment, benchmark="gsm8k", seed=1, status="running")
    with time_machine.travel(NIGHT - timedelta(hours=1), tick=False):
        monitor = create_monitor(project, owner, {"name": "n", "suite": "quick", "deployment": "d", "cron": "0 3 * * *"})
    with time_machine.travel(NIGHT, tick=False):
        runs.tick()
    run = monitor.runs.get()
    assert run.verdict == "skipped" and "its limit" in run.reason and Alert.objects.get().kind == "skipped"


def add_sessions(project, outcomes: str, when, tokens: int = 100, seconds: int = 60) -> None:
    """Sessions whose outcomes arrive in this order ("1" success, "0" fail), with their tokens and length."""
    start = TraceSession.objects.count()
    TraceSession.objects.bulk_create(
        TraceSession(
            project=project,
            session_id=f"o{start + i}",
            first_span_at=when - timedelta(seconds=seconds),
            last_span_at=when,
            input_tokens=tokens,
            outcome="success" if mark == "1" else "fail",
            outcome_at=when + timedelta(microseconds=i),
        )
        for i, mark in enumerate(outcomes)
    )


@pytest.mark.django_db
def test_the_sessions_success_rate_is_watched_by_outcome_and_a_token_ceiling_holds_a_hard_limit(project, owner):
    rate = create_monitor(project, owner, {"kind": "live", "name": "success", "metric": "success_rate", "reference_rate": 0.9, "min_drop": 0.1})
    tokens = create_monitor(project, owner, {"kind": "live", "name": "tokens", "metric": "tokens", "ceiling": 5000})
    first = timezone.now() + timedelta(minutes=1)
    steady = "1111111110" * 50  # 90 %: as given
    add_sessions(project, steady, first, tokens=1000)
    with time_machine.travel(first + timedelta(minutes=1), tick=False):
        runs.tick()
    rate.refresh_from_db()
    # Every outcome taken once, in the order reported: the sum is the detector's over exactly these 500.
    p0, p1 = 0.9, 0.8
    expected = 0.0
    for mark in steady:
        expected = cusum.step(expected, mark == "1", p0, p1)
    assert rate.cusum == pytest.approx(expected) and rate.cusum < rate.cusum_h and not Alert.objects.exists()
    later = first + timedelta(hours=2)
    add_sessions(project, "1110" * 60, later, tokens=20000)  # 75 % and twenty thousand tokens each
    with time_machine.travel(later + timedelta(minutes=1), tick=False):
        runs.tick()
    assert set(Alert.objects.values_list("monitor__name", "kind")) == {("success", "regressed"), ("tokens", "limit")}
    assert "success rate of this project's sessions is below its reference 90.0%" in Alert.objects.get(monitor=rate).message
    limit = Alert.objects.get(monitor=tokens).message
    assert "Tokens per session (last 24 h mean)" in limit and "past the limit of 5,000.0" in limit
    # A tick with nothing new leaves the detector where it was.
    rate.refresh_from_db()
    before = (rate.cusum, rate.checked_pk)
    with time_machine.travel(later + timedelta(minutes=2), tick=False):
        runs.tick()
    rate.refresh_from_db()
    assert (rate.cusum, rate.checked_pk) == before and Alert.objects.count() == 2
