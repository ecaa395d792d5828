"""MT-Bench with a scripted judge: two turns asked as a conversation, FastChat's judge prompts, 1-10 ratings per turn and
category, an unparseable verdict counted as an error, the judge's tokens in the cost, a judge grading itself warned, and
the labels that make a judge's calibration card."""

import hashlib
import json
import threading
from collections import Counter
from decimal import Decimal

import pytest

from evals.actions import EvalConfigError, create_eval, retry_errors
from evals.benchmarks import mt_bench
from evals.models import Deployment, Eval, JudgeLabel, Sample
from evals.scoring.calibration import CALIBRATED_AT, NOT_CALIBRATED, card, cohen_kappa, judge_key_of
from evals.scoring.judge import rating_1_to_10
from evals.tasks import run_eval

from .fakes.openai_server import FakeOpenAI
from .test_cli import bv  # noqa: F401  (the fixture: bv against a live server)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("loopback_deployments")]
ROWS = mt_bench.BENCHMARK.rows()
UNRATED = ROWS[3].input  # the judge answers this question's first turn without a rating


def model_reply(body: dict) -> dict:
    """Turn 1: "first answer to …"; turn 2 (the first answer before it): "second answer, after …"."""
    messages = body["messages"]
    if len(messages) == 1:
        return {"role": "assistant", "content": f"first answer to {messages[0]['content'][:30]}"}
    return {"role": "assistant", "content": f"second answer, after {messages[1]['content'][:20]}"}


def judge_reply(body: dict) -> dict:
    prompt = body["messages"][-1]["content"]
    if "<|The Start of Assistant A's Conversation with User|>" in prompt:
        return {"role": "assistant", "content": "The follow-up is thinner. Rating: [[6]]"}
    if UNRATED in prompt:
        return {"role": "assistant", "content": "I would rather not grade this one."}
    return {"role": "assistant", "content": "Helpful and correct. Rating: [[8]]"}


@pytest.fixture
def model():
    with FakeOpenAI(reply=model_reply) as server:
        yield server


@pytest.fixture
def judge_server():
    with FakeOpenAI(reply=judge_reply) as server:
        yield server


@pytest.fixture
def deployments(project, model, judge_server):
    return (
        Deployment.objects.create(project=project, name="model", base_url=model.url, model="m", input_price_per_million=Decimal(1)),
        Deployment.objects.create(
            project=project, name="judge", base_url=judge_server.url, model="j", input_price_per_million=Decimal(10), output_price_per_million=Decimal(30)
        ),
    )


@pytest.fixture
def judged(project, owner, deployments):
    deployment, judge = deployments
    ev = create_eval(project, owner, deployment=deployment, benchmark="mt_bench", judge=judge)
    run_eval(ev.pk)
    ev.refresh_from_db()
    return ev


def test_it_has_fastchats_80_questions_and_judge_prompts():
    assert len(ROWS) == 80 and {row.categories["category"] for row in ROWS} == set(mt_bench.TEMPERATURE)
    assert mt_bench.BENCHMARK.describe()["rows"] == 80 and mt_bench.BENCHMARK.version().startswith("sha256:")
    math = next(row for row in ROWS if row.categories["category"] == "math")
    first = mt_bench.judge_messages(math, ["a1", "a2"], 1, mt_bench.judge_prompts())
    second = mt_bench.judge_messages(math, ["a1", "a2"], 2, mt_bench.judge_prompts())
    assert "[The Start of Reference Answer]\n" + math["reference_turns"][0] in first[1]["content"] and first[0]["content"] == "You are a helpful assistant."
    assert "### Reference answer:\n" + math["reference_turns"][1] in second[1]["content"] and "### Assistant A:\na2" in second[1]["content"]
    writing = next(row for row in ROWS if row.categories["category"] == "writing")
    assert "Reference" not in mt_bench.judge_messages(writing, ["a1", "a2"], 1, mt_bench.judge_prompts())[1]["content"]


