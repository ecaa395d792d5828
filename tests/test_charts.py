"""Numbers people look at: axes at round ticks with their units and dates, intervals drawn where a caption promises
them, a score card that leads with the score, its interval and chance, and a comparison's delta drawn against zero."""

import re
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from belvedir.core.charts import Series, delta_bar, line_chart, nice_ticks, tick_text
from evals.models import Deployment, Eval

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("low", "high", "ticks"),
    [
        (0, 0.47, [0, 0.2, 0.4, 0.6]),
        (0.31, 0.47, [0.3, 0.35, 0.4, 0.45, 0.5]),
        (0, 1, [0, 0.25, 0.5, 0.75, 1]),
        (0, 237, [0, 100, 200, 300]),
        (3, 3, [3, 3.25, 3.5, 3.75, 4]),
    ],
)
def test_ticks_are_round_values_that_cover_the_data(low, high, ticks):
    found = nice_ticks(low, high)
    assert found == pytest.approx(ticks)
    assert found[0] <= low and found[-1] >= high


def test_tick_labels_carry_the_decimals_their_step_needs():
    assert [tick_text(t, [0, 0.25, 0.5]) for t in (0, 0.25, 0.5)] == ["0.00", "0.25", "0.50"]
    assert [tick_text(t, [0, 100, 200]) for t in (0, 1000)] == ["0", "1,000"]
    assert tick_text(0.4, [0, 0.2, 0.4]) == "0.4"


def test_a_line_over_time_has_dates_on_its_axis_its_unit_and_round_ticks():
    start = datetime(2026, 11, 20, 9, 30)
    points = [(start + timedelta(days=d), v) for d, v in ((0, 0.375), (3, 0.469), (9, 0.41))]
    svg = str(line_chart([Series("gsm8k", points, intervals=[(0.3, 0.45), (0.4, 0.53), (0.35, 0.47)], labels=["#1", "#2", "#3"])], y_label="accuracy"))
    texts = re.findall(r"<text[^>]*>([^<]+)</text>", svg)
    assert texts[0] == "accuracy"
    assert {"0.0", "0.2", "0.4", "0.6"} <= set(texts) and "0.375" not in texts and "0.469" not in texts
    assert [t for t in texts if t.startswith("Nov")] == ["Nov 22", "Nov 24", "Nov 26", "Nov 28"]  # midnights across the nine days
    assert svg.count('stroke-width="3" opacity="0.35"') == 3  # an interval per point
    assert "<title>#2 2026-11-23 09:30: 0.469</title>" in svg and 'aria-label="accuracy over time"' in svg
    # Placed by time: the third point, six days after the second, lies twice as far from it as the second from the first.
    xs = [float(x) for x in re.findall(r'<circle cx="([\d.]+)"', svg)]
    assert xs[2] - xs[1] == pytest.approx(2 * (xs[1] - xs[0]), rel=0.01)


def test_a_line_by_seconds_labels_its_x_axis():
    svg = str(line_chart([Series("in flight", [(0.0, 4), (12.5, 16), (30.0, 12)])], y_label="requests in flight", x_label="seconds into the pass", dots=False))
    texts = re.findall(r"<text[^>]*>([^<]+)</text>", svg)
    assert "seconds into the pass" in texts and {"0", "10", "20", "30"} <= set(texts)


def test_a_delta_is_drawn_against_zero_in_its_verdicts_colour():
    worse = str(delta_bar(-0.12, [-0.2, -0.04], "worse"))
    assert "#c92a2a" in worse and "no difference 0" in worse
    assert "#237032" in str(delta_bar(0.1, [0.02, 0.18], "better"))
    assert "#667085" in str(delta_bar(0.01, [-0.05, 0.07], "not decisive"))


