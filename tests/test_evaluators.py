"""Evaluators on live traffic: which sessions they take (filter, sampling with a seed), code, judge and trajectory scorers,
the judge's budget and retried errors, only newer sessions unless backfilled (its estimate first), and where scores show."""

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from click.testing import CliRunner
from django.utils import timezone

from belvedir_cli.main import cli
from evals.models import Deployment
from evals.scoring.calibration import card
from harnesses.models import Harness, Run
from traces import evaluators
from traces.evaluator_rules import save_evaluator
from traces.evaluators import EvaluatorError, backfill_estimate, retry_errors, score_sessions, start_backfill
from traces.models import Evaluator, EvaluatorScore, TraceSession
from traces.segmentation import process_quiet_sessions

from .fakes.openai_server import FakeOpenAI
from .otlp_builders import body, span
from .test_trajectory import tool_span

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("loopback_deployments")]


def exchange(session_id, question, answer, start_s, *, user="", **properties):
    attributes = {
        "gen_ai.prompt.0.role": "user",
        "gen_ai.prompt.0.content": question,
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": answer,
        **({"traceloop.association.properties.user_id": user} if user else {}),
        **{f"traceloop.association.properties.{k}": v for k, v in properties.items()},
    }
    return span("openai.chat", session_id=session_id, start_s=start_s, model="gpt-4o", tokens=(100, 20), attributes=attributes)


def post(api, spans):
    response = api.generic("POST", "/api/v1/traces", body(spans), content_type="application/json")
    assert response.status_code == 200, response.content


@pytest.fixture
def inline_queue(monkeypatch):
    """The eval queue, run at once in this thread: what segmentation sends is scored before it returns."""
    sent = []

    def run(name, *args, cluster=None, **kwargs):
        assert name == "traces.evaluators.score_sessions" and cluster == "evals"
        sent.append(args[0])
        score_sessions(*args, **kwargs)

    monkeypatch.setattr(evaluators, "async_task", run)
    return sent


def quiet(settings):
    """Segment every session now (their last span is older than the quiet time)."""
    settings.TRACE_QUIET_SECONDS = 0
    return process_quiet_sessions(now=timezone.now() + timedelta(seconds=1))


def sessions_now(api, count, *, answer=lambda i: f"The total is {i}.", question=lambda i: f"Add up order {i}", **props):
    now = timezone.now().timestamp()
    for i in range(count):
        post(api, [exchange(f"s-{i}", question(i), answer(i), now + i * 0.001, **props)])


def code_evaluator(project, owner, **fields):
    config = fields.pop("config", {"check": "contains", "expected": "total"})
    return save_evaluator(project, owner, {"name": fields.pop("name", "mentions a total"), "kind": "code", "config": config, **fields})


def test_a_seed_takes_the_same_subset_every_time_and_a_larger_rate_takes_more_of_it(project, owner):
    keys = [f"session-{i}" for i in range(2000)]
    quarter = code_evaluator(project, owner, name="a", sample_rate=0.25, seed=7)
    again = code_evaluator(project, owner, name="b", sample_rate=0.25, seed=7)
    half = code_evaluator(project, owner, name="c", sample_rate=0.5, seed=7)
    other_seed = code_evaluator(project, owner, name="d", sample_rate=0.25, seed=8)
    taken = [k for k in keys if evaluators.sampled(quarter, k)]
    assert taken == [k for k in keys if evaluators.sampled(again, k)]
    assert 400 < len(taken) < 600  # a quarter of 2,000: 500 ± 4.4 standard deviations
    assert set(taken) < {k for k in keys if evaluators.sampled(half, k)}  # the same seed's thresholds nest
    assert taken != [k for k in keys if evaluators.sampled(other_seed, k)]


