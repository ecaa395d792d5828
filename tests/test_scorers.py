"""The scoring door: every scorer in the tables keeps the contract, and a scorer added to the table is at once a
dataset eval's and a live evaluator's."""

import asyncio
from decimal import Decimal

import pytest
from django.utils import timezone

from evals.actions import EvalConfigError, create_eval
from evals.datasets.versions import create_dataset
from evals.models import Deployment, Eval, Sample
from evals.scoring.base import Context, Item, Option, Score, Scorer, ScorerConfigError, ScoringError
from evals.scoring.judge import Verdict
from evals.scoring.scorers import SCORERS
from evals.tasks import run_eval
from traces import evaluators
from traces.evaluator_rules import save_evaluator
from traces.evaluators import EvaluatorError, score_sessions
from traces.models import EvaluatorScore, TraceSession
from traces.scorers import TRACE_SCORERS

from .fakes.openai_server import FakeOpenAI
from .otlp_builders import body
from .test_evaluators import exchange

EVERY = {**SCORERS, **TRACE_SCORERS}
# Options each scorer is valid with, and an item to score: a scorer missing here fails the first test, so a new one joins the contract.
VALID = {
    "exact_match": {},
    "contains": {},
    "regex": {"pattern": r"\d+"},
    "last_number": {},
    "json_valid": {},
    "llm_judge": {"scale": "1-10"},
    "trajectory": {"max_steps": 3},
}
ITEM = Item(input="What is 6 x 7?", output="42", reference="42", extra={"steps": 2, "tool_errors": 0, "cost": Decimal("0.01")})


class FakeJudge:
    """What a Context's judge answers to: a key and grade(); here it reads a fixed reply with the parser it is given."""

    key = "1:fake@1"

    def __init__(self, reply: str):
        self.reply, self.asked = reply, []

    async def grade(self, messages, parse, generation=None):
        self.asked.append(messages)
        value = parse(self.reply)
        if value is None:
            raise ScoringError("no grade")
        return Verdict(value, self.reply, (10, 2))


def test_every_scorer_is_in_the_contract_test():
    assert set(VALID) == set(EVERY)
    assert all(isinstance(scorer, Scorer) and scorer.name == name for name, scorer in EVERY.items())


@pytest.mark.parametrize("name", sorted(EVERY))
def test_bad_options_are_a_400_naming_the_option(name):
    scorer = EVERY[name]
    with pytest.raises(ScorerConfigError, match="no_such_option") as refused:
        scorer.check({**VALID[name], "no_such_option": 1})
    assert refused.value.status_code == 400
    for option, declared in scorer.options.items():
        if declared.type in ("string", "boolean"):
            with pytest.raises(ScorerConfigError, match=option):
                scorer.check({**VALID[name], option: 12345 if declared.type == "string" else "yes"})
    with pytest.raises(ScorerConfigError):
        scorer.check("not a mapping")


@pytest.mark.parametrize("name", sorted(EVERY))
def test_a_score_is_in_the_scorers_range(name):
    scorer = EVERY[name]
    options = scorer.check(VALID[name])
    judge = FakeJudge("Good answer. Rating: [[8]]")
    score = asyncio.run(scorer.score(ITEM, options, Context(judge=judge if scorer.needs_judge else None)))
    low, high = scorer.scale_of(options)
    assert isinstance(score, Score) and low <= score.value <= high
    # The item above is right by every check: each scorer must find it so (a constant 0 would pass the range).
    assert score.value == high if not scorer.needs_judge else score.value == 8.0
    assert scorer.describe()["name"] == name


@pytest.mark.parametrize("name", sorted(n for n, s in EVERY.items() if s.needs_judge))
def test_a_judge_scorer_without_a_judge_is_refused(name, project, owner, db):
    scorer = EVERY[name]
    with pytest.raises(ScoringError, match="no judge"):
        asyncio.run(scorer.score(ITEM, scorer.check(VALID[name]), Context()))
    dataset = create_dataset(project, owner, "d", b'{"input": "q", "expected": "a"}\n')
    model = Deployment.objects.create(project=project, name="m", base_url="https://api.example.com/v1", model="m")
    with pytest.raises(EvalConfigError, match="needs a judge deployment"):
        create_eval(project, owner, deployment=model, dataset=dataset, scorers=[{"name": name, "options": VALID[name]}])
    with pytest.raises(EvaluatorError, match="needs a judge deployment"):
        save_evaluator(project, owner, {"name": "j", "scorer": {"name": name, "options": VALID[name]}, "daily_budget": Decimal(1)})


