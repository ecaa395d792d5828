"""A failure never looks like a success: an eval whose rows errored past the limit, or a job whose trials did, ends
`failed`, red wherever it is shown (its page, the list, its suite run, the API, bv's exit code), and says why and what
to do."""

import pytest
from click.testing import CliRunner

from agent_tasks import jobs, trials
from agent_tasks.models import Job
from belvedir.sandbox.models import SandboxHost
from belvedir_cli.main import cli
from evals.actions import create_eval, retry_errors
from evals.benchmarks import gsm8k
from evals.models import Deployment, Eval
from evals.subset import select_rows
from evals.suites.actions import create_suite_run
from evals.tasks import run_eval

from .fakes.openai_server import FakeOpenAI
from .harness_fixtures import fund, wait_for
from .test_agent_job_rules import task_set

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("loopback_deployments")]

REFERENCES = {row["input"]: row["reference"] for row in gsm8k.rows()}


@pytest.fixture(autouse=True)
def quick_retries(settings):
    settings.EVAL_RETRY_BASE_SECONDS = 0.01
    settings.MAX_ERROR_FRACTION = 0.1


@pytest.fixture
def fake():
    with FakeOpenAI(answer=lambda question: f"#### {REFERENCES.get(question, '0')}") as server:
        yield server


@pytest.fixture
def gone(project):
    """A deployment whose address refuses every connection: its server has stopped."""
    with FakeOpenAI() as server:
        url = server.url
    return Deployment.objects.create(project=project, name="gone", base_url=url, model="m")


def test_an_eval_whose_every_request_failed_to_connect_is_failed_everywhere_it_is_shown(project, owner, gone, owner_client, api):
    ev = create_eval(project, owner, deployment=gone, benchmark="gsm8k", sample_limit=5, seed=1)
    run_eval(ev.pk)
    ev.refresh_from_db()

    assert (ev.status, ev.done_count, ev.error_count, ev.score) == ("failed", 5, 5, None)
    assert ev.status_message.startswith("5 of its 5 rows errored (none may") and "Retry the errored rows" in ev.status_message
    page = owner_client.get(f"/evals/{ev.pk}/").content.decode()
    assert '<span class="status failed">Failed</span>' in page and "Succeeded" not in page
    assert '<span class="error" id="error-count"><strong>5</strong> errored</span>' in page
    assert "Retry the 5 errored samples" in page
    listed = owner_client.get("/evals/").content.decode()
    assert '<span class="status failed">Failed</span>' in listed and '<td class="error">5</td>' in listed
    body = api.get(f"/api/v1/evals/{ev.pk}").json()
    assert (body["status"], body["error_count"]) == ("failed", 5) and "5 of its 5 rows errored" in body["status_message"]


@pytest.mark.parametrize(("failing", "status"), [(0, "succeeded"), (1, "succeeded"), (2, "failed")])
def test_errors_past_the_stated_fraction_fail_the_eval_and_a_retry_that_answers_them_succeeds_it(project, owner, fake, failing, status):
    # 12 rows, at most 10% may error: 1 (8%) may, 2 (17%) may not.
    rows = gsm8k.rows()
    for i in select_rows(len(rows), 12, 4)[:failing]:
        fake.always_fail[rows[i]["input"]] = 503
    deployment = Deployment.objects.create(project=project, name="fake", base_url=fake.url, model="m")
    ev = create_eval(project, owner, deployment=deployment, benchmark="gsm8k", sample_limit=12, seed=4)
    run_eval(ev.pk)
    ev.refresh_from_db()
    assert (ev.status, ev.done_count, ev.error_count, ev.score) == (status, 12, failing, 1.0 if failing < 12 else None)
    assert ("at most 10% may" in ev.status_message) == (status == "failed")
    if not failing:
        return
    fake.always_fail.clear()
    assert retry_errors(ev) == failing
    run_eval(ev.pk)
    ev.refresh_from_db()
    assert (ev.status, ev.error_count) == ("succeeded", 0)


def test_a_suite_run_with_a_failed_eval_is_failed_on_its_page_and_in_the_api(project, owner, gone, fake, owner_client, api, worker):
    good = Deployment.objects.create(project=project, name="good", base_url=fake.url, model="m")
    entries = [{"benchmark": "gsm8k", "sample_limit": 3, "mode": "generative", "options": {}}]
    run = create_suite_run(project, owner, suite_name="one", entries=entries, deployments=[good, gone])
    wait_for(lambda: not run.evals.filter(status__in=Eval.ACTIVE).exists(), timeout=60)
    assert dict(run.evals.values_list("deployment__name", "status")) == {"good": "succeeded", "gone": "failed"}
    assert api.get(f"/api/v1/suite-runs/{run.pk}").json()["status"] == "failed"
    page = owner_client.get(f"/evals/suite-runs/{run.pk}/").content.decode()
    assert 'Status <span class="status failed">failed</span>' in page and '<span class="error">3 errors</span>' in page
    listed = owner_client.get("/evals/suites/").content.decode()
    assert '<span class="status failed">failed</span>' in listed