def test_the_filter_takes_user_metadata_outcome_and_production_or_harness_sessions(api, project, owner, settings, inline_queue):
    harness = Harness.objects.create(project=project, name="h", repo_url="https://example.com/r.git", install_command="true", run_command="true")
    run = Run.objects.create(project=project, harness=harness, compute_type="cpu", price_cents=0)
    by_rule = {
        "carol's": code_evaluator(project, owner, name="carol", user_id="carol"),
        "eu": code_evaluator(project, owner, name="eu", metadata={"region": "eu"}),
        "failed": code_evaluator(project, owner, name="failed", outcome="fail"),
        "production": code_evaluator(project, owner, name="production", source="production"),
        "harness h": code_evaluator(project, owner, name="harness", source="harness", harness=harness),
    }
    now = timezone.now().timestamp()
    post(api, [exchange("carol-1", "Add up A", "The total is 3.", now, user="carol", region="eu")])
    post(api, [exchange("dave-1", "Add up B", "The total is 4.", now + 1, user="dave", region="us")])
    post(api, [exchange("run-1", "Add up C", "The total is 5.", now + 2)])
    TraceSession.objects.filter(session_id="run-1").update(run=run)
    assert api.post("/api/v1/outcomes", {"session_id": "dave-1", "outcome": "fail"}, format="json").status_code == 200
    quiet(settings)
    scored = {name: sorted(EvaluatorScore.objects.filter(evaluator=ev).values_list("session__session_id", flat=True)) for name, ev in by_rule.items()}
    assert scored == {"carol's": ["carol-1"], "eu": ["carol-1"], "failed": ["dave-1"], "production": ["carol-1", "dave-1"], "harness h": ["run-1"]}
    assert all(s.value == 1.0 for s in EvaluatorScore.objects.all())


def test_code_checks_score_the_sessions_last_answer_and_a_hanging_regex_is_an_error_not_a_verdict(api, project, owner, settings, inline_queue):
    settings.EVAL_REGEX_TIMEOUT_SECONDS = 0.2
    checks = {
        "contains": {"check": "contains", "expected": "total"},
        "regex": {"check": "regex", "pattern": r"total is \d+"},
        "json": {"check": "json_valid"},
        "number": {"check": "last_number", "expected": "2"},
        "hangs": {"check": "regex", "pattern": r"^(a|a)*$"},  # backtracks 2^40 ways on 40 a's and a "!"
    }
    made = {name: code_evaluator(project, owner, name=name, config=config) for name, config in checks.items()}
    answers = ["The total is 2.", '{"total": 2}', "a" * 40 + "!"]
    sessions_now(api, 3, answer=lambda i: answers[i])
    quiet(settings)

    def values(name):
        return [EvaluatorScore.objects.get(evaluator=made[name], session__session_id=f"s-{i}").value if name != "hangs" else None for i in range(3)]

    assert values("contains") == [1.0, 1.0, 0.0] and values("regex") == [1.0, 0.0, 0.0]
    assert values("json") == [0.0, 1.0, 0.0] and values("number") == [1.0, 1.0, 0.0]
    hung = EvaluatorScore.objects.get(evaluator=made["hangs"], session__session_id="s-2")
    assert hung.status == "error" and hung.value is None and "took longer than 200 ms" in hung.error
    assert hung.attempts == evaluators.MAX_ATTEMPTS  # never retried: it would only time out again


def test_a_trajectory_check_counts_steps_tool_errors_and_cost(api, project, owner, settings, inline_queue):
    Deployment.objects.create(project=project, name="gpt", base_url="https://api.example.com/v1", model="gpt-4o", input_price_per_million=Decimal(10_000))
    lean = save_evaluator(project, owner, {"name": "lean", "kind": "trajectory", "config": {"max_steps": 3, "max_tool_errors": 0, "max_cost": 1.5}})
    now = timezone.now().timestamp()
    post(api, [exchange("short", "Q", "A", now)])
    broken = tool_span("long", now + 1)
    broken["status"] = {"code": 2, "message": "timeout"}
    post(api, [exchange("long", "Q", "A", now), broken, exchange("long", "Q", "A", now + 2), exchange("long", "Q", "A", now + 3)])
    quiet(settings)
    short, long = (EvaluatorScore.objects.get(evaluator=lean, session__session_id=s) for s in ("short", "long"))
    assert short.value == 1.0 and short.detail["steps"] == 1 and short.detail["cost"] == "1.000000"  # 100 tokens at $10,000 a million
    assert long.value == 0.0 and long.detail["broken"] == ["4 steps > 3", "1 tool errors > 0", "cost $3.0000 > $1.5"]


