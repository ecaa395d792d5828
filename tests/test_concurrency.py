"""The engine's adaptive concurrency (evals/concurrency.py): it climbs while answers hold, halves on 429s, 503s
and a latency knee, honours Retry-After, settles near a server's capacity and loses no row; a deployment's
max_in_flight is 1-1,024."""

import asyncio
import heapq
import itertools
import random
import statistics
import time
from collections import Counter, deque
from datetime import timedelta

import pytest
from django.utils import timezone
from multidict import CIMultiDict

from evals.actions import cancel_eval, create_eval
from evals.client import RETRY_AFTER_MAX_SECONDS, UNCOUNTED_RETRIES, Request, RequestFailed, http_session, retry_after_seconds, send_request
from evals.concurrency import MAX_POINTS, AdaptiveLimit, Timeline
from evals.datasets.versions import create_dataset
from evals.models import Deployment, Eval
from evals.shares import fair_shares, release, settle
from evals.suites.actions import create_suite_run
from evals.tasks import run_eval

from .fakes.openai_server import FakeOpenAI
from .harness_fixtures import wait_for

# The fake model servers listen on loopback.
pytestmark = pytest.mark.usefixtures("loopback_deployments")


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def answers(gate: AdaptiveLimit, clock: Clock, count: int, latency: float = 0.2, status: int = 200) -> list[bool]:
    """`count` answers, each to a request sent `latency` before, the gate kept full: a level's worth per round trip."""

    async def go():
        counted = []
        for _ in range(count):
            while gate.in_flight < gate.allowed:
                await gate.acquire()
            clock.now += latency / gate.allowed
            counted.append(gate.observe(status, clock.now - latency))
            gate.release()
        return counted

    return asyncio.run(go())


def test_it_starts_at_the_documented_default_or_the_deployment_s_lower_limit():
    assert AdaptiveLimit(1024).allowed == 100
    assert AdaptiveLimit(4).allowed == 4


def test_it_doubles_per_round_trip_while_answers_hold_up_to_the_deployment_s_limit():
    clock = Clock()
    gate = AdaptiveLimit(1024, clock=clock)
    answers(gate, clock, 100)
    assert gate.allowed == 200  # a round trip: one more per answer
    answers(gate, clock, 200)
    assert gate.allowed == 400
    answers(gate, clock, 2000)
    assert gate.allowed == 1024 and gate.decreases == 0


def test_a_deployment_at_its_limit_stays_there():
    clock = Clock()
    gate = AdaptiveLimit(100, clock=clock)
    answers(gate, clock, 1000)
    assert gate.allowed == 100


def test_it_grows_only_while_the_gate_is_full():
    clock = Clock()
    gate = AdaptiveLimit(1024, clock=clock)

    async def few():
        for _ in range(10):
            await gate.acquire()
        for _ in range(500):
            clock.now += 0.01
            gate.observe(200, clock.now - 0.2)
        return gate.allowed

    assert asyncio.run(few()) == 100  # 10 in flight: the eval's tail, or rows that wait on something else


def test_a_share_of_the_deployment_s_cap_bounds_the_gate_and_growth_stops_at_it():
    clock = Clock()
    gate = AdaptiveLimit(1024, clock=clock)
    gate.set_share(30)
    assert gate.allowed == 30
    answers(gate, clock, 1000)
    # Full at its share, the gate is not the level that binds: it does not grow past what it can test.
    assert (gate.allowed, int(gate.level)) == (30, 100)
    gate.set_share(1024)
    answers(gate, clock, 100)
    assert gate.allowed == 200


@pytest.mark.parametrize(
    ("wants", "cap", "expected"),
    [
        ([8, 8, 8], 8, [3, 3, 2]),  # even, the remainder to the earliest
        ([1, 100, 100], 100, [1, 50, 49]),  # one wanting less leaves the rest to the others
        ([5], 100, [5]),
        ([1, 1, 1], 2, [1, 1, 0]),  # more evals than slots: the latest waits for the earlier to end
        ([], 8, []),
    ],
)
def test_the_cap_is_split_max_min_fair(wants, cap, expected):
    assert fair_shares(wants, cap) == expected and sum(expected) <= cap