def scored(project, owner, benchmark, score, low, high, **fields):
    deployment = Deployment.objects.get_or_create(project=project, name="d", defaults={"base_url": "http://127.0.0.1:9/v1", "model": "m"})[0]
    fields = {"status": "succeeded", "done_count": 200, "total": 200, **fields}
    return Eval.objects.create(
        project=project, deployment=deployment, benchmark=benchmark, seed=1, score=score, score_low=low, score_high=high, created_by=owner, **fields
    )


@pytest.mark.parametrize(
    ("benchmark", "score", "bounds", "words"),
    [
        ("hellaswag", 0.305, (0.245, 0.372), "includes chance (0.25)"),  # the local model's, measured on 200 rows
        ("mmlu", 0.31, (0.26, 0.37), "Above chance (0.25) by its whole 95% interval."),
        ("arc_challenge", 0.205, (0.155, 0.266), "includes chance (0.25): on these rows the model is not shown to do better than guessing."),
        ("winogrande", 0.48, (0.41, 0.55), "includes chance (0.5)"),
        ("gsm8k", 0.0, (0.0, 0.018), "includes 0: on these rows the model is not shown to get any right."),
    ],
)
def test_the_score_card_leads_with_the_score_its_interval_drawn_and_chance_in_words(owner_client, project, owner, benchmark, score, bounds, words):
    ev = scored(project, owner, benchmark, score, *bounds, cost=0.0123, started_at=timezone.now() - timedelta(seconds=90), finished_at=timezone.now())
    page = owner_client.get(ev.get_absolute_url()).content.decode()
    card = page[page.index('id="score-card"') : page.index("</section>", page.index('id="score-card"'))]
    assert f'<strong class="value">{score:.3f}</strong>' in card and "95% CI" in card
    assert 'class="interval-bar"' in card and words in card
    assert "<dt>n</dt><dd>200 of 200</dd>" in card and "$0.0123" in card and "90.0 s" in card


def test_a_dataset_eval_has_no_chance_and_says_nothing_of_it(owner_client, project, owner):
    ev = scored(project, owner, "", 0.5, 0.4, 0.6)
    page = owner_client.get(ev.get_absolute_url()).content.decode()
    assert 'id="score-card"' in page and "chance" not in page[page.index('id="score-card"') :].split("</section>")[0].lower()


def test_the_benchmarks_history_draws_intervals_and_lists_a_failed_eval_without_drawing_it(owner_client, project, owner):
    scored(project, owner, "gsm8k", 0.4, 0.3, 0.5)
    scored(project, owner, "gsm8k", 0.5, 0.4, 0.6)
    scored(project, owner, "gsm8k", 1.0, 0.9, 1.0, status="failed", error_count=30)
    page = owner_client.get("/evals/compare/gsm8k/").content.decode()
    assert page.count("<circle ") == 2 and page.count('stroke-width="3" opacity="0.35"') == 2
    assert page.count('<span class="status failed">Failed</span>') == 1 and '<td class="error">30</td>' in page


def test_a_suite_run_shows_each_score_against_its_chance(owner_client, project, owner):
    from evals.suites.actions import create_suite_run

    deployment = Deployment.objects.create(project=project, name="d", base_url="http://127.0.0.1:9/v1", model="m")
    entries = [{"benchmark": name, "sample_limit": 200, "mode": "loglikelihood", "options": {}} for name in ("hellaswag", "winogrande")]
    run = create_suite_run(project, owner, deployments=[deployment], suite_name="quick", entries=entries)
    run.evals.filter(benchmark="hellaswag").update(status="succeeded", score=0.31, score_low=0.26, score_high=0.37)
    run.evals.filter(benchmark="winogrande").update(status="succeeded", score=0.48, score_low=0.41, score_high=0.55)
    page = owner_client.get(f"/evals/suite-runs/{run.pk}/").content.decode()
    assert '<span class="chance above" title="Above chance (0.25) by its whole 95% interval.">above chance (0.25)</span>' in page
    assert ">not above chance (0.50)</span>" in page and "includes chance (0.5)" in page