@pytest.fixture
def judge_server():
    verdicts = {"default": "PASS"}
    with FakeOpenAI(answer=lambda text: verdicts.get(text.split("The assistant answered:\n")[-1].split("\n")[0], verdicts["default"])) as server:
        server.verdicts = verdicts
        yield server


def judge_evaluator(project, owner, judge_server, **fields):
    judge = Deployment.objects.create(
        project=project, name="judge", base_url=judge_server.url, model="j", input_price_per_million=Decimal(1000), output_price_per_million=Decimal(1000)
    )
    return save_evaluator(project, owner, {"name": "helpful", "kind": "judge", "judge": judge, "daily_budget": Decimal("10"), "config": {}, **fields})


def test_a_judge_scores_counts_its_tokens_and_a_verdict_it_cannot_give_is_retried_never_zero(api, project, owner, settings, inline_queue, judge_server):
    settings.EVAL_RETRY_BASE_SECONDS = 0.01
    evaluator = judge_evaluator(project, owner, judge_server)
    judge_server.verdicts.update({"The total is 1.": "FAIL", "The total is 2.": "I am not sure."})
    judge_server.always_fail["x"] = 500
    sessions_now(api, 3)
    quiet(settings)
    by_session = {s.session.session_id: s for s in EvaluatorScore.objects.filter(evaluator=evaluator).select_related("session")}
    assert (by_session["s-0"].value, by_session["s-1"].value) == (1.0, 0.0)
    unsure = by_session["s-2"]
    assert unsure.status == "error" and unsure.value is None and "answered without a grade" in unsure.error
    assert all(s.prompt_tokens > 0 and s.cost > 0 for s in by_session.values())  # the failed verdict's tokens count too
    assert by_session["s-0"].detail["judge"] == f"{evaluator.judge_id}:evaluator-{evaluator.pk}-pass_fail@1"
    # Retried later (not before RETRY_AFTER), then scored; its tokens add up over both tries.
    assert retry_errors() == 0
    EvaluatorScore.objects.filter(pk=unsure.pk).update(scored_at=timezone.now() - evaluators.RETRY_AFTER)
    judge_server.verdicts["The total is 2."] = "PASS"
    assert retry_errors() == 1
    unsure.refresh_from_db()
    assert (unsure.status, unsure.value, unsure.attempts) == ("scored", 1.0, 2) and unsure.prompt_tokens > by_session["s-0"].prompt_tokens


def test_a_judge_that_is_down_leaves_errors_to_retry(api, project, owner, settings, inline_queue):
    settings.EVAL_RETRY_BASE_SECONDS = 0.01
    judge = Deployment.objects.create(project=project, name="down", base_url="http://127.0.0.1:9/v1", model="j", input_price_per_million=Decimal(1))
    evaluator = save_evaluator(project, owner, {"name": "j", "kind": "judge", "judge": judge, "daily_budget": Decimal(1), "config": {}})
    sessions_now(api, 2)
    quiet(settings)
    assert list(EvaluatorScore.objects.filter(evaluator=evaluator).values_list("status", "value")) == [("error", None), ("error", None)]
    assert "could not be asked" in EvaluatorScore.objects.filter(evaluator=evaluator).first().error


def test_a_judge_stops_at_its_daily_budget(api, project, owner, settings, inline_queue, judge_server):
    evaluator = judge_evaluator(project, owner, judge_server, daily_budget=Decimal("0.2"))  # ~$0.04 a verdict
    evaluator.judge.max_in_flight = 1  # one at a time: the budget is checked before each
    evaluator.judge.save()
    sessions_now(api, 12)
    quiet(settings)
    scores = EvaluatorScore.objects.filter(evaluator=evaluator)
    scored, skipped = scores.filter(status="scored"), scores.filter(status="skipped")
    spent = sum(s.cost for s in scored)
    each = max(s.cost for s in scored)
    assert scored.count() + skipped.count() == 12 and skipped.count() > 0
    assert Decimal("0.2") <= spent < Decimal("0.2") + each  # stopped at the first verdict past the budget
    assert all("Daily budget of $0.2" in s.error for s in skipped)