def test_a_429_halves_what_is_in_flight_once_per_round_trip():
    clock = Clock()
    gate = AdaptiveLimit(1024, clock=clock)
    answers(gate, clock, 100)
    assert gate.allowed == 200

    async def refused():
        while gate.in_flight < gate.allowed:
            await gate.acquire()
        sent_before = clock.now
        clock.now += 0.001
        assert gate.observe(429, clock.now) is False  # the gate halves for it: none of the request's attempts
        assert gate.allowed == 100 and gate.ceiling == 200
        # The rest of that round trip's refusals were sent at the old level: already acted on.
        assert [gate.observe(429, sent_before) for _ in range(50)] == [False] * 50
        assert gate.allowed == 100 and gate.decreases == 1
        clock.now += 0.001
        gate.observe(429, clock.now)  # sent after the decrease: the new level is too high as well
        assert gate.allowed == 50 and gate.decreases == 2

    asyncio.run(refused())


def test_a_503_halves_and_a_500_stops_growth_without_halving():
    clock = Clock()
    gate = AdaptiveLimit(1024, clock=clock)
    answers(gate, clock, 1, status=500)
    answers(gate, clock, 99)
    assert gate.allowed == 100  # no growth for the rest of the round trip with an error in it
    answers(gate, clock, 100)
    assert gate.allowed == 200
    answers(gate, clock, 1, status=503)
    assert gate.allowed == 100 and gate.decreases == 1


def test_after_a_decrease_it_doubles_back_below_the_level_that_failed_then_probes_one_per_round_trip():
    clock = Clock()
    gate = AdaptiveLimit(1024, clock=clock)
    answers(gate, clock, 100)
    answers(gate, clock, 1, status=429)
    assert (gate.allowed, gate.ceiling) == (100, 200)
    answers(gate, clock, 100)  # sent before the decrease (a round trip of them): they say nothing of the new level
    assert gate.allowed == 100
    answers(gate, clock, 80)
    assert gate.allowed == 180  # one per answer back to RECOVER_TO of the level that failed
    answers(gate, clock, 180 * 5)
    assert 184 <= gate.allowed <= 186  # five round trips: about one each


def test_a_latency_knee_halves_and_the_halved_level_measures_the_best_latency_again():
    clock = Clock()
    gate = AdaptiveLimit(1024, clock=clock)
    answers(gate, clock, 100, latency=0.2)
    answers(gate, clock, 200, latency=0.2)
    assert gate.allowed == 400 and gate.best == (pytest.approx(0.2), 100)
    answers(gate, clock, 400, latency=0.5)  # over twice the best seen at a lower level: the server queues
    assert gate.decreases == 1 and gate.best is None
    level = gate.allowed
    assert level <= 400
    # At the halved level the answers stay slow (longer rows, not load): that is the new best, not another knee.
    answers(gate, clock, 3000, latency=0.5)
    assert gate.decreases == 1 and gate.best[0] == pytest.approx(0.5) and gate.allowed > level


def test_longer_answers_at_the_same_level_are_the_rows_not_the_load():
    clock = Clock()
    gate = AdaptiveLimit(100, clock=clock)
    answers(gate, clock, 300, latency=0.2)
    answers(gate, clock, 300, latency=0.9)
    assert gate.decreases == 0 and gate.allowed == 100


def test_a_request_waiting_to_retry_holds_no_slot():
    async def go():
        gate = AdaptiveLimit(1)
        retried = asyncio.Event()

        async def retrying():
            async with gate:
                await gate.backoff(0.05)
                retried.set()

        async with gate:
            task = asyncio.create_task(retrying())
            await asyncio.sleep(0)
        # Its only slot is free while the first request waits out its backoff: another takes it meanwhile.
        await asyncio.wait_for(gate.acquire(), 5)
        assert gate.in_flight == 1
        await asyncio.sleep(0.1)
        assert not retried.is_set()  # its backoff is over, but the slot is taken: it waits its turn
        gate.release()
        await asyncio.wait_for(task, 5)
        assert retried.is_set() and gate.in_flight == 0

    asyncio.run(go())


