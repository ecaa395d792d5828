"""The local deployment (issue #41): the model `make run` serves, registered by demo_setup and by the quick-suite button of a project without a deployment.

The page tests check the weights against a stand-in file (its digest pinned
for the test), so they need no 98 MB download; the end-to-end tests at the
bottom run the real SmolLM2-135M-Instruct through the eval engine.
"""

import hashlib
from decimal import Decimal

import pytest
import requests
from django.conf import settings as django_settings
from django.core.management import call_command
from django.test import Client

from belvedir.localmodel import files
from billing.actions import post_entry
from billing.models import Account, LedgerEntry
from evals import benchmarks, local_model, loglikelihood, queue
from evals.actions import EvalConfigError, create_eval
from evals.models import Deployment, Eval, SuiteRun
from evals.tasks import run_eval
from harnesses.actions import start_run
from harnesses.models import Harness

from .servers import local_model_server

BUTTON = "Run the quick suite on the local model"
PRESS = "/evals/local-model/quick-suite/"
PAGES = ("/", "/evals/new/benchmark/")


@pytest.fixture
def weights(settings, tmp_path, monkeypatch):
    """A stand-in for the installed weights: a GGUF-headed file whose digest is the pinned one for this test."""
    settings.LOCAL_MODEL_DIR = tmp_path / "models"
    settings.LOCAL_MODEL_DIR.mkdir()
    content = files.GGUF_MAGIC + b" stand-in weights"
    files.model_path(settings.LOCAL_MODEL_DIR).write_bytes(content)
    monkeypatch.setattr(files, "SHA256", hashlib.sha256(content).hexdigest())


@pytest.fixture
def no_weights(settings, tmp_path):
    settings.LOCAL_MODEL_DIR = tmp_path / "empty"


@pytest.fixture
def offered(db, weights, loopback_deployments):
    """What `make run` gives: the weights in place and loopback deployments allowed."""


def nothing_created(project):
    return not Deployment.objects.filter(project=project).exists() and not SuiteRun.objects.exists() and not Eval.objects.exists()


# -- demo_setup --------------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_demo_setup_registers_the_local_deployment_once_priced_at_zero(capsys):
    call_command("demo_setup")
    call_command("demo_setup")
    deployment = Deployment.objects.get()
    assert deployment.name == "local SmolLM2-135M, CPU" and deployment.project.memberships.get().user.username == "demo"
    assert (deployment.base_url, deployment.model, deployment.api_style) == ("http://127.0.0.1:8001/v1", "SmolLM2-135M-Instruct", "chat")
    assert deployment.input_price_per_million == deployment.output_price_per_million == Decimal(0)
    assert deployment.is_priced and deployment.cost(1000, 1000) == 0
    assert deployment.max_in_flight == 4
    assert 'model:    deployment "local SmolLM2-135M, CPU" (SmolLM2-135M-Instruct at http://127.0.0.1:8001/v1)' in capsys.readouterr().out


@pytest.mark.django_db
def test_demo_setup_makes_the_agent_harness_on_the_local_model_once(capsys):
    call_command("demo_setup")
    call_command("demo_setup")
    harness = Harness.objects.get()
    env = {var.name: var.value for var in harness.env_vars.all()}
    assert harness.name == "Reference agent on the local model" and harness.preset.slug == "reference-agent" and harness.tasks
    assert (env["LLM_BASE_URL"], env["LLM_MODEL"], env["LLM_TEMPERATURE"]) == ("http://127.0.0.1:8001/v1", "SmolLM2-135M-Instruct", "0")
    assert int(env["LLM_MAX_TOKENS"]) <= 512 and harness.compute_type == "cpu"
    assert f'agent:    harness "Reference agent on the local model" (http://127.0.0.1:8000/harnesses/{harness.pk}/): press Run' in capsys.readouterr().out


@pytest.mark.django_db
def test_demo_setup_credits_the_demo_project_once_through_the_ledger_so_its_first_run_starts(capsys):
    call_command("demo_setup")
    call_command("demo_setup")
    harness = Harness.objects.get()
    entries = LedgerEntry.objects.filter(kind="adjustment", reference=f"demo-credit:{harness.project.pk}")
    assert entries.count() == 1 and Account.balance_for(harness.project) == 1000
    assert "balance:  $10.00 (a $10.00 demo credit, given once)" in capsys.readouterr().out
    run = start_run(harness, harness.created_by)
    assert run.price_cents == 50 and Account.balance_for(harness.project) == 950


@pytest.mark.django_db
def test_the_local_deployment_takes_its_address_from_the_setting(settings):
    settings.LOCAL_MODEL_URL = "http://127.0.0.1:9301/v1"
    call_command("demo_setup")
    assert Deployment.objects.get().base_url == "http://127.0.0.1:9301/v1"


# -- the button ---------------------------------------------------------------------------------------------------