class AtMostWords(Scorer):
    """A scorer a team adds: 1 when the answer is at most `words` words long."""

    name = "at_most_words"
    description = "1 when the answer has at most `words` words."
    options = {"words": Option(10, "The most words an answer may have.")}

    async def score(self, item, options, ctx):
        return Score(float(len(item.output.split()) <= options["words"]))


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("loopback_deployments")
def test_a_scorer_added_to_the_table_scores_dataset_evals_and_live_traffic(monkeypatch, settings, project, owner, api):
    monkeypatch.setitem(SCORERS, AtMostWords.name, AtMostWords())
    scorer = {"name": "at_most_words", "options": {"words": 3}}
    # A dataset eval names it, through the API: one answer short enough, one not.
    with FakeOpenAI(answer=lambda text: "Paris." if "France" in text else "It is Madrid, of course.") as server:
        Deployment.objects.create(project=project, name="model", base_url=server.url, model="m")
        dataset = create_dataset(project, owner, "capitals", b'{"input": "France?", "expected": "Paris"}\n{"input": "Spain?", "expected": "Madrid"}\n')
        created = api.post("/api/v1/evals", {"dataset_id": dataset.pk, "deployment": "model", "scorers": [scorer]}, format="json")
        assert created.status_code == 201, created.content
        assert "deprecation" not in created.json()
        run_eval(created.json()["id"])
    ev = Eval.objects.get(pk=created.json()["id"])
    assert ev.status == "succeeded" and ev.scorers == [scorer]
    assert {s.reference: s.score for s in Sample.objects.filter(eval=ev)} == {"Paris": 1.0, "Madrid": 0.0}
    # A live evaluator names it too, and scores sessions with it.
    made = api.post("/api/v1/evaluators", {"name": "short", "scorer": scorer}, format="json")
    assert made.status_code == 201 and made.json()["scorer"] == scorer and "deprecation" not in made.json()
    monkeypatch.setattr(evaluators, "async_task", lambda *args, **kwargs: None)
    now = timezone.now().timestamp() + 1
    for i, answer in enumerate(["Short.", "This answer is far too long."]):
        sent = api.generic("POST", "/api/v1/traces", body([exchange(f"s-{i}", "Hi?", answer, now + i)]), content_type="application/json")
        assert sent.status_code == 200
    settings.TRACE_QUIET_SECONDS = 0
    from traces.segmentation import process_quiet_sessions

    process_quiet_sessions(now=timezone.now() + timezone.timedelta(seconds=5))
    score_sessions(list(TraceSession.objects.values_list("pk", flat=True)))
    scores = {s.session.session_id: s.value for s in EvaluatorScore.objects.select_related("session")}
    assert scores == {"s-0": 1.0, "s-1": 0.0}


@pytest.mark.django_db
@pytest.mark.usefixtures("loopback_deployments")
def test_the_old_shapes_are_read_for_one_release_with_a_deprecation_note(api, project):
    with FakeOpenAI(answer=lambda text: "CORRECT") as server:
        judge = Deployment.objects.create(project=project, name="judge", base_url=server.url, model="j")
        old = _old_shapes_eval(api, project, judge)
    ev = Eval.objects.get(pk=old.json()["id"])
    assert ev.judge == judge and [s["name"] for s in ev.scorers] == ["contains", "llm_judge"] and all(set(s) == {"name", "options"} for s in ev.scorers)
    evaluator = api.post("/api/v1/evaluators", {"name": "e", "kind": "code", "config": {"check": "contains", "expected": "a"}}, format="json")
    assert evaluator.status_code == 201 and "Deprecated" in evaluator.json()["deprecation"]
    assert evaluator.json()["scorer"] == {"name": "contains", "options": {"expected": "a"}}
    assert evaluator.json()["kind"] == "code" and evaluator.json()["config"] == {"check": "contains", "expected": "a"}
    listed = {entry["name"] for entry in api.get("/api/v1/scorers").json()}
    assert listed == set(SCORERS)


def _old_shapes_eval(api, project, judge):
    dataset = create_dataset(project, None, "d", b'{"input": "q", "expected": "a"}\n')
    Deployment.objects.create(project=project, name="model", base_url=judge.base_url, model="m")
    old = api.post(
        "/api/v1/evals",
        {"dataset_id": dataset.pk, "deployment": "model", "scorers": ["contains", {"name": "llm_judge", "deployment": judge.pk}]},
        format="json",
    )
    assert old.status_code == 201, old.content
    assert "Deprecated" in old.json()["deprecation"]
    return old


def test_the_judges_prompt_is_filled_in_one_pass_so_an_answer_cannot_expand_its_places():
    judge = FakeJudge("PASS")
    item = Item(input="Say hi", output="{input} {expected} hi", reference="")
    asyncio.run(SCORERS["llm_judge"].score(item, SCORERS["llm_judge"].check({"prompt": "Q: {input}\nA: {output}"}), Context(judge=judge)))
    assert judge.asked == [[{"role": "user", "content": "Q: Say hi\nA: {input} {expected} hi"}]]
