"""The noise floor of a score: epochs over the same rows, per-row pass rates and flips, the floor against hand-computed
values, a paired delta set against it, and a gate that sets aside the rows that flip within a deployment's own epochs."""

import math
from collections import Counter

import pytest

from evals.actions import EvalConfigError, create_eval
from evals.benchmarks import gsm8k
from evals.comparison import compare_evals
from evals.models import Deployment
from evals.subset import select_rows
from evals.tasks import run_eval

from .fakes.openai_server import FakeOpenAI
from .test_cli import bv  # noqa: F401  (the fixture: bv against a live server)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("loopback_deployments")]
SEED = 5
QUESTIONS = [gsm8k.rows()[i] for i in select_rows(len(gsm8k.rows()), 4, SEED)]
# Each row's answers over three epochs (1 right, 0 wrong), in the order asked.
PATTERN_A = [[1, 1, 1], [0, 1, 0], [1, 0, 1], [0, 0, 0]]
PATTERN_B = [[1, 1, 1], [0, 0, 0], [1, 1, 1], [0, 0, 0]]


def scripted(pattern):
    asked = Counter()

    def answer(question):
        row = next(i for i, r in enumerate(QUESTIONS) if r.input == question)
        right = pattern[row][asked[question] % 3]
        asked[question] += 1
        return f"#### {QUESTIONS[row].reference if right else '-1'}"

    return answer


def run(project, owner, name, pattern, **options):
    with FakeOpenAI(answer=scripted(pattern)) as server:
        deployment = Deployment.objects.create(project=project, name=name, base_url=server.url, model=name)
        ev = create_eval(project, owner, deployment=deployment, benchmark="gsm8k", sample_limit=4, seed=SEED, epochs=3, **options)
        run_eval(ev.pk)
    ev.refresh_from_db()
    return ev


def test_epochs_give_each_row_its_pass_rate_and_the_eval_its_flip_rate_and_noise_floor(api, project, owner):
    ev = run(project, owner, "a", PATTERN_A)
    rows = {s.input: s for s in ev.samples.all()}
    assert [rows[r.input].score for r in QUESTIONS] == pytest.approx([1, 1 / 3, 2 / 3, 0])
    assert [rows[r.input].flipped for r in QUESTIONS] == [False, True, True, False]
    assert [c["score"] for c in rows[QUESTIONS[1].input].completions] == [0, 1, 0]
    assert ev.score == pytest.approx(0.5)
    noise = api.get(f"/api/v1/evals/{ev.pk}").json()["noise"]
    # By hand: per-row variances over 3 epochs (ddof 1) are 0, 1/3, 1/3, 0; SD of a run's score = sqrt(2/3) / 4.
    sd = math.sqrt(2 / 3) / 4
    assert (noise["epochs"], noise["n"], noise["flipped"], noise["flip_rate"]) == (3, 4, 2, 0.5)
    assert noise["epoch_scores"] == [0.5, 0.5, 0.5]
    assert noise["spread_sd"] == pytest.approx(sd) and noise["noise_floor"] == pytest.approx(1.959964 * math.sqrt(2) * sd, abs=1e-5)
    low, high = noise["noise_floor_ci"]
    assert 0 <= low <= noise["noise_floor"] <= high


def test_a_paired_delta_is_set_against_the_noise_floor_and_flaky_rows_can_be_set_aside(bv, project, owner):
    a = run(project, owner, "a", PATTERN_A)
    b = run(project, owner, "b", PATTERN_B, same_rows_as=a)
    result = compare_evals(a, b)
    assert result["delta"] == pytest.approx((1 + 0 + 1 + 0) / 4 - 0.5)  # 0: B is A without its flips
    assert result["noise"]["eval"] == a.pk and not result["noise"]["above"]
    assert result["set_aside"] == {"applied": False, "count": 0, "flaky_rows": sorted(s.row_index for s in a.samples.all() if s.flipped)}
    steady = compare_evals(a, b, set_aside_flaky=True)
    assert steady["n"] == 2 and steady["set_aside"]["count"] == 2 and steady["method"] == "newcombe"  # the rest are right/wrong
    shown = bv("evals", "compare", str(a.pk), str(b.pk), "--set-aside-flaky")
    assert shown.exit_code == 0 and "Set aside 2 rows that flipped within their own epochs" in shown.output and "Noise floor" in shown.output
    described = bv("evals", "show", str(a.pk))
    assert "2 of 4 rows flipped (50.0%)" in described.output


def test_epochs_do_not_mix_with_pass_at_k_or_log_likelihoods(project, owner):
    with FakeOpenAI() as server:
        chat = Deployment.objects.create(project=project, name="c", base_url=server.url, model="c")
        with pytest.raises(EvalConfigError, match="Choose epochs or samples_per_problem"):
            create_eval(project, owner, deployment=chat, benchmark="humaneval", samples_per_problem=5, epochs=3)
        with pytest.raises(EvalConfigError, match="epochs must be between 1 and 10"):
            create_eval(project, owner, deployment=chat, benchmark="gsm8k", epochs=11)
        completions = Deployment.objects.create(project=project, name="b", base_url=server.url, model="b", api_style="completions")
        with pytest.raises(EvalConfigError, match="epochs apply to generative evals"):
            create_eval(project, owner, deployment=completions, benchmark="mmlu", mode="loglikelihood", epochs=2)


# A steady A (one row flips, in one epoch of three) and a B right on every row of every epoch.
PATTERN_STEADY = [[0, 0, 0], [0, 0, 0], [0, 1, 0], [0, 0, 0]]
PATTERN_RIGHT = [[1, 1, 1]] * 4


def test_a_delta_beyond_the_noise_floor_is_above_it_and_one_inside_is_not(project, owner):
    steady = run(project, owner, "steady", PATTERN_STEADY)
    right = run(project, owner, "right", PATTERN_RIGHT, same_rows_as=steady)
    # By hand: row variances 0, 0, 1/3, 0, so the floor is 1.96 · √2 · √(1/3) / 4 ≈ 0.40; B's own floor is 0.
    floor = 1.959964 * math.sqrt(2) * math.sqrt(1 / 3) / 4
    up = compare_evals(steady, right)
    assert up["delta"] == pytest.approx(1 - 1 / 12) and up["noise"]["noise_floor"] == pytest.approx(floor, abs=1e-5)
    assert up["noise"]["eval"] == steady.pk and up["noise"]["above"] is True
    down = compare_evals(right, steady)  # the same distance the other way: beyond the floor too
    assert down["delta"] == pytest.approx(1 / 12 - 1) and down["noise"]["above"] is True
    # PATTERN_A's floor (≈ 0.57) holds a delta of 0.5: what rerunning A could produce, not above.
    flaky = run(project, owner, "flaky", PATTERN_A)
    inside = compare_evals(flaky, run(project, owner, "right-again", PATTERN_RIGHT, same_rows_as=flaky))
    assert inside["delta"] == pytest.approx(0.5) and inside["noise"]["noise_floor"] == pytest.approx(0.5657, abs=1e-4)
    assert inside["noise"]["above"] is False