def test_a_project_without_a_deployment_is_offered_the_button(offered, owner_client):
    for page in PAGES:
        body = owner_client.get(page).content.decode()
        assert BUTTON in body and f'action="{PRESS}"' in body and "csrfmiddlewaretoken" in body, page


def test_the_button_registers_the_local_deployment_and_starts_the_quick_suite(offered, owner_client, project, owner):
    response = owner_client.post(PRESS, {"page": "home"})
    run = SuiteRun.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/evals/suite-runs/{run.pk}/"
    deployment = Deployment.objects.get(project=project)
    assert deployment.name == local_model.NAME and deployment.base_url == django_settings.LOCAL_MODEL_URL
    assert (run.project, run.suite_name, run.created_by, list(run.deployments.all())) == (project, "quick on the local model", owner, [deployment])
    # What gives a 135M model a signal: three multiple-choice benchmarks by log-likelihood, from the same chat
    # deployment, and gsm8k asked in the user turn; every other catalog benchmark is named with why it was left out.
    evals = {ev.benchmark: ev for ev in run.evals.all()}
    chosen = {name: (ev.mode, ev.sample_limit, {k: v for k, v in ev.benchmark_options.items() if v}) for name, ev in evals.items()}
    assert chosen == {
        "hellaswag": ("loglikelihood", 100, {}),
        "arc_challenge": ("loglikelihood", 200, {}),
        "winogrande": ("loglikelihood", 200, {}),
        "gsm8k": ("generative", 50, {"instruction_in_user": True}),
    }
    assert set(evals) | set(local_model.QUICK_SUITE_LEAVES_OUT) == set(benchmarks.CATALOG)
    assert "bfcl left out: it calls tools, which the local model's server does not take." in run.notes
    page = owner_client.get(response["Location"]).content.decode()
    assert all(f"{name} left out" in page for name in local_model.QUICK_SUITE_LEAVES_OUT)
    assert all(ev.deployment == deployment for ev in evals.values()) and {ev.status for ev in evals.values()} == {Eval.Status.PENDING}


def test_pressing_it_again_starts_another_run_on_the_same_deployment(offered, owner_client, project):
    owner_client.post(PRESS)
    # The project's only deployment is the local one: it is still offered the button.
    assert BUTTON in owner_client.get("/").content.decode()
    owner_client.post(PRESS)
    assert Deployment.objects.filter(project=project).count() == 1 and SuiteRun.objects.count() == 2


def test_a_member_may_press_it(offered, member_client, project, member):
    assert BUTTON in member_client.get("/").content.decode()
    response = member_client.post(PRESS)
    assert response.status_code == 302 and SuiteRun.objects.get().created_by == member
    assert Deployment.objects.get().project == project


def test_a_project_with_a_deployment_of_its_own_is_not_offered_it(offered, owner_client, project):
    Deployment.objects.create(project=project, name="prod", base_url="https://api.example.com/v1", model="m")
    for page in PAGES:
        assert BUTTON not in owner_client.get(page).content.decode(), page
    body = owner_client.post(PRESS, follow=True).content.decode()
    assert "This project has deployments of its own" in body
    assert Deployment.objects.filter(project=project).count() == 1 and not SuiteRun.objects.exists()


def test_an_outsider_cannot_start_it_for_another_project(offered, outsider_client, project, outsider_project, owner):
    outsider_client.post(PRESS)
    # The post acts on the outsider's own project only: nothing lands in another.
    assert not Deployment.objects.filter(project=project).exists()
    assert all(run.project == outsider_project for run in SuiteRun.objects.all())


def test_the_signed_out_are_sent_to_log_in(offered, project):
    response = Client().post(PRESS)
    assert response.status_code == 302 and response["Location"].startswith("/login/")
    assert nothing_created(project)


def test_it_needs_the_csrf_token(offered, owner):
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    assert client.post(PRESS).status_code == 403
    assert not Deployment.objects.exists()


def test_it_is_refused_in_debt_and_creates_nothing(offered, owner_client, project):
    post_entry(Account.for_project(project), kind=LedgerEntry.Kind.DISPUTE, amount_cents=-100, reference="txn_debt", memo="disputed")
    response = owner_client.post(PRESS, {"page": "eval_form"})
    assert response.status_code == 302 and response["Location"] == "/evals/new/benchmark/"
    body = owner_client.get(response["Location"]).content.decode()
    assert "This project owes $1.00" in body and "Runs and evals are refused until the debt is paid" in body
    assert nothing_created(project)


def test_without_the_weights_it_says_install_them_and_creates_nothing(db, no_weights, loopback_deployments, owner_client, project):
    for page in PAGES:
        body = owner_client.get(page).content.decode()
        assert "local model not installed: run `python manage.py install_local_model`" in body and BUTTON not in body, page
    body = owner_client.post(PRESS, follow=True).content.decode()
    assert "local model not installed" in body
    assert nothing_created(project)