@pytest.mark.parametrize(
    "text, rating", [("Rating: [[7]]", 7.0), ("[[8.5]]", 8.5), ("I give it [9]", 9.0), ("[[11]]", None), ("Rating: 7", None), ("no grade", None)]
)
def test_ratings_are_read_as_fastchat_reads_them(text, rating):
    assert rating_1_to_10(text) == rating


def test_both_turns_are_rated_and_an_unparseable_verdict_is_an_error_not_a_zero(judged, model, judge_server, deployments):
    assert judged.status == "succeeded" and judged.done_count == 80 and judged.error_count == 1
    unrated = Sample.objects.get(eval=judged, input=UNRATED)
    assert unrated.score is None and "answered without a grade" in unrated.error and unrated.judge_prompt_tokens > 0
    assert judged.score == 7.0 and judged.score_interval == [7.0, 7.0]  # (8 + 6) / 2 on every scored row
    # The second turn is asked with the model's own first answer before it.
    second = next(r["body"]["messages"] for r in model.requests if len(r["body"]["messages"]) == 3)
    assert second[1]["content"].startswith("first answer to") and second[2]["content"] in {row["turns"][1] for row in ROWS}
    assert {r["body"]["temperature"] for r in model.requests} == {0.0, 0.1, 0.7}  # FastChat's per category
    sample = Sample.objects.filter(eval=judged, error="").first()
    assert [turn["rating"] for turn in sample.scores["turns"]] == [8, 6] and "thinner" in sample.scores["turns"][1]["judgement"]


def test_scores_per_category_and_per_turn_with_intervals(api, judged):
    body = api.get(f"/api/v1/evals/{judged.pk}").json()
    categories = {c["name"]: c for c in body["categories"]["category"]}
    assert set(categories) == set(mt_bench.TEMPERATURE) and sum(c["n"] for c in categories.values()) == 79
    assert all(c["score"] == 7.0 for c in categories.values())
    metrics = {m["name"]: m for m in body["metrics"]}
    assert (metrics["both turns"]["score"], metrics["turn 1"]["score"], metrics["turn 2"]["score"]) == (7.0, 8.0, 6.0)
    assert metrics["turn 1"]["n"] == metrics["turn 2"]["n"] == 79 and metrics["both turns"]["headline"]


def test_the_judges_tokens_count_in_cost_and_max_cost(judged, deployments, judge_server):
    deployment, judge = deployments
    asked = len(judge_server.requests)
    assert asked >= 160  # two turns a question, some asked twice for the judge's self-consistency
    assert judged.judge_prompt_tokens > 0 and judged.judge_completion_tokens > 0
    expected = deployment.cost(judged.prompt_tokens, judged.completion_tokens) + judge.cost(judged.judge_prompt_tokens, judged.judge_completion_tokens)
    assert judged.cost == expected and judge.cost(judged.judge_prompt_tokens, judged.judge_completion_tokens) > 0


def test_the_judge_being_the_deployment_under_test_is_warned(api, owner_client, project, owner, deployments):
    deployment, judge = deployments
    ev = create_eval(project, owner, deployment=judge, benchmark="mt_bench", judge=judge, sample_limit=2)
    warnings = api.get(f"/api/v1/evals/{ev.pk}").json()["warnings"]
    assert any("The judge is the deployment under test (judge)" in w for w in warnings) and NOT_CALIBRATED in warnings
    assert "The judge is the deployment under test" in owner_client.get(f"/evals/{ev.pk}/").content.decode()
    with pytest.raises(EvalConfigError, match="graded by an LLM judge"):
        create_eval(project, owner, deployment=deployment, benchmark="mt_bench")
    with pytest.raises(EvalConfigError, match="gsm8k is not judged"):
        create_eval(project, owner, deployment=deployment, benchmark="gsm8k", judge=judge)


