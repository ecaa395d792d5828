"""Comparisons that stop when the answer is known (#43): the sequential test's error rates by seeded simulation, its
validity at every look, and an eval that stops against another, says why, compares again, and resumes to the end."""

import json
import math
import random
import threading

import pytest

from evals import engine, sequential, statistics
from evals.actions import EvalConfigError, create_eval, resume_eval, retry_errors
from evals.comparison import compare_evals
from evals.models import Deployment, Eval, Sample
from evals.subset import run_order, select_rows
from evals.suites.comparison import _correct
from evals.tasks import run_eval

from .eval_pairs import REFERENCES, ROWS, SEED, PairedEvals, questions
from .fakes.openai_server import FakeOpenAI
from .test_cli import bv  # noqa: F401  (the fixture: bv against a live server)

ALPHA = 0.05


def paired_rows(rng: random.Random, n: int, p_a: float, p_b: float, phi: float = 0.6) -> list[float]:
    """n right/wrong pairs as two models score one benchmark: accuracies p_a and p_b, correlated phi on a row (MMLU-like)."""
    both = p_a * p_b + phi * math.sqrt(p_a * (1 - p_a) * p_b * (1 - p_b))
    only_b, only_a = p_b - both, p_a - both
    differences = []
    for _ in range(n):
        u = rng.random()
        differences.append(1.0 if u < only_b else -1.0 if u < only_b + only_a else 0.0)
    return differences


def graded_rows(rng: random.Random, n: int, shift: float) -> list[float]:
    """n differences of graded scores (a judge's 0-1 grades, pass rates): B's grade is A's plus noise plus shift."""
    differences = []
    for _ in range(n):
        a = rng.betavariate(3, 2)
        b = min(1.0, max(0.0, a + rng.gauss(shift, 0.15)))
        differences.append(b - a)
    return differences


# -- the test itself, by simulation ---------------------------------------------------------------


def test_it_decides_falsely_at_most_alpha_of_the_time_when_there_is_no_difference():
    rng = random.Random(43)
    decided = [sequential.first_stop(paired_rows(rng, 2000, 0.6, 0.6), 2000, ALPHA, binary=True)[1].reason == sequential.DECISION for _ in range(400)]
    assert sum(decided) / len(decided) <= ALPHA


def test_graded_rows_decide_falsely_at_most_alpha_of_the_time_too():
    rng = random.Random(44)
    # Centred so the mean difference is 0 exactly where the clipping at 0 and 1 would bias it.
    runs = []
    for _ in range(300):
        differences = graded_rows(rng, 600, 0.0)
        mean = sum(differences) / len(differences)
        runs.append([d - mean for d in differences])
    decided = [sequential.first_stop(run, 600, ALPHA, binary=False)[1].reason == sequential.DECISION for run in runs]
    assert sum(decided) / len(decided) <= ALPHA


