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
from agent_tasks.trials import TRIALS, end_credentials
from belvedir.core.models import ApiKey, Membership, Project
from belvedir_cli.main import cli
from billing import workloads
from evals.models import Deployment
from traces import workload_keys
from traces.batches import process_pending
from traces.evaluators import backfill_sessions, session_matches
from traces.models import Evaluator, Span, Task, TraceBatch, TraceSession
from traces.segmentation import segment
from traces.training import training_tasks

from .harness_fixtures import fund
from .otlp_builders import body, span
from .test_agent_job_rules import task_set

pytestmark = pytest.mark.django_db

DEPLOYMENT_KEY = "sk-deployment-secret-4242"
EGRESS_TOKEN = "egress-token-0123456789"


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
    env, raw = trace_keys.issue(trial, given=[DEPLOYMENT_KEY, EGRESS_TOKEN])  # as a trial's start gives them
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return env, client


def post(client, spans):
    return client.generic("POST", "/api/v1/traces", body(spans), content_type="application/json")


def test_a_trials_agent_gets_the_platform_its_key_and_its_session_under_both_names(trial, keyed):
    env, _ = keyed
    raw = Trial.objects.get(pk=trial.pk).secret_values[0]
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
    # The deployment's key changes meanwhile: what the agent holds is the old one, and that is what is masked.
    Deployment.objects.filter(pk=trial.deployment_id).update(api_key="sk-rotated-key-999999")
    leaky = {"tool.output": f"LLM_API_KEY={DEPLOYMENT_KEY} BELVEDIR_API_KEY={env['BELVEDIR_API_KEY']} HTTPS_PROXY=http://t:{EGRESS_TOKEN}@x"}
    response = post(client, [span("mine", session_id=own, attributes=leaky), span("forged", session_id="chat-7"), span("a run's", session_id="1")])
    assert response.status_code == 200 and response.json()["partialSuccess"]["rejectedSpans"] == "2"
    assert list(Span.objects.filter(session_id=own).values_list("name", flat=True)) == ["mine"]
    assert list(Span.objects.filter(session_id="chat-7").values_list("name", flat=True)) == ["someone's chat"]
    assert not TraceSession.objects.filter(session_id="1").exists()
    session = TraceSession.objects.get(session_id=own)
    assert (session.trial_id, session.run_id) == (trial.pk, None)
    stored = json.dumps(list(Span.objects.filter(session_id=own).values_list("attributes", flat=True)))
    assert "LLM_API_KEY=" in stored and all(secret not in stored for secret in (DEPLOYMENT_KEY, env["BELVEDIR_API_KEY"], EGRESS_TOKEN))
    # No outcome: another session's is not its to report, and its own is its verifier's reward.
    assert client.post("/api/v1/outcomes", {"session_id": "chat-7", "outcome": "fail"}, format="json").status_code == 403
    refused = client.post("/api/v1/outcomes", {"session_id": own, "outcome": "success"}, format="json")
    assert refused.status_code == 403 and "verifier's reward" in refused.json()["detail"]
    assert TraceSession.objects.get(session_id=own).outcome == ""


def test_a_trials_key_batch_stored_later_by_the_worker_is_confined_and_masked_as_inline(trial, keyed, settings):
    settings.TRACE_INGEST_INLINE = False
    env, client = keyed
    own = f"trial-{trial.pk}"
    post(client, [span("mine", session_id=own, attributes={"leak": DEPLOYMENT_KEY}), span("unnamed"), span("forged", session_id="chat-7")])
    assert TraceBatch.objects.get().own_session == own
    assert process_pending() == 1
    assert sorted(Span.objects.values_list("name", "session_id")) == [("mine", own), ("unnamed", own)]
    assert DEPLOYMENT_KEY not in json.dumps(list(Span.objects.values_list("attributes", flat=True)))
    assert TraceSession.objects.get().trial_id == trial.pk


def test_a_trials_spans_are_dropped_not_stored_unmasked_when_the_trial_is_gone_before_the_worker_stores_them(trial, keyed, settings):
    settings.TRACE_INGEST_INLINE = False
    _, client = keyed
    post(client, [span("mine", session_id=f"trial-{trial.pk}", attributes={"leak": DEPLOYMENT_KEY})])
    trial.job.delete()
    assert process_pending() == 1
    assert not Span.objects.exists()


def test_a_session_is_linked_to_a_trial_by_the_trials_own_key_alone(trial, keyed, api, owner):
    # Another key's spans naming the trial's session, or another project's: an ordinary session, linked to nothing.
    post(api, [span("x", session_id=f"trial-{trial.pk}"), span("y", session_id=f"trial-0{trial.pk}")])
    assert not TraceSession.objects.filter(trial__isnull=False).exists()
    elsewhere = Project.objects.create(name="elsewhere")
    Membership.objects.create(project=elsewhere, user=owner, role="owner")
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {ApiKey.issue(project=elsewhere, user=owner, name='k')[1]}")
    post(other, [span("z", session_id=f"trial-{trial.pk}")])
    assert TraceSession.objects.get(project=elsewhere).trial_id is None
    # The trial's key writing it links it.
    post(keyed[1], [span("mine")])
    assert TraceSession.objects.get(project=trial.job.project, session_id=f"trial-{trial.pk}").trial_id == trial.pk


@pytest.mark.parametrize(
    "session_id, named",
    [
        ("42", ("run", 42)),
        ("trial-7", ("trial", 7)),
        *((name, None) for name in ("trial-007", "007", "trial-", "trial-7x", "trial-" + "9" * 18, "²", "trial-²", "trial-٣")),
    ],
)
def test_a_session_id_names_a_run_or_a_trial_by_its_form_alone(session_id, named):
    found = workload_keys.named_by(session_id)
    assert (None if found is None else (found[0].name, found[1])) == named


def test_a_trials_key_writes_nothing_once_the_trial_ended_and_dies_with_it_however_it_ends(trial, keyed, settings):
    _, client = keyed
    own = f"trial-{trial.pk}"
    assert post(client, [span("during", session_id=own)]).json().get("partialSuccess", {}).get("rejectedSpans", "0") == "0"
    # Ended, its key not yet revoked (a worker between the two): whatever it sends is refused, naming a session or not.
    Trial.objects.filter(pk=trial.pk).update(status=Trial.Status.SUCCEEDED)
    late = post(client, [span("after", session_id=own), span("unnamed")])
    assert late.status_code == 200 and late.json()["partialSuccess"]["rejectedSpans"] == "2"
    assert "has ended" in late.json()["partialSuccess"]["errorMessage"]
    assert list(Span.objects.values_list("name", flat=True)) == ["during"] and not TraceBatch.objects.exists()
    end_credentials(trial)
    assert post(client, [span("after", session_id=own)]).status_code in (401, 403)


def test_the_reaper_ending_a_trial_revokes_its_key(trial, keyed):
    Trial.objects.filter(pk=trial.pk).update(deadline_at=timezone.now() - timedelta(seconds=1))
    assert workloads.reap(TRIALS) == 1
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


def test_a_trials_conversation_is_never_training_data(trial, keyed, api):
    """It works a benchmark's task; the export's contamination check knows only the catalog's benchmarks."""
    _, client = keyed
    post(client, [span("turn", session_id=f"trial-{trial.pk}", user_message="Write hi into /app/hi.txt")])
    post(api, [span("turn", session_id="chat-1", user_message="Hello there")])
    for session in TraceSession.objects.all():
        segment(session)
    assert Task.objects.filter(session__trial=trial).exists()
    assert [task.session.session_id for task in training_tasks(trial.job.project)] == ["chat-1"]


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