def test_weights_changed_since_the_install_read_as_not_installed(offered, owner_client, settings):
    files.model_path(settings.LOCAL_MODEL_DIR).write_bytes(files.GGUF_MAGIC + b" another model")
    body = owner_client.get("/").content.decode()
    assert "local model not installed" in body and BUTTON not in body


def test_where_loopback_deployments_are_refused_it_says_why_instead(db, weights, owner_client, project):
    for page in PAGES:
        body = owner_client.get(page).content.decode()
        assert BUTTON not in body and "BELVEDIR_ALLOW_PRIVATE_DEPLOYMENTS is off" in body, page
    body = owner_client.post(PRESS, follow=True).content.decode()
    assert "BELVEDIR_ALLOW_PRIVATE_DEPLOYMENTS is off" in body
    assert nothing_created(project)


# -- a local deployment whose weights are missing ---------------------------------------------------------------


def test_the_deployments_page_says_the_local_model_is_not_installed(db, no_weights, loopback_deployments, owner_client, project):
    Deployment.objects.create(project=project, name=local_model.NAME, **local_model.deployment_fields())
    Deployment.objects.create(project=project, name="prod", base_url="https://api.example.com/v1", model="m")
    body = owner_client.get("/evals/deployments/").content.decode()
    assert body.count("local model not installed: run `python manage.py install_local_model`") == 1


def test_the_deployments_page_says_nothing_once_it_is_installed(offered, owner_client, project):
    Deployment.objects.create(project=project, name=local_model.NAME, **local_model.deployment_fields())
    assert "not installed" not in owner_client.get("/evals/deployments/").content.decode()


def test_an_eval_on_it_is_refused_instead_of_failing_row_by_row(db, no_weights, loopback_deployments, project, owner):
    deployment = Deployment.objects.create(project=project, name=local_model.NAME, **local_model.deployment_fields())
    with pytest.raises(EvalConfigError, match="local model not installed"):
        create_eval(project, owner, deployment=deployment, benchmark="gsm8k", sample_limit=5)
    assert not Eval.objects.exists()


def test_a_benchmark_calling_tools_is_refused_on_it_with_the_reason(offered, project, owner):
    deployment = Deployment.objects.create(project=project, name=local_model.NAME, **local_model.deployment_fields())
    with pytest.raises(EvalConfigError, match="bfcl calls tools, which the local model's server does not take"):
        create_eval(project, owner, deployment=deployment, benchmark="bfcl", sample_limit=5)
    assert not Eval.objects.exists()
    create_eval(project, owner, deployment=deployment, benchmark="gsm8k", sample_limit=5)  # what it can serve, it runs


def test_a_local_model_served_on_another_machine_is_not_checked_here(db, no_weights, settings, project, owner):
    settings.LOCAL_MODEL_URL = "https://models.example.com/v1"
    deployment = Deployment.objects.create(project=project, name=local_model.NAME, **local_model.deployment_fields())
    assert local_model.deployment_problem(deployment) == ""
    assert create_eval(project, owner, deployment=deployment, benchmark="gsm8k", sample_limit=5).deployment == deployment


# -- the real model, end to end through the eval engine ---------------------------------------------------------

processes = pytest.mark.processes


@pytest.fixture(scope="module")
def server():
    with local_model_server() as url:
        yield url


@pytest.fixture
def enqueued(monkeypatch):
    """The eval queue, held: each test runs the eval itself with run_eval, as the worker would."""
    held = []
    monkeypatch.setattr(queue, "enqueue", held.append)
    return held


def deployment_at(project, url, style) -> Deployment:
    return Deployment.objects.create(project=project, name=f"smol {style}", **{**local_model.deployment_fields(), "base_url": url, "api_style": style})


