"""Errors are retried, not rescored: only the errored rows are asked again, each keeps its attempts, and tokens and cost
add up over them; an eval re-scored from its stored outputs asks the deployment nothing."""

from decimal import Decimal

import pytest

from evals.actions import EvalBusy, EvalConfigError, create_eval, rescore_eval, retry_errors
from evals.benchmarks import gsm8k
from evals.benchmarks.base import Score
from evals.datasets.versions import create_dataset
from evals.models import CacheMode, Deployment, Eval, SampleAttempt
from evals.subset import select_rows
from evals.tasks import run_eval

from .fakes.openai_server import FakeOpenAI

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("loopback_deployments")]
REFERENCES = {row.input: row.reference for row in gsm8k.rows()}
CAPITALS = b'{"input": "Capital of France?", "expected": "Paris"}\n{"input": "Capital of Spain?", "expected": "Madrid"}\n{"input": "Capital of Peru?", "expected": "Lima"}\n'


@pytest.fixture
def fake():
    with FakeOpenAI(answer=lambda text: f"So\n#### {REFERENCES.get(text, '0')}") as server:
        yield server


@pytest.fixture
def deployment(project, fake):
    return Deployment.objects.create(project=project, name="fake", base_url=fake.url, model="m", input_price_per_million=Decimal(1000))


def test_only_the_errored_rows_are_asked_again_and_their_attempts_are_kept(api, owner_client, project, owner, fake, deployment, settings):
    settings.EVAL_RETRY_BASE_SECONDS = 0.01
    settings.MAX_ERROR_FRACTION = 0.1
    # Two rows' requests fail (503, every attempt): infrastructure errors, out of the score.
    failing = [gsm8k.rows()[i].input for i in select_rows(len(gsm8k.rows()), 12, 4)[3:5]]
    for question in failing:
        fake.always_fail[question] = 503
    ev = create_eval(project, owner, deployment=deployment, benchmark="gsm8k", sample_limit=12, seed=4)
    run_eval(ev.pk)
    ev.refresh_from_db()
    assert (ev.status, ev.done_count, ev.error_count, ev.score) == ("failed", 12, 2, 1.0)  # 2 of 12: past a tenth
    page = owner_client.get(f"/evals/{ev.pk}/").content.decode()
    assert "Retry the 2 errored samples" in page
    fake.always_fail.clear()
    requests_before, tokens_before = len(fake.requests), ev.prompt_tokens
    retried = api.post(f"/api/v1/evals/{ev.pk}/retry-errors")
    assert retried.status_code == 200 and retried.json()["retried"] == 2
    run_eval(ev.pk)
    ev.refresh_from_db()
    assert (ev.status, ev.done_count, ev.error_count) == ("succeeded", 12, 0)
    again = [r["body"]["messages"][-1]["content"] for r in fake.requests[requests_before:]]
    assert sorted(again) == sorted(failing)  # nothing else was asked
    attempts = SampleAttempt.objects.filter(eval=ev)
    assert attempts.count() == 2 and all("HTTP 503" in a.error for a in attempts)
    body = api.get(f"/api/v1/evals/{ev.pk}/samples").json()["results"]
    tried = [s for s in body if s["attempts"]]
    assert len(tried) == 2 and "HTTP 503" in tried[0]["attempts"][0]["error"]
    assert ev.prompt_tokens > tokens_before and ev.cost == deployment.cost(ev.prompt_tokens, ev.completion_tokens)
    nothing = api.post(f"/api/v1/evals/{ev.pk}/retry-errors")
    assert nothing.status_code == 400 and "no errored samples" in nothing.json()["detail"]