def test_a_retried_error_is_judged_again_and_its_first_try_still_costs(judged, judge_server):
    before = judged.judge_prompt_tokens
    judge_server.reply = lambda body: {"role": "assistant", "content": "Rating: [[5]]"}
    assert retry_errors(judged) == 1
    run_eval(judged.pk)
    judged.refresh_from_db()
    assert judged.error_count == 0 and Sample.objects.get(eval=judged, input=UNRATED).score == 5.0
    assert judged.judge_prompt_tokens > before and judged.attempts.get().error.startswith("The judge (judge) answered without a grade")


def test_people_label_verdicts_and_the_card_shows_agreement_and_self_consistency(api, owner_client, judged, owner, bv):
    key = judge_key_of(judged)
    samples = list(Sample.objects.filter(eval=judged, error="").order_by("row_index"))
    # People: agree on turn 1 of some rows, grade turn 2 themselves (a point lower) on others.
    for sample in samples[:20]:
        assert api.post(f"/api/v1/evals/{judged.pk}/label", {"row_index": sample.row_index, "turn": 1, "agree": True}, format="json").status_code == 200
    for sample in samples[20:29]:
        assert api.post(f"/api/v1/evals/{judged.pk}/label", {"row_index": sample.row_index, "turn": 2, "value": 5}, format="json").status_code == 200
    refused = api.post(f"/api/v1/evals/{judged.pk}/label", {"row_index": samples[0].row_index, "turn": 1, "agree": False}, format="json")
    assert refused.status_code == 400 and "give your own" in refused.json()["detail"]
    off_scale = api.post(f"/api/v1/evals/{judged.pk}/label", {"row_index": samples[0].row_index, "value": 11}, format="json")
    assert off_scale.status_code == 400 and "1 to 10" in off_scale.json()["detail"]
    shown = card(judged.project, key)
    judge_grades, human_grades = [8.0] * 20 + [6.0] * 9, [8.0] * 20 + [5.0] * 9
    assert shown["n"] == 29 and not shown["calibrated"] and shown["weights"] == "quadratic"
    assert shown["kappa"] == pytest.approx(cohen_kappa(judge_grades, human_grades, "quadratic"))
    assert shown["base_rate"]["human_mode"] == 8.0 and shown["base_rate"]["human_mode_share"] == pytest.approx(20 / 29)
    repeats = shown["self_consistency"]
    assert repeats["n"] > 0 and repeats["exact_agreement"] == 1.0  # the scripted judge always says the same
    page = owner_client.get(f"/evals/{judged.pk}/").content.decode()
    assert NOT_CALIBRATED in page and "29 of 30 labels" in page
    # The 30th label calibrates it, by the page's form this time; the same person labelling again replaces, not adds.
    row = samples[29].row_index
    owner_client.post(f"/evals/{judged.pk}/label/", {"row_index": row, "turn": 1, "label": "grade", "value": "7"})
    owner_client.post(f"/evals/{judged.pk}/label/", {"row_index": row, "turn": 1, "label": "agree"})
    assert JudgeLabel.objects.filter(sample__row_index=row, sample__eval=judged).get().value == 8.0
    assert card(judged.project, key)["calibrated"] and CALIBRATED_AT == 30
    assert "warnings" in (body := api.get(f"/api/v1/evals/{judged.pk}").json()) and body["warnings"] == []
    cards = api.get("/api/v1/judges").json()
    assert [c["key"] for c in cards] == [key] and cards[0]["n"] == 30
    assert "calibrated" in owner_client.get("/evals/judges/").content.decode()
    assert json.loads(json.dumps(cards)) == cards  # plain JSON
    assert json.loads(bv("judges", "list", "--json").stdout) == cards
    listed = bv("judges", "list")
    assert listed.exit_code == 0 and "judge" in listed.output and "30" in listed.output and "yes" in listed.output