def test_a_daily_budget_spent_mid_batch_skips_the_rest_the_next_batch_that_day_asks_nothing_and_the_next_day_starts_again(
    api, project, owner, settings, inline_queue, judge_server
):
    def batch(prefix, count):
        now = timezone.now().timestamp()
        for i in range(count):
            post(api, [exchange(f"{prefix}-{i}", f"Add up order {i}", f"The total is {i}.", now + i * 0.001)])
        asked = len(judge_server.requests)
        quiet(settings)
        scores = EvaluatorScore.objects.filter(evaluator=evaluator, session__session_id__startswith=f"{prefix}-")
        return len(judge_server.requests) - asked, scores.filter(status="scored"), scores.filter(status="skipped")

    # Made on today's clock: sessions are stamped received by the database's clock, which no travel moves.
    evaluator = judge_evaluator(project, owner, judge_server, daily_budget=Decimal("0.2"))  # ~$0.04 a verdict
    evaluator.judge.max_in_flight = 1  # one at a time: the budget is checked before each
    evaluator.judge.save()
    with time_machine.travel(datetime(2026, 12, 10, 9, 0, tzinfo=UTC), tick=True):
        asked, scored, skipped = batch("morning", 12)
        assert asked == scored.count() and 0 < scored.count() < 12 and scored.count() + skipped.count() == 12
        assert Decimal("0.2") <= sum(s.cost for s in scored) < Decimal("0.2") + max(s.cost for s in scored)
        assert all(s.error.startswith("Daily budget of $0.2") and s.cost is None for s in skipped), [s.error for s in skipped]
        morning_skipped = skipped.count()
        # Later that day: the day's budget is still spent, so the judge is asked nothing.
        with time_machine.travel(datetime(2026, 12, 10, 23, 59, tzinfo=UTC), tick=True):
            asked, scored, skipped = batch("evening", 3)
        assert (asked, scored.count(), skipped.count()) == (0, 0, 3)
    # After midnight the budget starts again: the new day's sessions are judged (the day before's skipped stay skipped).
    with time_machine.travel(datetime(2026, 12, 11, 0, 1, tzinfo=UTC), tick=True):
        asked, scored, skipped = batch("next-day", 3)
        assert (asked, scored.count(), skipped.count()) == (3, 3, 0)
        assert evaluators.spent_today(evaluator) == sum(s.cost for s in scored) < Decimal("0.2")
    assert EvaluatorScore.objects.filter(evaluator=evaluator, status="skipped").count() == morning_skipped + 3


def test_only_newer_sessions_are_scored_unless_a_backfill_with_its_estimate_says_otherwise(api, project, owner, settings, inline_queue, judge_server):
    sessions_now(api, 6)
    quiet(settings)
    evaluator = judge_evaluator(project, owner, judge_server, sample_rate=0.5, seed=3)
    sessions = TraceSession.objects.all()
    score_sessions(list(sessions.values_list("pk", flat=True)))  # as if they were segmented again
    assert not EvaluatorScore.objects.exists()  # they began before the evaluator
    since, until = timezone.now() - timedelta(hours=1), timezone.now() + timedelta(hours=1)
    estimate = backfill_estimate(evaluator, since, until)
    expected = [s for s in sessions if evaluators.sampled(evaluator, s.session_id)]
    assert estimate["sessions"] == 6 and estimate["to_score"] == len(expected) and estimate["tokens_each"]["from"] == "a guess"
    assert estimate["cost"] == evaluator.judge.cost(estimate["tokens_each"]["prompt"], estimate["tokens_each"]["completion"]) * len(expected)
    with pytest.raises(EvaluatorError, match="start must be before its end"):
        backfill_estimate(evaluator, until, since)
    start_backfill(evaluator, since, until)
    assert sorted(EvaluatorScore.objects.values_list("session__session_id", flat=True)) == sorted(s.session_id for s in expected)
    assert backfill_estimate(evaluator, since, until)["to_score"] == 0  # nothing twice