def test_an_errored_try_that_spent_tokens_keeps_counting_them(project, owner, fake, deployment):
    """A judge that answers without a verdict: the row is an error whose tokens (the deployment's and the judge's) count."""
    with FakeOpenAI(answer=lambda text: "CORRECT" if "Paris" in text.split("Candidate answer:")[-1] else "Hard to say") as judge_server:
        judge = Deployment.objects.create(project=project, name="judge", base_url=judge_server.url, model="j", input_price_per_million=Decimal(1000))
        fake.answer = lambda text: "Paris" if "France" in text else "Hmm"
        dataset = create_dataset(project, owner, "capitals", CAPITALS)
        # Bypassing the response cache: the retry asks the deployment again (with it, the retry is the judge's alone).
        ev = create_eval(
            project, owner, deployment=deployment, dataset=dataset, scorers=[{"name": "llm_judge", "deployment": judge.pk}], cache=CacheMode.BYPASS
        )
        run_eval(ev.pk)
        ev.refresh_from_db()
        assert (ev.done_count, ev.error_count) == (3, 2)
        first = {"prompt": ev.prompt_tokens, "judge": ev.judge_prompt_tokens, "cost": ev.cost}
        judge_server.answer = lambda text: "INCORRECT"
        assert retry_errors(ev) == 2
        run_eval(ev.pk)
    ev.refresh_from_db()
    assert (ev.error_count, ev.score) == (0, pytest.approx(1 / 3))
    errored = SampleAttempt.objects.filter(eval=ev)
    assert all(a.prompt_tokens and a.judge_prompt_tokens for a in errored) and all("without a grade" in a.error for a in errored)
    retried_tokens = sum(a.prompt_tokens for a in errored)
    assert ev.prompt_tokens == sum(s.prompt_tokens for s in ev.samples.all()) + retried_tokens
    assert ev.prompt_tokens > first["prompt"] and ev.judge_prompt_tokens > first["judge"] and ev.cost > first["cost"]


def test_a_running_eval_is_not_retried_or_rescored(project, owner, deployment):
    ev = create_eval(project, owner, deployment=deployment, benchmark="gsm8k", sample_limit=3)
    with pytest.raises(EvalBusy, match="is queued"):
        retry_errors(ev)
    with pytest.raises(EvalBusy, match="re-score it once it ends"):
        rescore_eval(ev, owner)


def test_rescoring_asks_the_deployment_nothing_and_a_changed_scorer_takes_effect(api, project, owner, fake, deployment, monkeypatch):
    ev = create_eval(project, owner, deployment=deployment, benchmark="gsm8k", sample_limit=15)
    run_eval(ev.pk)
    ev.refresh_from_db()
    asked = len(fake.requests)

    async def stricter(self, row, output, sandbox=None):
        # A scorer that changed: only an answer after '####' with a line of working before it counts.
        return Score(float(output.startswith("So\n") and output.endswith(f"#### {row.reference}") and row.reference.endswith("0")), "")

    monkeypatch.setattr(type(gsm8k.BENCHMARK), "score", stricter)
    created = api.post(f"/api/v1/evals/{ev.pk}/rescore")
    assert created.status_code == 201, created.content
    rescored = Eval.objects.get(pk=created.json()["id"])
    run_eval(rescored.pk)
    rescored.refresh_from_db()
    assert len(fake.requests) == asked  # the deployment was not asked again
    assert (rescored.rescored_from_id, rescored.same_rows_as_id, rescored.done_count) == (ev.pk, ev.pk, 15)
    assert rescored.prompt_tokens == rescored.completion_tokens == 0 and rescored.cost in (None, 0)
    expected = sum(1 for s in ev.samples.all() if s.reference.endswith("0")) / 15
    assert rescored.score == pytest.approx(expected) and ev.score == 1.0
    assert list(rescored.samples.values_list("output", flat=True)) == list(ev.samples.values_list("output", flat=True))
    assert api.get(f"/api/v1/evals/{rescored.pk}").json()["rescored_from"] == ev.pk
    # Its outputs were made by the source's stack: so says its stamp.
    assert rescored.serving_stack == ev.serving_stack and ev.serving_stack["server"][0].startswith("Python/")


def test_a_loglikelihood_eval_is_rerun_not_rescored(project, owner):
    with FakeOpenAI() as server:
        completions = Deployment.objects.create(project=project, name="base", base_url=server.url, model="b", api_style="completions")
        ev = Eval.objects.create(project=project, deployment=completions, benchmark="mmlu", mode="loglikelihood", seed=1, status="succeeded")
        with pytest.raises(EvalConfigError, match="run it again instead"):
            rescore_eval(ev, owner)