def test_a_comparison_with_a_failed_side_fails_its_gate_whatever_its_verdict(project, owner, fake, api, worker):
    deployment = Deployment.objects.create(project=project, name="fake", base_url=fake.url, model="m")
    entries = [{"benchmark": "gsm8k", "sample_limit": 12}]
    a = create_suite_run(project, owner, suite_name="one", entries=entries, deployments=[deployment])
    wait_for(lambda: not a.evals.filter(status__in=Eval.ACTIVE).exists(), timeout=60)
    first = a.evals.get()
    # B asks the same rows again (the cache bypassed), two of its twelve erroring: every answer B has is right.
    for question in first.samples.order_by("row_index").values_list("input", flat=True)[:2]:
        fake.always_fail[question] = 503
    b = create_suite_run(project, owner, suite_name="one", entries=entries, deployments=[deployment], same_rows_as=a, force=True, cache="bypass")
    wait_for(lambda: not b.evals.filter(status__in=Eval.ACTIVE).exists(), timeout=60)
    second = b.evals.get()
    assert (first.status, second.status, second.error_count) == ("succeeded", "failed", 2)
    body = api.get(f"/api/v1/suite-runs/{a.pk}/compare/{b.pk}").json()
    assert (body["worse"], body["failed"], body["gate"]) == ([], ["gsm8k"], "fail")
    paired = api.get(f"/api/v1/evals/{first.pk}/compare/{second.pk}").json()
    assert (paired["a"]["status"], paired["b"]["status"], paired["verdict"]) == ("succeeded", "failed", "not decisive")


# -- jobs -------------------------------------------------------------------------------------------------------------


@pytest.fixture
def job_host(db, settings):
    settings.TRIAL_PRICE_CENTS = 5
    SandboxHost.objects.update(enabled=False)
    return SandboxHost.objects.create(name="jobs", backend="fake", url="fake://jobs", capacity=4)


def ending(errors: set[str]):
    """An `execute` that ends a trial as a sandbox would: the tasks named errored (the verifier wrote no reward), the rest
    scored 1."""

    def execute(trial, agent=None, **kwargs):
        if trial.task.name in errors:
            return trials.finish(trial, trials.TrialResult(error=f"The verifier of {trial.task.name} wrote no reward."))
        return trials.finish(trial, trials.TrialResult(reward=1.0))

    return execute


def test_a_job_whose_every_trial_errored_is_failed_on_its_pages_in_the_api_and_in_bvs_exit_code(
    project, owner, job_host, worker, monkeypatch, owner_client, api, live_server, api_key, tmp_path
):
    fund(project, 1000)
    task_set(project, owner, ["a", "b"])
    monkeypatch.setattr(jobs, "execute", ending({"a", "b"}))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    env = {"BELVEDIR_API_KEY": api_key, "BELVEDIR_BASE_URL": live_server.url}
    ran = CliRunner().invoke(cli, ["jobs", "run", "set", "--agent", "nop", "--budget", "1", "--wait"], env=env, obj={})

    assert ran.exit_code == 1, ran.output
    assert "Job #" in ran.stdout and " failed: 2/2 trials ended, 2 errored" in ran.stdout
    assert "2 of its 2 trials errored (none may)" in ran.stderr
    job = Job.objects.get()
    assert job.status == "failed" and "The first error: The verifier of a wrote no reward." in job.status_message
    body = api.get(f"/api/v1/jobs/{job.pk}").json()
    assert (body["status"], body["progress"]["errored"]) == ("failed", 2) and "2 of its 2 trials errored" in body["status_message"]
    page = owner_client.get(job.get_absolute_url()).content.decode()
    assert '<span class="status failed">Failed</span>' in page and "Finished" not in page
    assert 'id="job-status-message"' in page and '<span class="error">2 errored</span>' in page
    listed = owner_client.get("/jobs/").content.decode()
    assert '<span class="status failed">Failed</span>' in listed and '<span class="error">2 errored</span>' in listed


@pytest.mark.parametrize(("errored", "status"), [(0, "finished"), (1, "finished"), (2, "failed")])
def test_a_jobs_trials_erroring_past_the_stated_fraction_fail_it(project, owner, job_host, worker, monkeypatch, errored, status):
    # 12 trials, at most 10% may error: 1 (8%) may, 2 (17%) may not.
    fund(project, 1000)
    names = [f"t{i:02d}" for i in range(12)]
    version = task_set(project, owner, names)
    monkeypatch.setattr(jobs, "execute", ending(set(names[:errored])))
    job = jobs.create_job(project, owner, version=version, agents=["nop"], budget_cents=1000)
    wait_for(lambda: Job.objects.get(pk=job.pk).status != "running", timeout=60)
    job.refresh_from_db()
    assert job.status == status
    assert ("at most 10% may" in job.status_message) == (status == "failed")


def test_a_job_none_of_whose_trials_ran_is_failed_naming_why(project, owner, job_host, worker):
    version = task_set(project, owner, ["a"])
    job = jobs.create_job(project, owner, version=version, agents=["nop"], budget_cents=1000)  # the project has no balance
    wait_for(lambda: Job.objects.get(pk=job.pk).status != "running", timeout=60)
    job.refresh_from_db()
    assert job.status == "failed" and job.status_message.startswith("None of its 1 trials ran: Not started: Insufficient balance: $0.00 available")


def test_a_job_comparison_with_a_failed_side_fails_its_gate(project, owner, job_host, worker, monkeypatch, api):
    fund(project, 1000)
    version = task_set(project, owner, ["a", "b", "c"])
    monkeypatch.setattr(jobs, "execute", ending(set()))
    a = jobs.create_job(project, owner, version=version, agents=["nop"], budget_cents=1000)
    wait_for(lambda: Job.objects.get(pk=a.pk).status != "running", timeout=60)
    monkeypatch.setattr(jobs, "execute", ending({"c"}))
    b = jobs.create_job(project, owner, version=version, agents=["nop"], budget_cents=1000)
    wait_for(lambda: Job.objects.get(pk=b.pk).status != "running", timeout=60)
    body = api.get(f"/api/v1/jobs/{a.pk}/compare/{b.pk}").json()
    # Every task B scored, it solved as A did: no verdict of worse, and the gate fails all the same.
    assert (body["verdict"], body["failed"], body["gate"]) == ("not decisive", [b.pk], "fail")
    assert (body["a"]["status"], body["b"]["status"]) == ("finished", "failed")
