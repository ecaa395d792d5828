"""Repeats of a harness: N runs at once, each charged; scores per model label with a t interval and Welch's test."""

import pytest
from scipy import stats

from billing.models import Account, LedgerEntry
from harnesses.models import Harness, Run

from .harness_fixtures import fund

pytestmark = pytest.mark.django_db


@pytest.fixture
def harness(project, owner):
    return Harness.objects.create(
        project=project, created_by=owner, name="bench", repo_url="https://example.org/a/b", install_command="true", run_command="true"
    )


def scored(harness, label, scores):
    for score in scores:
        Run.objects.create(project=harness.project, harness=harness, compute_type="cpu", price_cents=50, status="succeeded", score=score, model_label=label)


def test_it_starts_n_runs_at_once_each_charged_as_a_run(api, project, harness):
    fund(project, 1000)
    response = api.post(f"/api/v1/harnesses/{harness.pk}/runs", {"repeats": 3}, format="json")
    assert response.status_code == 201
    runs = response.json()
    assert len(runs) == 3 and {r["status"] for r in runs} == {"queued"}
    assert Account.balance_for(project) == 1000 - 3 * harness.price_cents
    assert LedgerEntry.objects.filter(kind="run_charge", reference__in=[f"run:{r['id']}" for r in runs]).count() == 3
    assert api.post(f"/api/v1/harnesses/{harness.pk}/runs", {"repeats": 21}, format="json").status_code == 400


def test_a_balance_short_of_all_repeats_starts_none(api, owner_client, project, harness):
    fund(project, 2 * harness.price_cents)
    response = api.post(f"/api/v1/harnesses/{harness.pk}/runs", {"repeats": 3}, format="json")
    assert response.status_code == 402
    assert not Run.objects.exists() and Account.balance_for(project) == 2 * harness.price_cents
    page = owner_client.post(f"/harnesses/{harness.pk}/runs/", {"repeats": "3"})
    assert page.status_code == 402 and "None of the 3 runs was started" in page.content.decode()
    started = owner_client.post(f"/harnesses/{harness.pk}/runs/", {"repeats": "2"})
    assert started.status_code == 302 and Run.objects.count() == 2 and Account.balance_for(project) == 0


def test_the_harness_page_shows_mean_and_interval_per_model_and_compares_two(owner_client, api, harness):
    base, tuned = [0.61, 0.58, 0.63, 0.60], [0.71, 0.74, 0.69, 0.72, 0.70]
    scored(harness, "base", base)
    scored(harness, "tuned", tuned)
    low, high = stats.t.interval(0.95, len(tuned) - 1, loc=sum(tuned) / len(tuned), scale=stats.sem(tuned))
    page = owner_client.get(f"/harnesses/{harness.pk}/").content.decode()
    assert f"{low:.4f}–{high:.4f}" in page and "<td>tuned</td><td>5</td>" in page
    compared = owner_client.get(f"/harnesses/{harness.pk}/", {"a": "base", "b": "tuned"}).content.decode()
    reference = stats.ttest_ind(tuned, base, equal_var=False)
    assert "Verdict: <strong>better</strong>" in compared and f"t = {reference.statistic:.3f}" in compared
    assert "(5 and 4 runs)" in compared
    body = api.get(f"/api/v1/harnesses/{harness.pk}/scores", {"a": "tuned", "b": "base"}).json()
    assert body["comparison"]["verdict"] == "worse" and body["comparison"]["p_value"] == pytest.approx(reference.pvalue)
    assert [row["label"] for row in body["labels"]] == ["base", "tuned"]


def test_close_labels_are_not_decisive_and_one_run_is_not_enough(api, harness):
    scored(harness, "a", [0.5, 0.7, 0.6])
    scored(harness, "b", [0.55, 0.65, 0.62])
    scored(harness, "single", [0.9])
    body = api.get(f"/api/v1/harnesses/{harness.pk}/scores", {"a": "a", "b": "b"}).json()
    assert body["comparison"]["verdict"] == "not decisive" and (body["comparison"]["n_a"], body["comparison"]["n_b"]) == (3, 3)
    lone = api.get(f"/api/v1/harnesses/{harness.pk}/scores", {"a": "a", "b": "single"}).json()["comparison"]
    assert lone["verdict"] == "not decisive" and "at least two scored runs" in lone["note"]
    assert next(row for row in body["labels"] if row["label"] == "single")["ci"] is None


def test_the_run_page_shows_its_charge_and_its_traced_token_usage(owner_client, project, owner, harness):
    from django.utils import timezone

    from harnesses.actions import start_run
    from traces.models import TraceSession

    fund(project, 1000)
    run = start_run(harness, owner)
    page = owner_client.get(f"/runs/{run.pk}/").content.decode()
    assert "This run cost <strong>$0.50</strong>" in page and "No traced LLM calls yet" in page
    now = timezone.now()
    TraceSession.objects.create(project=project, session_id=str(run.pk), run=run, first_span_at=now, last_span_at=now, input_tokens=1200, output_tokens=340)
    page = owner_client.get(f"/runs/{run.pk}/").content.decode()
    assert "<strong>1200</strong> input, <strong>340</strong> output" in page