@processes
@pytest.mark.django_db(transaction=True)
def test_the_real_model_answers_gsm8k_through_the_engine(server, loopback_deployments, enqueued, project, owner):
    # SmolLM2-135M ends its turn at once on most gsm8k questions under the benchmark's system prompt (about 19 in 20);
    # these 20 rows hold one it answers, in 41 tokens, so the outputs differ and the eval takes seconds, not the
    # minutes of rows it rambles on for 512 tokens.
    ev = create_eval(project, owner, deployment=deployment_at(project, server, "chat"), benchmark="gsm8k", sample_limit=20, seed=5)
    run_eval(ev.pk)
    ev.refresh_from_db()
    assert (ev.status, ev.error_count, ev.done_count, ev.total) == ("succeeded", 0, 20, 20), ev.status_message
    samples = list(ev.samples.all())
    assert all(s.error == "" and s.score is not None and s.completion_tokens is not None for s in samples)
    # An empty answer is the model's own (end of turn first): scored wrong, not an error.
    assert all(s.score == 0 for s in samples if s.output == "")
    assert len({s.output for s in samples}) > 1
    # The stack it was served by, as the real server states it: its Server header and its /models entry.
    ev.deployment.refresh_from_db()
    stamp = ev.serving_stack
    assert stamp["models"] and ev.deployment.served_fingerprint == f"models:{stamp['models']}"
    assert stamp["server"] == [requests.get(f"{server}/models", timeout=30).headers["Server"]]
    assert 1 <= stamp["peak_in_flight"] <= ev.deployment.max_in_flight
    spec = benchmarks.get("gsm8k")
    for sample in [s for s in samples if s.output][:2] + [s for s in samples if not s.output][:1]:
        row = spec.rows()[sample.row_index]
        assert row.input == sample.input
        asked = {"model": files.MODEL_ID, "messages": spec.prompt(row), **spec.generation}
        direct = requests.post(f"{server}/chat/completions", json=asked, timeout=120).json()
        assert direct["choices"][0]["message"]["content"] == sample.output


@processes
@pytest.mark.django_db(transaction=True)
def test_the_real_model_is_asked_once_and_its_answers_served_again_from_the_cache(server, loopback_deployments, enqueued, project, owner):
    deployment = deployment_at(project, server, "chat")
    first = create_eval(project, owner, deployment=deployment, benchmark="gsm8k", sample_limit=20, seed=5)
    run_eval(first.pk)
    deployment.refresh_from_db()
    # What its /models lists of the model is part of every key.
    assert deployment.served_fingerprint.startswith("models:")
    again = create_eval(project, owner, deployment=deployment, benchmark="gsm8k", sample_limit=20, seed=5)
    run_eval(again.pk)
    first.refresh_from_db(), again.refresh_from_db()
    assert (first.cache_misses, again.cache_hits, again.cache_misses, again.status) == (20, 20, 0, "succeeded")
    outputs = dict(first.samples.values_list("row_index", "output"))
    assert dict(again.samples.values_list("row_index", "output")) == outputs and again.score == first.score
    # The model's own answer, not a copy of the first eval's rows: asked directly, it says the same.
    row = next(s for s in again.samples.all() if s.output)
    spec = benchmarks.get("gsm8k")
    asked = {"model": files.MODEL_ID, "messages": spec.prompt(spec.rows()[row.row_index]), **spec.generation}
    assert requests.post(f"{server}/chat/completions", json=asked, timeout=120).json()["choices"][0]["message"]["content"] == row.output


@processes
@pytest.mark.django_db(transaction=True)
def test_the_real_model_scores_arc_challenge_by_log_likelihood_from_its_chat_deployment(server, loopback_deployments, enqueued, project, owner):
    # The demo's deployment is a chat one: log-likelihood asks the same server's /completions.
    deployment = deployment_at(project, server, "chat")
    ev = create_eval(project, owner, deployment=deployment, benchmark="arc_challenge", sample_limit=6, mode="loglikelihood")
    run_eval(ev.pk)
    ev.refresh_from_db()
    assert (ev.status, ev.error_count, ev.done_count) == ("succeeded", 0, 6), ev.status_message
    samples = list(ev.samples.all())
    assert all(s.error == "" and s.score is not None for s in samples)
    assert len({s.output for s in samples}) > 1
    spec = benchmarks.get("arc_challenge")
    for sample in samples[:3]:
        options = spec.choices(spec.rows()[sample.row_index])
        asked = [requests.post(f"{server}/completions", json=loglikelihood.payload(files.MODEL_ID, o), timeout=120) for o in options]
        direct = [loglikelihood.parse(r.content, o, 0) for r, o in zip(asked, options, strict=True)]
        assert loglikelihood.summary(options, direct) == sample.output


@processes
@pytest.mark.django_db(transaction=True)
def test_the_real_model_answers_gsm8k_asked_in_the_user_turn(server, loopback_deployments, enqueued, project, owner):
    """The quick suite's generative benchmark: under the system prompt the model ends its turn at once on most rows (43
    of 50 measured); asked in the user turn it answers most (37 of 50), so its score is of answers of its own."""
    deployment = deployment_at(project, server, "chat")
    answered = {}
    for options in ({}, {"instruction_in_user": True}):
        ev = create_eval(project, owner, deployment=deployment, benchmark="gsm8k", sample_limit=20, seed=0, benchmark_options=options)
        run_eval(ev.pk)
        ev.refresh_from_db()
        assert (ev.status, ev.error_count, ev.done_count) == ("succeeded", 0, 20), ev.status_message
        assert all(s.completion_tokens <= (256 if options else 512) for s in ev.samples.all())
        answered[bool(options)] = sum(1 for s in ev.samples.all() if s.output.strip())
    assert answered[True] >= 12 and answered[True] >= 3 * answered[False], answered
