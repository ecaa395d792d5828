"""The dashboard's lists page with their total, filter by their main fields and sort, asking the same queries
whatever the page; a filter value that is not one of its choices says so beside the filter and lists nothing."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from belvedir.core.listing import PER_PAGE
from evals.models import Deployment, Eval

pytestmark = pytest.mark.django_db

STATUSES = ["succeeded", "failed", "running", "cancelled", "queued"]


@pytest.fixture
def evals_250(project, owner):
    a = Deployment.objects.create(project=project, name="alpha", base_url="http://127.0.0.1:9/v1", model="m")
    b = Deployment.objects.create(project=project, name="beta", base_url="http://127.0.0.1:9/v1", model="m")
    Eval.objects.bulk_create(
        Eval(
            project=project,
            deployment=a if i % 2 else b,
            benchmark="gsm8k" if i % 3 else "mmlu",
            status=STATUSES[i % 5],
            score=None if i % 5 else i / 1000,
            error_count=i % 7 == 0,
            seed=1,
            created_by=owner,
        )
        for i in range(250)
    )
    return a, b


def ids(page: str) -> list[int]:
    return [int(pk) for pk in re.findall(r'<td><a href="/evals/(\d+)/">#', page)]


def test_250_evals_page_by_50_with_the_total_and_the_same_queries_on_every_page(owner_client, evals_250):
    first = owner_client.get("/evals/").content.decode()
    assert len(ids(first)) == PER_PAGE and "250 evals · page 1 of 5" in first and 'rel="next"' in first
    newest = sorted(Eval.objects.values_list("pk", flat=True), reverse=True)
    assert ids(first) == newest[:PER_PAGE]
    seen = []
    counts = []
    for number in range(1, 6):
        with CaptureQueriesContext(connection) as queries:
            page = owner_client.get(f"/evals/?page={number}").content.decode()
        counts.append(len(queries))
        seen += ids(page)
    assert seen == newest  # every eval once, in order, across the five pages
    assert len(set(counts)) == 1, counts  # the fifth page asks what the first did
    last = owner_client.get("/evals/?page=5").content.decode()
    assert 'rel="next"' not in last and 'rel="prev"' in last
    assert ids(owner_client.get("/evals/?page=99").content.decode()) == newest[-PER_PAGE:]  # past the end: the last page


def test_filters_narrow_the_list_and_its_total_and_the_pages_keep_them(owner_client, evals_250):
    alpha, _ = evals_250
    failed = owner_client.get("/evals/?status=failed").content.decode()
    assert "50 evals" in failed and set(Eval.objects.filter(pk__in=ids(failed)).values_list("status", flat=True)) == {"failed"}
    both = owner_client.get(f"/evals/?status=succeeded&deployment={alpha.pk}&benchmark=gsm8k").content.decode()
    expected = Eval.objects.filter(status="succeeded", deployment=alpha, benchmark="gsm8k").count()
    assert f"{expected} eval" in both and len(ids(both)) == expected
    errored = owner_client.get("/evals/?errors=yes").content.decode()
    assert f"{Eval.objects.filter(error_count__gt=0).count()} evals" in errored
    running = owner_client.get("/evals/?status=running&page=1").content.decode()
    assert "?status=running&amp;page=2" not in running  # 50 running: one page
    queued = owner_client.get("/evals/?benchmark=gsm8k").content.decode()
    assert "status=" not in re.search(r'href="\?([^"]*)page=2"', queued).group(1) and "benchmark=gsm8k&amp;" in queued


def test_sorting_by_score_puts_the_best_first_and_evals_without_a_score_last(owner_client, evals_250):
    page = owner_client.get("/evals/?order=-score").content.decode()
    scores = list(Eval.objects.filter(pk__in=ids(page)).values_list("pk", "score"))
    by_pk = dict(scores)
    shown = [by_pk[pk] for pk in ids(page)]
    assert shown == sorted(shown, reverse=True) and None not in shown  # 50 scored evals fill the first page
    last = owner_client.get("/evals/?order=-score&page=5").content.decode()
    assert {Eval.objects.get(pk=pk).score for pk in ids(last)} == {None}


def test_a_value_that_is_not_a_filters_choice_is_named_and_lists_nothing(owner_client, evals_250):
    answer = owner_client.get("/evals/?status=exploded&order=password")
    page = answer.content.decode()
    assert answer.status_code == 200 and "Select a valid choice. exploded is not one of the available choices." in page
    assert ids(page) == [] and "No eval matches these filters." in page


def test_the_jobs_list_filters_by_status_and_pages_with_its_total(owner_client, project, owner):
    from agent_tasks.models import Job

    from .test_agent_job_rules import task_set

    version = task_set(project, owner, ["a"])
    Job.objects.bulk_create(
        Job(project=project, version=version, agents=["nop"], budget_cents=100, status="failed" if i % 4 == 0 else "finished", created_by=owner)
        for i in range(60)
    )
    failed = owner_client.get("/jobs/?status=failed").content.decode()
    assert "15 jobs" in failed and failed.count('<span class="status failed">Failed</span>') == 15
    first = owner_client.get("/jobs/").content.decode()
    assert (
        "60 jobs · page 1 of 2" in first
        and first.count('<span class="status finished">Finished</span>') + first.count('<span class="status failed">Failed</span>') == 50
    )


def test_the_suite_runs_list_pages_and_filters_by_suite_and_deployment(owner_client, project, owner):
    from evals.models import SuiteRun

    a = Deployment.objects.create(project=project, name="alpha", base_url="http://127.0.0.1:9/v1", model="m")
    b = Deployment.objects.create(project=project, name="beta", base_url="http://127.0.0.1:9/v1", model="m")
    for i in range(30):
        run = SuiteRun.objects.create(project=project, suite_name="quick" if i % 3 else "core", entries=[], created_by=owner)
        run.deployments.set([a, b] if i % 2 else [a])
    first = owner_client.get("/evals/suites/").content.decode()
    assert "30 suite runs · page 1 of 2" in first
    core = owner_client.get("/evals/suites/?suite_name=core").content.decode()
    assert "10 suite runs" in core and "page 1 of" not in core
    both = owner_client.get(f"/evals/suites/?deployment={b.pk}").content.decode()
    assert "15 suite runs" in both  # each run once, though it has two deployments


def _deployments(project, owner, n):
    Deployment.objects.bulk_create(
        Deployment(project=project, name=f"{'blue' if i % 3 else 'green'}-{i}", base_url=f"http://127.0.0.{i % 4 + 1}:9/v1", model="m") for i in range(n)
    )


def _datasets(project, owner, n):
    from evals.models import Dataset

    Dataset.objects.bulk_create(Dataset(project=project, name=f"{'blue' if i % 3 else 'green'}-{i}", row_count=i, created_by=owner) for i in range(n))


def _task_sets(project, owner, n):
    from agent_tasks.models import TaskSet

    TaskSet.objects.bulk_create(TaskSet(project=project, name=f"{'blue' if i % 3 else 'green'}-{i}", created_by=owner) for i in range(n))


def _harnesses(project, owner, n):
    from harnesses.models import Harness

    Harness.objects.bulk_create(
        Harness(project=project, name=f"{'blue' if i % 3 else 'green'}-{i}", repo_url="https://example.com/r.git", install_command="true", run_command="true")
        for i in range(n)
    )


def _task_groups(project, owner, n):
    from traces.models import TaskGroup

    TaskGroup.objects.bulk_create(TaskGroup(project=project, key=f"workflow:{i}", name=f"{'blue' if i % 3 else 'green'}-{i}") for i in range(n))


def _evaluators(project, owner, n):
    from traces.models import Evaluator

    Evaluator.objects.bulk_create(
        Evaluator(project=project, name=f"{'blue' if i % 3 else 'green'}-{i}", enabled=bool(i % 2), scorer={"name": "exact_match"}) for i in range(n)
    )


LISTS = {
    "deployments": ("/evals/deployments/", _deployments, "deployment", "api_style=telepathy"),
    "datasets": ("/evals/datasets/", _datasets, "dataset", "order=secret"),
    "task sets": ("/tasks/", _task_sets, "task set", "order=secret"),
    "harnesses": ("/harnesses/", _harnesses, "harness", "compute_type=tpu"),
    "task groups": ("/traces/groups/", _task_groups, "task group", "order=secret"),
    "evaluators": ("/traces/evaluators/", _evaluators, "evaluator", "target=everything"),
}


def names(page: str) -> list[str]:
    return re.findall(r">((?:blue|green)-\d+)<", page)


@pytest.mark.parametrize("which", LISTS)
def test_every_list_pages_with_its_total_filters_by_name_sorts_and_names_a_bad_value(owner_client, project, owner, which):
    url, create, noun, bad = LISTS[which]
    create(project, owner, 60)
    counts = []
    seen = []
    for number in (1, 2):
        with CaptureQueriesContext(connection) as queries:
            page = owner_client.get(f"{url}?page={number}").content.decode()
        counts.append(len(queries))
        seen += names(page)
    assert f"60 {noun}s · page 1 of 2" in owner_client.get(url).content.decode()
    assert len(seen) == 60 and len(set(seen)) == 60  # each row once across the two pages
    assert seen[0] == "blue-59" and seen[-1] == "green-0"  # newest first
    assert counts[0] == counts[1], counts  # the second page asks what the first did
    green = owner_client.get(f"{url}?name=GREEN").content.decode()
    assert f"20 {noun}s" in green and set(n.split("-")[0] for n in names(green)) == {"green"}
    by_name = names(owner_client.get(f"{url}?order=name").content.decode())
    assert by_name == sorted(by_name) and by_name[0] == "blue-1"
    refused = owner_client.get(f"{url}?{bad}")
    assert refused.status_code == 200 and "Select a valid choice." in refused.content.decode() and names(refused.content.decode()) == []
    assert f"No {noun} matches these filters." in refused.content.decode()


def test_a_harness_pages_its_runs_and_filters_them_while_its_chart_keeps_the_latest_scores(owner_client, project, owner):
    from harnesses.models import Harness, Run

    harness = Harness.objects.create(project=project, name="h", repo_url="https://example.com/r.git", install_command="true", run_command="true")
    Run.objects.bulk_create(
        Run(
            project=project,
            harness=harness,
            status="failed" if i % 4 == 0 else "succeeded",
            score=None if i % 4 == 0 else i / 100,
            compute_type="cpu",
            price_cents=1,
        )
        for i in range(70)
    )
    first = owner_client.get(f"/harnesses/{harness.pk}/").content.decode()
    assert "70 runs · page 1 of 2" in first and first.count('<span class="status succeeded">') + first.count('<span class="status failed">') == 50
    failed = owner_client.get(f"/harnesses/{harness.pk}/?status=failed").content.decode()
    assert "18 runs" in failed and '<span class="status succeeded">' not in failed
    latest_scored = Run.objects.filter(harness=harness).exclude(score=None).order_by("-pk").first()
    assert "<svg" in failed and f"#{latest_scored.pk}" in failed  # the chart still draws the latest scored run, which the filter hides
    best = owner_client.get(f"/harnesses/{harness.pk}/?order=-score").content.decode()
    top = Run.objects.filter(harness=harness).exclude(score=None).order_by("-score").first()
    assert re.search(r'href="/runs/(\d+)/"', best[best.index("<h2>Runs</h2>") :]).group(1) == str(top.pk)


def test_the_judges_cards_come_ten_to_a_page(owner_client, project, owner):
    judges = Deployment.objects.bulk_create(Deployment(project=project, name=f"judge-{i}", base_url="http://127.0.0.1:9/v1", model="m") for i in range(12))
    Eval.objects.bulk_create(
        Eval(project=project, deployment=judges[0], judge=judge, benchmark="mt_bench", status="succeeded", seed=1, created_by=owner) for judge in judges
    )
    first = owner_client.get("/evals/judges/").content.decode()
    second = owner_client.get("/evals/judges/?page=2").content.decode()
    assert "12 judges · page 1 of 2" in first and first.count('class="card judge-card"') == 10 and second.count('class="card judge-card"') == 2
    shown = re.findall(r"<h2>(judge-\d+) ", first + second)
    assert sorted(shown) == sorted(f"judge-{i}" for i in range(12))


def test_an_evals_samples_page_with_their_total_and_the_filter_kept(owner_client, project, owner):
    from evals.models import Sample

    deployment = Deployment.objects.create(project=project, name="alpha", base_url="http://127.0.0.1:9/v1", model="m")
    ev = Eval.objects.create(project=project, deployment=deployment, benchmark="gsm8k", status="succeeded", seed=1, created_by=owner, total=120)
    Sample.objects.bulk_create(Sample(eval=ev, row_index=i, input=f"q{i}", output="a", score=float(i % 2)) for i in range(120))
    first = owner_client.get(f"/evals/{ev.pk}/").content.decode()
    assert "120 samples · page 1 of 3" in first
    wrong = owner_client.get(f"/evals/{ev.pk}/?filter=wrong").content.decode()
    assert "60 samples · page 1 of 2" in wrong and 'href="?filter=wrong&amp;page=2"' in wrong