def test_a_changed_rule_is_a_new_version_and_bad_rules_are_refused(project, owner):
    evaluator = code_evaluator(project, owner)
    renamed = save_evaluator(project, owner, {"name": "renamed", "kind": "code", "config": {"check": "contains", "expected": "total"}}, evaluator)
    assert renamed.version == 1  # a name is not a rule
    changed = save_evaluator(project, owner, {"name": "renamed", "kind": "code", "config": {"check": "contains", "expected": "sum"}}, evaluator)
    assert changed.version == 2
    for data, message in [
        ({"kind": "code", "config": {"check": "regex", "pattern": "("}}, "pattern is invalid"),
        ({"kind": "code", "config": {"check": "contains"}}, "needs the expected text"),
        ({"kind": "judge", "config": {}}, "needs a judge deployment"),
        ({"kind": "trajectory", "config": {}}, "at least one of max_steps"),
        ({"kind": "code", "config": {"check": "contains", "expected": "x"}, "sample_rate": 1.5}, "between 0 and 1"),
        ({"kind": "sql", "config": {}}, "Unknown scorer"),
    ]:
        with pytest.raises(EvaluatorError, match=message):
            save_evaluator(project, owner, {"name": "new", **data})
    assert Evaluator.objects.count() == 1


def test_scores_show_on_the_session_in_the_list_filter_the_api_the_cli_and_over_time(
    api, api_key, live_server, owner_client, project, owner, settings, inline_queue, judge_server, monkeypatch, tmp_path
):
    evaluator = judge_evaluator(project, owner, judge_server)
    judge_server.verdicts["The total is 1."] = "FAIL"
    sessions_now(api, 3)
    quiet(settings)
    page = owner_client.get("/traces/sessions/s-1/").content.decode()
    assert 'id="evaluator-scores"' in page and "helpful" in page and "<strong>0</strong>" in page
    failing = owner_client.get(f"/traces/?evaluator={evaluator.pk}&score=fail").content.decode()
    assert "s-1" in failing and "s-0" not in failing and "s-2" not in failing
    listed = api.get("/api/v1/sessions", {"evaluator": evaluator.pk, "score": "pass"}).json()["results"]
    assert sorted(s["session_id"] for s in listed) == ["s-0", "s-2"]
    assert [s["value"] for s in api.get("/api/v1/sessions/s-1").json()["scores"]] == [0.0]
    detail = api.get(f"/api/v1/evaluators/{evaluator.pk}").json()
    assert detail["summary"]["scored"] == 3 and detail["summary"]["mean"] == pytest.approx(2 / 3)
    ((group, points),) = detail["daily"].items()
    assert points[0]["n"] == 3 and points[0]["mean"] == pytest.approx(2 / 3) and points[0]["ci"][0] < 2 / 3 < points[0]["ci"][1]
    assert "<svg" in owner_client.get(f"/traces/evaluators/{evaluator.pk}/").content.decode()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    env = {"BELVEDIR_API_KEY": api_key, "BELVEDIR_BASE_URL": live_server.url}
    shown = CliRunner().invoke(cli, ["traces", "scores", "--evaluator", "helpful", "--json"], env=env, obj={})
    assert shown.exit_code == 0, shown.output
    assert sorted((s["session_id"], s["value"]) for s in json.loads(shown.stdout)) == [("s-0", 1.0), ("s-1", 0.0), ("s-2", 1.0)]
    summary = CliRunner().invoke(cli, ["traces", "scores"], env=env, obj={})
    assert summary.exit_code == 0 and "helpful" in summary.output and "0.667" in summary.output
    # The judge's cost counts in the project's model spend on the home page.
    spent = sum(s.cost for s in EvaluatorScore.objects.all())
    assert f"evaluators' judges ${spent:.4f}" in owner_client.get("/").content.decode()


def test_labels_of_a_judges_verdicts_count_on_its_calibration_card(api, project, owner, settings, inline_queue, judge_server):
    evaluator = judge_evaluator(project, owner, judge_server)
    sessions_now(api, 3)
    quiet(settings)
    first, second, third = EvaluatorScore.objects.order_by("pk")
    for score, answer in ((first, {"agree": True}), (second, {"agree": False}), (third, {"agree": True})):
        response = api.post(f"/api/v1/evaluators/{evaluator.pk}/label", {"score": score.pk, **answer}, format="json")
        assert response.status_code == 200, response.content
    key = first.detail["judge"]
    shown = card(project, key)
    assert shown["n"] == 3 and shown["exact_agreement"] == pytest.approx(2 / 3) and shown["weights"] == "none"
    assert key in [c["key"] for c in api.get("/api/v1/judges").json()]
