"""The home page: the project at a glance, and the checklist of a new project."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from billing.actions import post_entry
from billing.models import Account, LedgerEntry
from evals.models import Deployment, Eval
from harnesses.models import Harness, Preset, Run
from traces.models import TraceSession

pytestmark = pytest.mark.django_db


def activity(project, owner, runs=3, sessions=4):
    account = Account.for_project(project)
    post_entry(account, kind=LedgerEntry.Kind.COUPON, amount_cents=5000, reference="coupon:x", user=owner)
    preset = Preset.objects.first() or Preset.objects.create(slug="p", name="P", description="", repo_url="r", install_command="t", run_command="t")
    harness = Harness.objects.create(project=project, name="swe lite", repo_url="https://x.org/a/b", install_command="true", run_command="true", preset=preset)
    for i in range(runs):
        run = Run.objects.create(project=project, harness=harness, compute_type="cpu", price_cents=50, status="succeeded", score=0.5 + i / 100)
        post_entry(account, kind=LedgerEntry.Kind.RUN_CHARGE, amount_cents=-50, reference=f"run:{run.pk}")
    deployment = Deployment.objects.create(project=project, name="prod-gpt", base_url="https://api.example.com/v1", model="m")
    Eval.objects.create(
        project=project, deployment=deployment, benchmark="gsm8k", seed=1, status="succeeded", score=0.61, finished_at=timezone.now() - timedelta(hours=1)
    )
    Eval.objects.create(project=project, deployment=deployment, benchmark="gsm8k", seed=2, status="succeeded", score=0.72, finished_at=timezone.now())
    Eval.objects.create(project=project, deployment=deployment, benchmark="humaneval", seed=3, status="running", total=40, done_count=10)
    now = timezone.now()
    for i in range(sessions):
        TraceSession.objects.create(project=project, session_id=f"s{i}", first_span_at=now, last_span_at=now, outcome=["fail", "success", "success", ""][i % 4])
    return harness


def test_it_shows_a_new_project_its_three_steps(owner_client):
    body = owner_client.get("/").content.decode()
    assert "Get started" in body
    assert "Redeem a coupon or add funds" in body and "Create a harness from a preset" in body and "run gsm8k on 20 rows" in body
    assert "No runs yet" in body and "None running." in body and "No spend in the last 30 days." in body
    assert "$0.00" in body


def test_each_step_disappears_when_done(owner_client, project, owner):
    post_entry(Account.for_project(project), kind=LedgerEntry.Kind.COUPON, amount_cents=100, reference="c", user=owner)
    body = owner_client.get("/").content.decode()
    assert "Redeem a coupon or add funds" not in body and "Create a harness from a preset" in body
    # A deployment changes where the last step leads: straight to a prefilled gsm8k eval.
    Deployment.objects.create(project=project, name="d", base_url="https://api.example.com/v1", model="m")
    assert "benchmark=gsm8k&amp;sample_limit=20" in owner_client.get("/").content.decode()


def test_it_shows_the_project_at_a_glance(owner_client, project, owner):
    activity(project, owner)
    body = owner_client.get("/").content.decode()
    assert "Get started" not in body
    assert "$48.50" in body  # the balance
    assert '<span class="money" id="spend-month">$1.50</span>' in body
    assert "swe lite" in body and "0.5200" in body and "Succeeded" in body
    assert "0.7200" in body and "0.6100" not in body  # the latest score per benchmark and deployment
    assert 'hx-trigger="every 2s"' in body and "10/40 (25%)" in body
    assert "4 sessions" in body and "33% reported failures (1 of 3 with an outcome)" in body
    assert "<svg" in body and 'aria-label="spend (USD) over time"' in body


def test_a_newer_failed_eval_replaces_the_older_score_in_red(owner_client, project, owner):
    activity(project, owner)
    deployment = Deployment.objects.get(name="prod-gpt")
    failed = Eval.objects.create(
        project=project, deployment=deployment, benchmark="gsm8k", seed=4, status="failed", error_count=5, finished_at=timezone.now() + timedelta(minutes=1)
    )
    scores = owner_client.get("/").content.decode().split('id="latest-scores"')[1]
    assert "0.7200" not in scores and f"#{failed.pk}" in scores
    assert '<span class="status failed">Failed</span> <span class="error">5 errors</span>' in scores


def test_running_evals_poll_until_none_is_left(owner_client, project, owner):
    activity(project, owner)
    response = owner_client.get("/?part=evals", HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and "10/40" in response.content.decode()
    Eval.objects.filter(status="running").update(status="succeeded", score=0.3)
    response = owner_client.get("/?part=evals", HTTP_HX_REQUEST="true")
    assert response.status_code == 286 and "None running." in response.content.decode()


def test_it_shows_only_the_current_project(outsider_client, project, owner):
    activity(project, owner)
    body = outsider_client.get("/").content.decode()
    assert "swe lite" not in body and "prod-gpt" not in body and "0 sessions" in body


def test_its_query_count_does_not_grow_with_activity(owner_client, project, owner):
    activity(project, owner, runs=1, sessions=1)
    owner_client.get("/")
    with CaptureQueriesContext(connection) as few:
        owner_client.get("/")
    activity_more = Harness.objects.get()
    for _ in range(20):
        Run.objects.create(project=project, harness=activity_more, compute_type="cpu", price_cents=50)
    with CaptureQueriesContext(connection) as many:
        owner_client.get("/")
    assert len(many) == len(few) <= 15, [q["sql"] for q in many]  # 15: the month's model spend (evals and evaluators, one query)


def test_members_see_the_figures_but_no_links_to_owner_only_pages(member_client, project):
    body = member_client.get("/").content.decode()
    assert 'Redeem a coupon or add funds <span class="muted">(an owner of the project does this)</span>' in body
    assert 'href="/settings/balance/"' not in body and "$0.00" in body
