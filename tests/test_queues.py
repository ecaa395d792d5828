"""One project cannot hold every worker, and evals never queue ahead of paid runs."""

import pytest
from django.utils import timezone
from django_q.brokers import get_broker

from belvedir.sandbox.errors import ProjectAtLimit
from evals.actions import EvalLimitReached, create_eval
from evals.models import Deployment, Eval
from harnesses.actions import start_run
from harnesses.models import Run

from .concurrency import run_concurrently
from .harness_fixtures import fund, harness

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def deployment(project):
    return Deployment.objects.create(project=project, name="d", base_url="https://api.example.com/v1", model="m")


def test_a_flood_of_evals_never_queues_ahead_of_a_paid_run(owner, project, deployment, settings, tmp_path):
    from django_q.models import OrmQ
    from django_q.signing import SignedPackage

    settings.PROJECT_MAX_ACTIVE_EVALS = 100
    fund(project)
    for _ in range(30):
        create_eval(project, owner, deployment=deployment, benchmark="gsm8k", sample_limit=1)
    start_run(harness(project, owner, tmp_path), owner)
    by_queue = {key: OrmQ.objects.filter(key=key).count() for key in OrmQ.objects.values_list("key", flat=True).distinct()}
    assert by_queue == {"belvedir": 1, "evals": 30}
    # The worker of paid runs reads only its own queue: the run is next.
    task = get_broker().dequeue()[0]
    assert SignedPackage.loads(task[1])["func"] == "harnesses.tasks.execute_run"


def test_a_project_holds_at_most_its_limit_of_runs_even_when_started_at_once(owner, project, settings, tmp_path):
    settings.PROJECT_MAX_ACTIVE_RUNS = 3
    fund(project)
    h = harness(project, owner, tmp_path)
    outcomes = run_concurrently(lambda i: start_run(h, owner), 8)
    assert sum(isinstance(o, Run) for o in outcomes) == 3
    refused = [o for o in outcomes if not isinstance(o, Run)]
    assert len(refused) == 5 and all(isinstance(o, ProjectAtLimit) for o in refused), refused
    assert "Nothing was charged" in refused[0].message
    assert Run.objects.filter(project=project).count() == 3


def test_a_project_holds_at_most_its_limit_of_evals(api, owner, project, deployment, settings, outsider, outsider_project):
    settings.PROJECT_MAX_ACTIVE_EVALS = 2
    for _ in range(2):
        create_eval(project, owner, deployment=deployment, benchmark="gsm8k", sample_limit=1)
    with pytest.raises(EvalLimitReached):
        create_eval(project, owner, deployment=deployment, benchmark="gsm8k", sample_limit=1)
    response = api.post("/api/v1/evals", {"benchmark": "gsm8k", "deployment": deployment.pk, "sample_limit": 1}, format="json")
    assert response.status_code == 409 and "its limit" in response.json()["detail"]
    # Another project is not held up by this one.
    theirs = Deployment.objects.create(project=outsider_project, name="d", base_url="https://api.example.com/v1", model="m")
    create_eval(outsider_project, outsider, deployment=theirs, benchmark="gsm8k", sample_limit=1)
    Eval.objects.filter(project=project).update(status="succeeded")
    create_eval(project, owner, deployment=deployment, benchmark="gsm8k", sample_limit=1)


# -- work whose message a killed worker took -----------------------------------------


def _messages(queue) -> list[tuple[str, int]]:
    from django_q.models import OrmQ
    from django_q.signing import SignedPackage

    return [(task["func"], task["args"][0]) for task in (SignedPackage.loads(m.payload) for m in OrmQ.objects.filter(key=queue))]


def _lose_messages():
    """What SIGKILL does to the tasks a Redis worker had popped: gone from the broker, rows still queued."""
    from django_q.models import OrmQ

    OrmQ.objects.all().delete()


def test_a_queued_run_whose_message_was_lost_is_sent_again_once(owner, project, settings, tmp_path, time_machine):
    from harnesses.execution import execute_run
    from harnesses.tasks import requeue_lost_runs

    settings.REQUEUE_AFTER_SECONDS = 60
    time_machine.move_to(timezone.now())
    fund(project)
    h = harness(project, owner, tmp_path)
    lost, claimed = start_run(h, owner), start_run(h, owner)
    Run.objects.filter(pk=claimed.pk).update(status=Run.Status.RUNNING)  # its worker died mid-run: the reaper's, not this
    _lose_messages()

    assert requeue_lost_runs() == 0  # too recent: its message may still be on its way
    time_machine.shift(61)
    assert requeue_lost_runs() == 1
    assert _messages("belvedir") == [("harnesses.tasks.execute_run", lost.pk)]
    _lose_messages()
    assert requeue_lost_runs() == 0  # sent again at most once per REQUEUE_AFTER_SECONDS
    time_machine.shift(61)
    assert requeue_lost_runs() == 1

    # Delivered twice after all (the first message was only slow): it runs once.
    Run.objects.filter(pk=lost.pk).update(status=Run.Status.CANCELLED)  # stands in for the first delivery's claim
    execute_run(lost.pk)
    assert Run.objects.get(pk=lost.pk).status == "cancelled"


def test_nothing_is_sent_again_while_its_queue_still_holds_messages(owner, project, settings, tmp_path, time_machine):
    from harnesses.tasks import requeue_lost_runs

    settings.REQUEUE_AFTER_SECONDS = 60
    time_machine.move_to(timezone.now())
    fund(project)
    h = harness(project, owner, tmp_path)
    start_run(h, owner)
    start_run(h, owner)
    time_machine.shift(61)
    # Workers are behind, not dead: a long backlog must not gain a duplicate of each run every pass.
    assert requeue_lost_runs() == 0
    assert len(_messages("belvedir")) == 2


def test_a_queued_eval_whose_message_was_lost_is_sent_again_on_the_eval_queue(owner, project, deployment, settings, time_machine):
    from evals.tasks import requeue_lost_evals

    settings.REQUEUE_AFTER_SECONDS = 60
    time_machine.move_to(timezone.now())
    ev = create_eval(project, owner, deployment=deployment, benchmark="gsm8k", sample_limit=1)
    _lose_messages()
    time_machine.shift(61)
    assert requeue_lost_evals() == 1
    assert _messages("evals") == [("evals.tasks.run_eval", ev.pk)] and _messages("belvedir") == []