def test_a_real_difference_is_found_early_and_in_the_right_direction():
    rng = random.Random(45)
    stops, verdicts = [], []
    for _ in range(200):
        at, found = sequential.first_stop(paired_rows(rng, 5000, 0.60, 0.65), 5000, ALPHA, binary=True)
        stops.append(at)
        verdicts.append(found.verdict)
    assert verdicts.count(statistics.BETTER) / len(verdicts) >= 0.95 and statistics.WORSE not in verdicts
    assert sorted(stops)[len(stops) // 2] < 0.25 * 5000
    worse = [sequential.first_stop(graded_rows(rng, 2000, -0.05), 2000, ALPHA, binary=False)[1].verdict for _ in range(50)]
    assert worse.count(statistics.WORSE) >= 48


def test_the_always_valid_p_holds_at_every_look_where_a_fixed_n_test_repeated_does_not():
    rng = random.Random(46)
    looks = range(100, 2001, 100)
    always_valid = fixed_n = 0
    for _ in range(400):
        differences = paired_rows(rng, 2000, 0.6, 0.6)
        state, seen = sequential.Walk(alpha=ALPHA, binary=True), []
        for n, d in enumerate(differences, 1):
            state.add(d)
            if n in looks:
                seen.append((state.p, state.fixed_p))
        assert all(later[0] <= earlier[0] for earlier, later in zip(seen, seen[1:], strict=False))  # a running minimum
        always_valid += any(p <= ALPHA for p, _ in seen)
        fixed_n += any(p <= ALPHA for _, p in seen)
    assert always_valid / 400 <= ALPHA
    # McNemar's test at each of 20 looks, stopping at the first p ≤ α: what a fixed-n test cannot be used for.
    assert fixed_n / 400 > 2 * ALPHA


def test_a_decision_never_claims_more_than_the_fixed_n_test_of_the_prefix():
    rng = random.Random(47)
    for _ in range(100):
        _, found = sequential.first_stop(paired_rows(rng, 3000, 0.6, 0.63), 3000, ALPHA, binary=True)
        if found.reason == sequential.DECISION:
            assert found.p <= ALPHA and found.fixed_p <= ALPHA and found.fixed_p <= found.p
            low, high = found.interval
            assert (low > 0) == (found.verdict == statistics.BETTER) or low <= 0 <= high


def test_it_stops_for_futility_when_no_difference_worth_having_is_left_or_the_rest_cannot_decide():
    flat = sequential.look([0.0] * 3000, 5000, ALPHA, binary=True)
    assert (flat.reason, flat.why, flat.verdict) == (sequential.FUTILITY, sequential.WITHIN, statistics.NOT_DECISIVE)
    assert -sequential.MIN_DIFFERENCE < flat.interval[0] < 0 < flat.interval[1] < sequential.MIN_DIFFERENCE
    # 3 B-better and 3 A-better pairs, 2 rows to go: even both B-better could not bring p to α.
    tied = sequential.look([1.0, -1.0] * 3, 2, ALPHA, binary=True)
    assert (tied.reason, tied.why) == (sequential.FUTILITY, sequential.UNDECIDABLE)
    assert sequential.look([1.0, -1.0] * 3, 40, ALPHA, binary=True).reason is None


def test_the_prefix_is_what_both_stored_in_run_order_errored_rows_covered_but_not_paired():
    order = [5, 2, 9, 1]
    a = {5: 1.0, 2: None, 9: 0.0, 1: 1.0}
    b = {5: 0.0, 2: 1.0, 1: 1.0}
    assert sequential.prefix(order, a, b) == (2, [(1.0, 0.0)])
    assert run_order(select_rows(1319, 40, SEED)) == [i for i in run_order(range(1319)) if i in set(select_rows(1319, 40, SEED))]


# -- an eval that stops against another ----------------------------------------------------------


@pytest.fixture
def pairs(project, owner):
    with PairedEvals(project, owner) as p:
        yield p


class Lockstep:
    """A fake deployment that answers a request only once every row answered before is stored and looked at (a flush a
    row, one request in flight): where an eval stops is then the same row on every run, however slow the machine."""

    def __init__(self, monkeypatch):
        self.condition = threading.Condition()
        self.answered = self.written = 0
        self.deployment_id = None
        monkeypatch.setattr(engine, "BATCH_SIZE", 1)
        original = engine.EvalRun._write

        def write(run, batch, *args, **kwargs):
            try:
                return original(run, batch, *args, **kwargs)
            finally:
                if run.eval.deployment_id == self.deployment_id:
                    with self.condition:
                        self.written += len(batch)
                        self.condition.notify_all()

        monkeypatch.setattr(engine.EvalRun, "_write", write)

    def deployment(self, pairs, name, wrong=()) -> Deployment:
        wrong = set(wrong)

        def answer(question):
            with self.condition:
                self.condition.wait_for(lambda: self.written >= self.answered, timeout=30)
                self.answered += 1
            return "#### -1" if question in wrong else f"So\n#### {REFERENCES.get(question, '0')}"

        fake = pairs.stack.enter_context(FakeOpenAI(answer=answer))
        deployment = Deployment.objects.create(project=pairs.project, name=name, base_url=fake.url, model=name, max_in_flight=1)
        self.deployment_id = deployment.pk
        return deployment


@pytest.fixture
def lockstep(monkeypatch):
    return Lockstep(monkeypatch)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("loopback_deployments")
def test_a_clearly_better_eval_stops_before_its_last_row_compares_again_and_resumes_to_the_end(api, owner_client, project, owner, pairs, lockstep):
    a = pairs.run("a", wrong=questions()[:30])
    b = create_eval(project, owner, deployment=lockstep.deployment(pairs, "b"), decide_against=a)
    assert (b.same_rows_as, b.decision_alpha) == (a, 0.05)
    run_eval(b.pk)
    b.refresh_from_db()
    stop = b.early_stop
    assert b.status == "succeeded" and stop["reason"] == "decision" and stop["verdict"] == "better"
    assert stop["of"] == ROWS and stop["at"] < ROWS and stop["p"] <= stop["alpha"] == 0.05 and stop["fixed_n_p"] <= 0.05
    # What was in flight when it stopped is kept (a request or two here), and nothing more was asked.
    assert stop["at"] <= b.done_count == lockstep.answered <= stop["at"] + 2 < ROWS
    assert f"stopped at {stop['at']}/{ROWS}: b (this eval) better than a (eval #{a.pk})" in stop["summary"]
    assert stop["summary"] in owner_client.get(f"/evals/{b.pk}/").content.decode()

    compared = api.get(f"/api/v1/evals/{a.pk}/compare/{b.pk}").json()
    again = compared["sequential"]
    assert again["stopped"] and again["verdict"] == "better" and again["at"] >= stop["at"] and again["p"] <= stop["p"]
    assert again["summary"].startswith(f"stopped at {again['at']}/{ROWS}: B better than A (p ≤ 0.05")
    assert compared["n"] == b.done_count and compared["verdict"] == "better"
    assert "B better than A (p ≤ 0.05" in owner_client.get(f"/evals/{a.pk}/compare/{b.pk}/").content.decode()
    with pytest.raises(EvalConfigError, match="stopped early"):
        retry_errors(b)

    assert resume_eval(b)
    run_eval(b.pk)
    b.refresh_from_db()
    assert (b.status, b.done_count, lockstep.answered) == ("succeeded", ROWS, ROWS) and b.early_stop == {"resumed": stop}
    assert list(Sample.objects.filter(eval=b).order_by("row_index").values_list("row_index", flat=True)) == select_rows(1319, ROWS, SEED)
    full = compare_evals(a, b)
    assert full["n"] == ROWS and full["sequential"] is None and full["flips"]["wrong_to_right"] == 30
    assert compare_evals(a, b, sequential_alpha=0.05)["sequential"]["at"] == ROWS


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("loopback_deployments")
def test_two_evals_that_differ_little_stop_once_the_rows_left_could_not_decide(project, owner, pairs, lockstep):
    asked = questions()
    a = pairs.run("a", wrong=asked[:4])
    b = create_eval(project, owner, deployment=lockstep.deployment(pairs, "b", wrong=asked[2:6]), decide_against=a, decision_alpha=0.01)
    run_eval(b.pk)
    b.refresh_from_db()
    stop = b.early_stop
    assert (b.status, stop["reason"], stop["why"], stop["verdict"]) == ("succeeded", "futility", "undecidable", "not decisive")
    assert ROWS - 20 < stop["at"] < ROWS and "the remaining rows could not decide" in stop["summary"] and stop["p"] > 0.01


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("loopback_deployments")
def test_an_eval_with_a_precision_target_stops_once_its_interval_is_that_narrow(project, owner, pairs, lockstep):
    ev = create_eval(project, owner, deployment=lockstep.deployment(pairs, "precise"), benchmark="gsm8k", sample_limit=ROWS, seed=SEED, precision_target=0.1)
    run_eval(ev.pk)
    ev.refresh_from_db()
    stop = ev.early_stop
    # All right: Wilson's 95% interval of 30 rows is 0.886-1, ±0.057; 30 rows is the least it looks at.
    assert (ev.status, stop["reason"], stop["at"], stop["interval"]) == ("succeeded", "precision", 30, "Wilson")
    assert stop["half_width"] == pytest.approx((1 - statistics.wilson(30, 30).low) / 2) and 30 <= ev.done_count <= 32


# -- the API ------------------------------------------------------------------------------------


@pytest.fixture
def baseline(project, owner):
    deployment = Deployment.objects.create(project=project, name="a", base_url="https://a.example.com/v1", model="a")
    Deployment.objects.create(project=project, name="b", base_url="https://b.example.com/v1", model="b")
    return create_eval(project, owner, deployment=deployment, benchmark="gsm8k", sample_limit=ROWS, seed=SEED)


@pytest.mark.django_db
def test_the_api_takes_a_decision_target_and_says_where_it_stopped(api, baseline):
    created = api.post("/api/v1/evals", {"deployment": "b", "decide_against": baseline.pk, "decision_alpha": 0.01}, format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["decide_against"], body["decision_alpha"], body["same_rows_as"], body["early_stop"]) == (baseline.pk, 0.01, baseline.pk, {})
    precise = api.post("/api/v1/evals", {"deployment": "b", "benchmark": "gsm8k", "sample_limit": 20, "precision_target": 0.05}, format="json")
    assert precise.status_code == 201 and precise.json()["precision_target"] == 0.05


@pytest.mark.django_db
@pytest.mark.parametrize(
    "fields, field, message",
    [
        ({"decision_alpha": 0.9}, "decision_alpha", "less than or equal to 0.5"),
        ({"precision_target": 0}, "precision_target", "greater than or equal to 0.0001"),
        ({"decide_against": 999999}, "decide_against", "No such eval in this project."),
    ],
)
def test_the_api_refuses_bad_targets_naming_the_field(api, baseline, fields, field, message):
    refused = api.post("/api/v1/evals", {"deployment": "b", "decide_against": baseline.pk, **fields}, format="json")
    assert refused.status_code == 400 and message in str(refused.json()[field])


@pytest.mark.django_db
def test_a_decision_needs_an_eval_of_this_project_on_the_same_rows(api, outsider_api, baseline, outsider, outsider_project):
    other_rows = api.post(
        "/api/v1/evals", {"deployment": "b", "benchmark": "gsm8k", "sample_limit": ROWS, "seed": SEED + 1, "decide_against": baseline.pk}, format="json"
    )
    assert other_rows.status_code == 400 and other_rows.json()["detail"].startswith("decide_against: ")
    assert f"Eval #{baseline.pk} and the new eval drew different rows" in other_rows.json()["detail"]
    alone = api.post("/api/v1/evals", {"deployment": "b", "benchmark": "gsm8k", "sample_limit": 5, "decision_alpha": 0.01}, format="json")
    assert alone.status_code == 400 and "give decide_against too" in alone.json()["detail"]
    Deployment.objects.create(project=outsider_project, name="b", base_url="https://c.example.com/v1", model="c")
    theirs = outsider_api.post("/api/v1/evals", {"deployment": "b", "decide_against": baseline.pk}, format="json")
    assert theirs.status_code == 400 and theirs.json()["decide_against"] == ["No such eval in this project."]
    with pytest.raises(EvalConfigError, match="decide_against must name an eval of this project"):
        create_eval(outsider_project, outsider, deployment=Deployment.objects.get(project=outsider_project), decide_against=baseline)
    assert not Eval.objects.filter(project=outsider_project).exists()


@pytest.mark.django_db(transaction=True)
def test_bv_sets_the_targets_and_shows_where_an_eval_stopped(bv, baseline):
    started = bv("evals", "run", "--deployment", "b", "--decide-against", str(baseline.pk), "--alpha", "0.01", "--precision", "0.02", "--json")
    assert started.exit_code == 0, started.output
    ev = json.loads(started.stdout)
    assert (ev["decide_against"], ev["decision_alpha"], ev["precision_target"], ev["same_rows_as"]) == (baseline.pk, 0.01, 0.02, baseline.pk)
    stop = {"at": 12, "of": ROWS, "reason": "decision", "verdict": "better", "summary": f"stopped at 12/{ROWS}: b (this eval) better than a"}
    Eval.objects.filter(pk=ev["id"]).update(status="succeeded", early_stop=stop)
    assert f"Stopped early: {stop['summary']}" in bv("evals", "show", str(ev["id"])).output


# -- the suite gate -----------------------------------------------------------------------------


def test_the_suite_gate_reads_a_benchmark_that_stopped_early_by_its_always_valid_p():
    # Fixed-n McNemar of the prefix at 0.004 would fail the gate; the always-valid p of the stopped test does not.
    stopped = {"sequential": {"stopped": True, "p": 0.2, "delta": -0.05}}
    rows = [{"benchmark": "gsm8k", "p_value": 0.004, "delta": -0.05, **stopped}, {"benchmark": "mmlu", "p_value": 0.004, "delta": -0.05, "sequential": None}]
    _correct(rows)
    assert [(row["gate_test"], row["corrected_verdict"]) for row in rows] == [("sequential", "not decisive"), ("fixed-n", "worse")]
    assert rows[0]["p_adjusted"] == pytest.approx(0.2)