@pytest.mark.parametrize(
    "headers, seconds",
    [
        ({"Retry-After": "2"}, 2.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"Retry-After": "7", "retry-after-ms": "1500"}, 1.5),
        ({"Retry-After": "86400"}, RETRY_AFTER_MAX_SECONDS),
        ({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),  # a date passed: at once
        ({"Retry-After": "soon"}, None),
        ({"Retry-After": "-3"}, None),
        ({"retry-after-ms": "nan"}, None),
        ({}, None),
    ],
)
def test_retry_after_is_read_in_seconds_or_as_a_date_and_capped(headers, seconds):
    assert retry_after_seconds(CIMultiDict(headers)) == seconds


def simulate(capacity: int, maximum: int, requests: int, latency: float = 0.2, retry_after: float = 1.0):
    """A server answering in `latency` and refusing at once (429) what arrives beyond `capacity` in flight, and an
    eval keeping its gate full with `requests` requests, each refused one sent again `retry_after` later (and up
    to a fifth more, as the client spreads them)."""
    clock, spread = Clock(), random.Random(4)
    gate = AdaptiveLimit(maximum, clock=clock)
    order = itertools.count()
    events, waiting, refusals, counted, levels = [], deque(range(requests)), Counter(), Counter(), []
    serving = answered = 0

    async def go():
        nonlocal serving, answered
        while answered < requests:
            while waiting and gate.in_flight < gate.allowed:
                await gate.acquire()
                kind = "answer" if serving < capacity else "refused"
                serving += kind == "answer"
                heapq.heappush(events, (clock.now + (latency if kind == "answer" else 0.001), next(order), kind, clock.now, waiting.popleft()))
            clock.now, _, kind, started, request = heapq.heappop(events)
            if kind == "retry":
                waiting.append(request)
                continue
            if kind == "answer":
                serving -= 1
                answered += 1
                gate.observe(200, started)
            else:
                refusals[request] += 1
                counted[request] += gate.observe(429, started)
                later = retry_after * (1 + spread.random() / 5)
                heapq.heappush(events, (clock.now + later, next(order), "retry", None, request))  # waits outside the gate
            gate.release()
            levels.append(gate.allowed)

    asyncio.run(go())
    return levels, refusals, counted


