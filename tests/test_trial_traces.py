"""A model agent's own trace key (agent_tasks/trace_keys.py): spans into its trial's session only, linked to the trial,
its secrets masked, dead once the trial ends; and what shows it (the trial's page, its API, `bv jobs trial`, Traces).

The key is issued here as a trial's start issues it; tests/test_agent_jobs.py proves the same in a real sandbox, sent
by the reference agent through the egress proxy, and an agent using its key against the rules.
"""

import json
from datetime import timedelta

import pytest
from click.testing import CliRunner
from django.utils import timezone
from rest_framework.test import APIClient

from agent_tasks import jobs, trace_keys
from agent_tasks.models import Trial
from agent_tasks.trials import end_credentials
from belvedir.core.models import ApiKey, Membership, Project
from belvedir_cli.main import cli
from evals.models import Deployment
from traces import run_keys
from traces.evaluators import backfill_sessions, session_matches
from traces.models import Evaluator, Span, TraceSession

from .harness_fixtures import fund
from .otlp_builders import body, span
from .test_agent_job_rules import task_set

pytestmark = pytest.mark.django_db

DEPLOYMENT_KEY = "sk-deployment-secret-4242"


@pytest.fixture
def trial(project, owner, held):
    """A reference agent's trial, claimed (running, charged) as a worker claims it."""
    fund(project, 1000)
    version = task_set(project, owner, ["a"])
    deployment = Deployment.objects.create(project=project, name="d", base_url="https://models.example/v1", model="m", api_key=DEPLOYMENT_KEY)
    job = jobs.create_job(project, owner, version=version, agents=["reference"], deployments=[deployment], budget_cents=100)
    return jobs.claim(job.trials.get().pk)


@pytest.fixture
def held(monkeypatch):
    monkeypatch.setattr(jobs, "async_task", lambda *args, **kwargs: None)


@pytest.fixture
def keyed(trial, settings):
    """The trial's key as its agent gets it: (its environment, a client with it)."""
    settings.BELVEDIR_BASE_URL = "https://belvedir.example"
    env, raw = trace_keys.issue(trial)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return env, client


def post(client, spans):
    return client.generic("POST", "/api/v1/traces", body(spans), content_type="application/json")


def test_a_trials_agent_gets_the_platform_its_key_and_its_session_under_both_names(trial, keyed):
    env, _ = keyed
    raw = Trial.objects.get(pk=trial.pk).secret_env["BELVEDIR_API_KEY"]
    assert env == {
        f"{prefix}_{name}": value
        for prefix in ("BELVEDIR", "FRACTAL")
        for name, value in (("API_KEY", raw), ("BASE_URL", "https://belvedir.example"), ("RUN_ID", f"trial-{trial.pk}"))
    }
    key = ApiKey.objects.get(pk=Trial.objects.get(pk=trial.pk).api_key_id)
    assert (key.scope, key.per_run, key.is_active, key.name) == ("ingest", True, True, f"trial #{trial.pk}")


def test_a_trials_key_writes_only_its_trials_session_linked_to_the_trial_its_secrets_masked(trial, keyed, api):
    env, client = keyed
    own = f"trial-{trial.pk}"
    post(api, [span("someone's chat", session_id="chat-7")])
    leaky = {"tool.output": f"LLM_API_KEY={DEPLOYMENT_KEY} BELVEDIR_API_KEY={env['BELVEDIR_API_KEY']}"}
    response = post(client, [span("mine", session_id=own, attributes=leaky), span("forged", session_id="chat-7"), span("a run's", session_id="1")])
    assert response.status_code == 200 and response.json()["partialSuccess"]["rejectedSpans"] == "2"
    assert list(Span.objects.filter(session_id=own).values_list("name", flat=True)) == ["mine"]
    assert list(Span.objects.filter(session_id="chat-7").values_list("name", flat=True)) == ["someone's chat"]
    assert not TraceSession.objects.filter(session_id="1").exists()
    session = TraceSession.objects.get(session_id=own)
    assert (session.trial_id, session.run_id) == (trial.pk, None)
    stored = json.dumps(list(Span.objects.filter(session_id=own).values_list("attributes", flat=True)))
    assert DEPLOYMENT_KEY not in stored and env["BELVEDIR_API_KEY"] not in stored and "LLM_API_KEY=" in stored
    # Its outcome only.
    assert client.post("/api/v1/outcomes", {"session_id": "chat-7", "outcome": "fail"}, format="json").status_code == 403
    assert client.post("/api/v1/outcomes", {"session_id": own, "outcome": "success"}, format="json").status_code == 200


def test_a_session_named_like_a_trial_is_linked_only_to_a_trial_of_its_own_project(trial, api, owner):
    post(api, [span("x", session_id=f"trial-{trial.pk + 1000}"), span("y", session_id=f"trial-0{trial.pk}")])
    assert not TraceSession.objects.filter(trial__isnull=False).exists()
    elsewhere = Project.objects.create(name="elsewhere")
    Membership.objects.create(project=elsewhere, user=owner, role="owner")
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {ApiKey.issue(project=elsewhere, user=owner, name='k')[1]}")
    post(other, [span("z", session_id=f"trial-{trial.pk}")])
    assert TraceSession.objects.get(project=elsewhere).trial_id is None
    post(api, [span("mine", session_id=f"trial-{trial.pk}")])
    assert TraceSession.objects.get(project=trial.job.project, session_id=f"trial-{trial.pk}").trial_id == trial.pk