def test_an_unreachable_judge_refuses_the_eval(project, owner, deployments, settings):
    settings.EVAL_RETRY_BASE_SECONDS = 0.01
    deployment, _ = deployments
    down = Deployment.objects.create(project=project, name="down", base_url="http://127.0.0.1:9/v1", model="j")
    with pytest.raises(EvalConfigError, match="The judge deployment down cannot be reached"):
        create_eval(project, owner, deployment=deployment, benchmark="mt_bench", judge=down)
    assert not Eval.objects.exists()


def test_a_judge_that_changes_its_mind_shows_the_share_of_repeats_it_agreed_with(project, owner, model):
    # The rows judged twice (one in ten, by their id's hash); on the first three of them the judge grades turn 2
    # a 6 the first time it is asked and a 3 the second: 3 of the repeats' pairs disagree.
    repeated = [row for row in ROWS if int(hashlib.sha256(row.id.encode()).hexdigest(), 16) % mt_bench.REPEAT_EVERY == 0]
    fickle = {row["turns"][0] for row in repeated[:3]}
    asked, lock = Counter(), threading.Lock()

    def changes_its_mind(body):
        prompt = body["messages"][-1]["content"]
        if "<|The Start of Assistant A's Conversation with User|>" not in prompt:
            return {"role": "assistant", "content": "Rating: [[8]]"}
        with lock:
            asked[prompt] += 1
            again = asked[prompt] > 1
        mind_changed = again and any(question in prompt for question in fickle)
        return {"role": "assistant", "content": "Rating: [[3]]" if mind_changed else "Rating: [[6]]"}

    with FakeOpenAI(reply=changes_its_mind) as judge_server:
        deployment = Deployment.objects.create(project=project, name="model", base_url=model.url, model="m")
        judge = Deployment.objects.create(project=project, name="fickle", base_url=judge_server.url, model="j")
        ev = create_eval(project, owner, deployment=deployment, benchmark="mt_bench", judge=judge)
        run_eval(ev.pk)
    ev.refresh_from_db()
    assert ev.error_count == 0 and len(repeated) == 9
    repeats = card(project, judge_key_of(ev))["self_consistency"]
    assert repeats["n"] == 18  # both turns of each repeated row
    assert repeats["exact_agreement"] == pytest.approx(15 / 18)
    assert repeats["kappa"] < 1


def test_a_priced_judges_spend_alone_stops_the_eval_at_its_max_cost(project, owner, model, judge_server):
    """The deployment under test has no prices: only the judge's tokens can reach the budget."""
    free = Deployment.objects.create(project=project, name="free", base_url=model.url, model="m", max_in_flight=1)
    judge = Deployment.objects.create(
        project=project, name="judge", base_url=judge_server.url, model="j", input_price_per_million=Decimal(10), output_price_per_million=Decimal(30)
    )
    budget = Decimal("0.02")
    ev = create_eval(project, owner, deployment=free, benchmark="mt_bench", judge=judge, max_cost=budget)
    run_eval(ev.pk)
    ev.refresh_from_db()
    assert ev.status == "cancelled" and ev.status_message.startswith(f"Cancelled: budget reached (${ev.cost} of ${ev.max_cost})")
    samples = list(Sample.objects.filter(eval=ev))
    row_costs = [judge.cost(s.judge_prompt_tokens or 0, s.judge_completion_tokens or 0) for s in samples]
    assert free.cost(ev.prompt_tokens, ev.completion_tokens) is None and ev.cost == sum(row_costs) == judge.cost(
        ev.judge_prompt_tokens, ev.judge_completion_tokens
    )
    # Without the judge's spend it would judge all 80 questions (about $0.30): it stops a few rows past $0.02, the rows
    # whose answers were in when the budget was crossed (their judging is not cut short), and every one stored is judged.
    assert budget <= ev.cost < 3 * budget and 1 < ev.done_count == len(samples) < 20
    assert len(judge_server.requests) < 2 * 20 and all(s.judge_prompt_tokens for s in samples)