def test_it_climbs_to_a_servers_capacity_backs_off_and_settles_near_it_losing_nothing():
    levels, refusals, counted = simulate(capacity=300, maximum=1024, requests=60_000)
    assert max(levels) > 300 and len(refusals) > 1  # it climbed past the capacity, and was refused more than once
    assert 270 <= statistics.median(levels[len(levels) // 2 :]) <= 330
    # No refusal used up an attempt, and none came near the bound on sends (EVAL_MAX_ATTEMPTS x UNCOUNTED_RETRIES).
    assert sum(counted.values()) == 0 and max(refusals.values()) <= 2


def test_at_a_small_capacity_no_request_is_refused_near_the_bound_on_sends():
    levels, refusals, counted = simulate(capacity=2, maximum=64, requests=20_000)
    assert sum(counted.values()) == 0 and max(refusals.values()) < 4 * UNCOUNTED_RETRIES
    assert statistics.median(levels[len(levels) // 2 :]) == 2


def test_an_api_refusing_everything_still_fails_its_rows():
    """Out of quota: the gate halves down to one request at a time, and from there every refusal counts as an attempt."""
    clock = Clock()
    gate = AdaptiveLimit(100, clock=clock)

    async def refused():
        counted = []
        for _ in range(10):
            while gate.in_flight < gate.allowed:
                await gate.acquire()
            clock.now += 0.01
            counted.append(gate.observe(429, clock.now - 0.001))  # each sent after the last decrease
            gate.release()
        return counted

    counted = asyncio.run(refused())
    assert gate.allowed == 1 and counted == [False] * 6 + [True] * 4  # 100, 50, 25, 12, 6, 3: halved; then 1


def test_the_chart_s_series_stays_short_and_evenly_spaced():
    clock = Clock()
    gate = AdaptiveLimit(100, clock=clock)
    timeline = Timeline(gate, clock=clock)
    for _ in range(3 * MAX_POINTS):
        clock.now += 1.0
        gate.answered += 50
        timeline.sample()
    assert len(timeline.points) <= MAX_POINTS
    gaps = {round(b[0] - a[0], 1) for a, b in itertools.pairwise(timeline.points)}
    assert gaps == {4.0} and timeline.points[-1][3] == 50.0  # 50 answers a second, merged or not


def test_a_retried_429_waits_its_retry_after(project, settings):
    settings.EVAL_RETRY_BASE_SECONDS = 0.001
    settings.EVAL_MAX_ATTEMPTS = 2
    with FakeOpenAI() as fake:
        fake.capacity, fake.retry_after = 0, "0.3"
        deployment = Deployment.objects.create(project=project, name="full", base_url=fake.url, model="m")

        async def go():
            async with http_session(4) as client:
                started = time.monotonic()
                with pytest.raises(RequestFailed, match="Gave up after 2 attempts: HTTP 429"):
                    await send_request(client, deployment, Request("/chat/completions", {"model": "m", "messages": []}))
                return time.monotonic() - started

        assert asyncio.run(go()) >= 0.29 and fake.refused == 2


def test_through_the_gate_a_429_is_retried_outside_it_after_its_retry_after_and_counts_only_at_a_level_of_1(project, settings):
    settings.EVAL_RETRY_BASE_SECONDS = 0.001
    settings.EVAL_MAX_ATTEMPTS = 2
    with FakeOpenAI() as fake:
        fake.capacity, fake.retry_after = 0, "0.2"
        deployment = Deployment.objects.create(project=project, name="full", base_url=fake.url, model="m")
        gate = AdaptiveLimit(100)

        async def go():
            async with http_session(4) as client, gate:
                started = time.monotonic()
                with pytest.raises(RequestFailed, match="Gave up after 2 attempts: HTTP 429"):
                    await send_request(client, deployment, Request("/chat/completions", {"model": "m", "messages": []}), observer=gate)
                assert gate.in_flight == 1  # its slot taken again after each wait
                return time.monotonic() - started

        waited = asyncio.run(go())
    # The first refusal halved the gate (to 1) and was not counted; the two at a level of 1 were its attempts.
    assert fake.refused == 3 and gate.allowed == 1 and gate.in_flight == 0 and waited >= 0.39


@pytest.mark.django_db(transaction=True)
def test_an_eval_against_a_server_of_small_capacity_backs_off_and_stores_every_row(api, owner, project, settings):
    settings.EVAL_RETRY_BASE_SECONDS = 0.01
    rows = 300
    with FakeOpenAI(answer=lambda text: text.split()[-1], latency=0.05) as fake:
        # Eight at once, a 429 with Retry-After beyond: the eval starts at 32, four times too many.
        fake.capacity, fake.retry_after = 8, "0.05"
        deployment = Deployment.objects.create(project=project, name="small", base_url=fake.url, model="m", max_in_flight=32)
        data = "".join(f'{{"input": "question {i}", "expected": "{i}"}}\n' for i in range(rows)).encode()
        dataset = create_dataset(project, owner, "numbers", data)
        ev = create_eval(project, owner, deployment=deployment, dataset=dataset, scorers=["exact_match"])
        run_eval(ev.pk)
    ev.refresh_from_db()
    assert (ev.status, ev.done_count, ev.error_count, ev.score) == (Eval.Status.SUCCEEDED, rows, 0, 1.0)
    assert fake.refused > 0 and fake.peak_in_flight == 8
    assert len({r["body"]["messages"][-1]["content"] for r in fake.requests}) == rows
    # The series the page charts: [seconds, level allowed, in flight, answers per second], the last level back near 8.
    assert ev.concurrency and all(len(point) == 4 for point in ev.concurrency)
    assert max(point[1] for point in ev.concurrency) <= 32 and ev.concurrency[-1][1] <= 16
    assert api.get(f"/api/v1/evals/{ev.pk}").json()["concurrency"] == ev.concurrency


@pytest.mark.django_db(transaction=True)
def test_against_a_server_with_room_the_gate_grows_to_the_deployments_cap_and_never_past_it(owner, project, settings):
    """The gate starts at 100 in flight; a server that takes all it is sent must see it grow to max_in_flight, 150,
    and no further: the peak the server saw is the cap itself (the small server's 8 above is its own threshold)."""
    rows = 2000
    with FakeOpenAI(answer=lambda text: text.split()[-1], latency=0.05) as fake:
        deployment = Deployment.objects.create(project=project, name="roomy", base_url=fake.url, model="m", max_in_flight=150)
        data = "".join(f'{{"input": "question {i}", "expected": "{i}"}}\n' for i in range(rows)).encode()
        ev = create_eval(project, owner, deployment=deployment, dataset=create_dataset(project, owner, "numbers", data), scorers=["exact_match"])
        run_eval(ev.pk)
    ev.refresh_from_db()
    assert (ev.status, ev.done_count, ev.error_count) == (Eval.Status.SUCCEEDED, rows, 0)
    assert fake.refused == 0 and fake.peak_in_flight == 150
    # The chart samples about once a second: the level at those moments, never past the cap (the server's peak above
    # is the proof it reached it; a moment's latency knee on a loaded machine may halve it between samples).
    assert max(point[1] for point in ev.concurrency) <= 150


@pytest.mark.django_db
@pytest.mark.django_db
def test_shares_settled_in_turn_never_add_up_past_the_cap(owner, project, settings):
    settings.EVAL_STALE_SECONDS = 60
    deployment = Deployment.objects.create(project=project, name="shared", base_url="http://127.0.0.1:9", model="m", max_in_flight=10)
    dataset = create_dataset(project, owner, "numbers", b'{"input": "q", "expected": "a"}\n')
    a, b, c = (create_eval(project, owner, deployment=deployment, dataset=dataset, scorers=["exact_match"]) for _ in range(3))
    Eval.objects.update(heartbeat_at=timezone.now(), status=Eval.Status.RUNNING)

    def held():
        return dict(Eval.objects.values_list("pk", "in_flight_share"))

    assert settle(a, wanted=1, held=0) == 10  # alone, it holds the whole cap however little it has waiting
    # B arrives wanting all: A holds the cap, so B waits; A, settling with 10 out, shrinks its gate but holds its 10.
    assert settle(b, wanted=10, held=0) == 0
    assert settle(a, wanted=10, held=10) == 5 and held() == {a.pk: 10, b.pk: 0, c.pk: 0}
    assert settle(b, wanted=10, held=0) == 0
    # A's answers came back: its share follows them down, and B takes what they leave.
    assert settle(a, wanted=10, held=5) == 5 and settle(b, wanted=10, held=0) == 5
    # One wanting little leaves the rest: C wants 1 of a cap of 10 split with two wanting all.
    assert settle(c, wanted=1, held=0) == 0  # nothing free yet
    assert settle(b, wanted=10, held=5) == 4 and settle(c, wanted=1, held=0) == 0  # B, the later, takes the smaller part
    assert settle(a, wanted=10, held=5) == 5 and held() == {a.pk: 5, b.pk: 5, c.pk: 0}
    assert settle(b, wanted=10, held=4) == 4 and settle(c, wanted=1, held=0) == 1
    assert sum(held().values()) == 10
    # A worker gone silent holds nothing past EVAL_STALE_SECONDS; a pass that ended gives its share back.
    Eval.objects.filter(pk=a.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=61))
    release(c)
    assert settle(b, wanted=10, held=5) == 10
    # The cap is read at every settle: lowered mid-run, it holds at the next.
    Deployment.objects.filter(pk=deployment.pk).update(max_in_flight=3)
    assert settle(b, wanted=10, held=10) == 3 and held()[b.pk] == 10


@pytest.mark.django_db(transaction=True)
def test_every_eval_asking_a_deployment_shares_its_cap_and_together_they_reach_it_never_past_it(worker, owner, project):
    """A lone eval and two suite runs (the local model's quick suite asked for twice is two) on one deployment at
    once: its server sees at most its max_in_flight, 8, and sees 8: each gate alone would send 8, 24 in all."""
    rows = 120
    with FakeOpenAI(answer=lambda text: text.split()[-1], latency=0.05) as fake:
        deployment = Deployment.objects.create(project=project, name="shared", base_url=fake.url, model="m", max_in_flight=8)
        data = "".join(f'{{"input": "question {i}", "expected": "{i}"}}\n' for i in range(rows)).encode()
        lone = create_eval(project, owner, deployment=deployment, dataset=create_dataset(project, owner, "numbers", data), scorers=["exact_match"])
        suites = [
            create_suite_run(project, owner, suite_name=f"quick {n}", entries=[{"benchmark": "gsm8k", "sample_limit": rows}], deployments=[deployment])
            for n in (1, 2)
        ]
        evals = Eval.objects.filter(pk__in=[lone.pk, *(run.evals.get().pk for run in suites)])
        wait_for(lambda: not evals.filter(status__in=Eval.ACTIVE).exists(), timeout=120)
    assert [(ev.status, ev.done_count, ev.error_count) for ev in evals] == [(Eval.Status.SUCCEEDED, rows, 0)] * 3
    assert fake.refused == 0 and len(fake.requests) == 3 * rows and fake.peak_in_flight == 8
    # Each pass gave its share back as it ended: nothing held against the cap.
    assert list(evals.values_list("in_flight_share", "in_flight_wanted")) == [(0, 0)] * 3


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("loopback_deployments")
def test_an_eval_waiting_for_a_share_ends_its_pass_at_a_cancel_and_sends_nothing(worker, owner, project, settings):
    """Another eval holds the whole cap (1): this one's share is 0, its rows wait at the gate. A cancel ends the pass
    at the next flush: the waiting rows come through the gate to find the eval stopped, and nothing is sent."""
    settings.EVAL_STALE_SECONDS = 60
    with FakeOpenAI() as fake:
        deployment = Deployment.objects.create(project=project, name="full", base_url=fake.url, model="m", max_in_flight=1)
        holder = Eval.objects.create(project=project, deployment=deployment, benchmark="gsm8k", seed=1, status=Eval.Status.RUNNING, heartbeat_at=timezone.now())
        assert settle(holder, wanted=1, held=0) == 1
        data = b"".join(b'{"input": "q%d", "expected": "a"}\n' % i for i in range(3))
        waiting = create_eval(project, owner, deployment=deployment, dataset=create_dataset(project, owner, "three", data), scorers=["exact_match"])
        wait_for(lambda: Eval.objects.filter(pk=waiting.pk, status=Eval.Status.RUNNING, in_flight_wanted__gt=0).exists(), timeout=30)
        cancel_eval(waiting)
        wait_for(lambda: Eval.objects.filter(pk=waiting.pk, in_flight_wanted=0).exists(), timeout=30)
    waiting.refresh_from_db()
    assert (waiting.status, waiting.done_count, waiting.in_flight_share) == (Eval.Status.CANCELLED, 0, 0)
    assert fake.requests == []


def test_the_eval_page_charts_the_requests_in_flight(owner_client, project):
    deployment = Deployment.objects.create(project=project, name="d", base_url="https://203.0.113.9/v1", model="m")
    ev = Eval.objects.create(project=project, deployment=deployment, benchmark="gsm8k", seed=1, status="succeeded")
    page = owner_client.get(f"/evals/{ev.pk}/").content.decode()
    assert 'id="concurrency"' not in page  # nothing recorded: no chart
    ev.concurrency = [[1.0, 100, 100, 480.5], [2.0, 200, 187, 950.0], [3.0, 100, 64, 402.0]]
    ev.save()
    page = owner_client.get(f"/evals/{ev.pk}/").content.decode()
    assert 'id="concurrency"' in page and page.count("<polyline") >= 3 and "answers per second" in page


@pytest.mark.django_db
@pytest.mark.parametrize("value", [0, -1, 1025])
def test_max_in_flight_out_of_1_to_1024_is_refused_by_the_api_and_the_form(api, owner_client, value):
    body = {"name": "d", "base_url": "https://203.0.113.9/v1", "model": "m", "api_style": "chat", "max_in_flight": value}
    refused = api.post("/api/v1/deployments", body, format="json")
    assert refused.status_code == 400 and "max_in_flight" in refused.json()
    posted = owner_client.post("/evals/deployments/", {**body, "cache_ttl_seconds": 3600})
    assert posted.status_code == 400 and "max_in_flight" in posted.context["form"].errors
    assert not Deployment.objects.exists()


@pytest.mark.django_db
def test_max_in_flight_up_to_the_cap_is_taken(api, owner_client):
    body = {"name": "big", "base_url": "https://203.0.113.9/v1", "model": "m", "api_style": "chat", "max_in_flight": 1024}
    assert api.post("/api/v1/deployments", body, format="json").status_code == 201
    assert owner_client.post("/evals/deployments/", {**body, "name": "big form", "cache_ttl_seconds": 3600}).status_code == 302
    assert set(Deployment.objects.values_list("max_in_flight", flat=True)) == {1024}