@pytest.mark.parametrize(
    "session_id, named",
    [("42", ("run", 42)), ("trial-7", ("trial", 7)), ("trial-007", None), ("007", None), ("trial-", None), ("trial-7x", None), ("trial-" + "9" * 18, None)],
)
def test_a_session_id_names_a_run_or_a_trial_by_its_form_alone(session_id, named):
    found = run_keys.named_by(session_id)
    assert (None if found is None else (found[0].name, found[1])) == named


def test_a_trials_key_writes_nothing_once_the_trial_ended_and_dies_with_it_however_it_ends(trial, keyed, settings):
    _, client = keyed
    own = f"trial-{trial.pk}"
    assert post(client, [span("during", session_id=own)]).json().get("partialSuccess", {}).get("rejectedSpans", "0") == "0"
    # Ended, its key not yet revoked (a worker between the two): what it sends is refused.
    Trial.objects.filter(pk=trial.pk).update(status=Trial.Status.SUCCEEDED)
    late = post(client, [span("after", session_id=own)])
    assert late.status_code == 200 and late.json()["partialSuccess"]["rejectedSpans"] == "1"
    assert list(Span.objects.filter(session_id=own).values_list("name", flat=True)) == ["during"]
    end_credentials(trial)
    assert post(client, [span("after", session_id=own)]).status_code in (401, 403)


def test_the_reaper_ending_a_trial_revokes_its_key(trial, keyed):
    Trial.objects.filter(pk=trial.pk).update(deadline_at=timezone.now() - timedelta(seconds=1))
    assert jobs.reap_stale_trials() == 1
    assert not ApiKey.objects.get(pk=Trial.objects.get(pk=trial.pk).api_key_id).is_active


def test_a_trials_session_is_not_production_traffic(trial, keyed):
    _, client = keyed
    post(client, [span("mine", session_id=f"trial-{trial.pk}")])
    session = TraceSession.objects.get(trial=trial)
    TraceSession.objects.filter(pk=session.pk).update(needs_processing=False)
    project = trial.job.project
    production = Evaluator(project=project, source=Evaluator.Source.PRODUCTION)
    assert not session_matches(production, session) and session_matches(Evaluator(project=project, source=Evaluator.Source.ANY), session)
    window = (timezone.now() - timedelta(days=1), timezone.now() + timedelta(days=1))
    assert not backfill_sessions(production, *window).exists()
    assert backfill_sessions(Evaluator(project=project, source=Evaluator.Source.ANY), *window).get() == session


def test_the_trials_page_and_api_say_where_its_spans_are_and_traces_links_back(trial, keyed, client, owner, api):
    _, key_client = keyed
    client.force_login(owner)
    page = client.get(trial.get_absolute_url()).content.decode()
    assert f"trial-{trial.pk}</code>) and sent no spans with it yet" in page
    post(key_client, [span("mine", session_id=f"trial-{trial.pk}"), span("again", session_id=f"trial-{trial.pk}")])
    page = client.get(trial.get_absolute_url()).content.decode()
    assert f'Its agent sent 2 spans with the trial\'s own trace key: session <a href="/traces/sessions/trial-{trial.pk}/">' in page
    found = api.get(f"/api/v1/trials/{trial.pk}").json()["trace_session"]
    assert found == {"session_id": f"trial-{trial.pk}", "span_count": 2, "url": f"http://testserver/api/v1/sessions/trial-{trial.pk}"}
    assert api.get(found["url"]).json()["trial"] == trial.pk
    link = f'<a href="/trials/{trial.pk}/">trial #{trial.pk}</a>'
    assert link in client.get(f"/traces/sessions/trial-{trial.pk}/").content.decode() and link in client.get("/traces/").content.decode()


def test_staff_see_a_trials_key_in_admin_never_its_raw_value(trial, keyed, admin_client):
    env, _ = keyed
    page = admin_client.get(f"/admin/agent_tasks/trial/{trial.pk}/change/").content.decode()
    assert f"trial #{trial.pk}" in page and env["BELVEDIR_API_KEY"] not in page


def test_a_trial_of_an_agent_without_a_model_has_no_key_and_its_page_says_so(project, owner, client):
    version = task_set(project, owner, ["a"])
    trial = Trial.objects.create(task=version.tasks.get(), agent="nop", status="succeeded")
    client.force_login(owner)
    assert "None: only an agent that calls a model gets a trace key" in client.get(trial.get_absolute_url()).content.decode()


@pytest.mark.django_db(transaction=True)
def test_bv_jobs_trial_says_where_its_spans_are(trial, keyed, live_server, api_key, tmp_path, monkeypatch):
    _, key_client = keyed
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))

    def bv(*args):
        return CliRunner().invoke(cli, list(args), env={"BELVEDIR_API_KEY": api_key, "BELVEDIR_BASE_URL": live_server.url}, obj={})

    untraced = bv("jobs", "trial", str(trial.pk))
    assert untraced.exit_code == 0 and "Traces: none" in untraced.stdout, untraced.output
    post(key_client, [span("mine", session_id=f"trial-{trial.pk}")])
    shown = bv("jobs", "trial", str(trial.pk))
    assert f"Trial #{trial.pk} of job #{trial.job_id}: a by reference · d, attempt 1: running" in shown.stdout, shown.output
    assert f"Traces: session trial-{trial.pk}, 1 spans (bv traces show trial-{trial.pk})" in shown.stdout
    assert json.loads(bv("jobs", "trial", str(trial.pk), "--json").stdout)["trace_session"]["span_count"] == 1
