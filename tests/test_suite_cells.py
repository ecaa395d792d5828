"""Suite cells paid once (issue #43): a cell a finished eval of the project already answered is reused, linked and
shown as reused, never asked again; anything that decides its answers changed is a miss; `force` runs every cell.

Evals run in the test's thread, one after another as the suite queues them (`drain`): no worker threads, no
waiting on time. The deployments cache nothing (time to live 0) unless a test says otherwise, so a request
counted on a fake server is a request the eval sent, whatever the response cache does.
"""

import json

import pytest

from evals import queue as eval_queue
from evals.actions import plan_eval
from evals.benchmarks import gsm8k, mmlu
from evals.models import Deployment, Eval, Sample
from evals.suites.actions import cancel_suite_run, create_suite_run, save_suite
from evals.suites.cells import cell_key
from evals.suites.comparison import compare_suite_runs
from evals.tasks import run_eval

from .fakes.openai_server import FakeOpenAI
from .test_cli import bv  # noqa: F401  (the fixture: bv against a live server)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("loopback_deployments")]
GSM8K = {row.input: row.reference for row in gsm8k.rows()}
MMLU = {row.input: row.reference for row in mmlu.BENCHMARK.rows()}
ENTRIES = [{"benchmark": "gsm8k", "sample_limit": 8}, {"benchmark": "mmlu", "sample_limit": 8}]
ROWS = 16  # requests one run of ENTRIES sends a deployment: a row each


def right(text: str) -> str:
    return f"Answer: {MMLU[text]}" if text in MMLU else f"So\n#### {GSM8K.get(text, '0')}"


def wrong_on_gsm8k(text: str) -> str:
    return right(text) if text in MMLU else "#### -1"


@pytest.fixture
def servers():
    with FakeOpenAI(answer=right) as a, FakeOpenAI(answer=wrong_on_gsm8k) as b:
        yield {"a": a, "b": b}


@pytest.fixture
def deployments(project, servers):
    return {name: Deployment.objects.create(project=project, name=name, base_url=s.url, model=name, cache_ttl_seconds=0) for name, s in servers.items()}


@pytest.fixture
def sent(monkeypatch):
    """The evals the suites send to the queue, in order; `drain` runs them."""
    queued = []
    monkeypatch.setattr(eval_queue, "enqueue", lambda ev: queued.append(ev.pk))
    return queued


def drain(sent: list[int]):
    # Each eval's end queues its deployment's next (evals.queue.advance): bounded, never a wait.
    for _ in range(50):
        if not sent:
            return
        run_eval(sent.pop(0))
    raise AssertionError(f"still queued: {sent}")


def run_on(project, owner, sent, *deployments, entries=ENTRIES, **options):
    run = create_suite_run(project, owner, suite_name="pair", entries=entries, deployments=list(deployments), **options)
    drain(sent)
    return run


def by_benchmark(run, deployment) -> dict[str, Eval]:
    return {ev.benchmark: ev for ev in run.evals.filter(deployment=deployment)}


def reused_benchmarks(run) -> set[str]:
    return set(run.evals.filter(reused_from__isnull=False).values_list("benchmark", flat=True))


def test_a_second_run_reuses_the_first_runs_cells_and_runs_only_the_new_deployment(api, owner_client, project, owner, servers, deployments, sent):
    a, b = deployments["a"], deployments["b"]
    first = run_on(project, owner, sent, a)
    assert len(servers["a"].requests) == ROWS
    originals = by_benchmark(first, a)

    second = create_suite_run(project, owner, suite_name="pair", entries=ENTRIES, deployments=[a, b])
    reused, fresh = by_benchmark(second, a), by_benchmark(second, b)
    # A's cells exist finished before anything ran, and only B's first eval went to the queue.
    assert sent == [fresh["gsm8k"].pk]
    for name, ev in reused.items():
        source = originals[name]
        assert (ev.status, ev.reused_from_id, ev.cell_key) == ("succeeded", source.pk, source.cell_key)
        assert (ev.seed, ev.total, ev.done_count, ev.error_count) == (source.seed, 8, 8, 0)
        assert (ev.score, ev.score_low, ev.score_high) == (source.score, source.score_low, source.score_high) and ev.score == 1.0
        # It cost nothing now: its tokens were paid by the eval it copies.
        assert (ev.prompt_tokens, ev.completion_tokens, ev.cost, ev.passes) == (0, 0, None, 0)
        assert ev.status_message == f"Reused from eval #{source.pk}: its 8 rows were copied; nothing was asked, nothing spent."
        fields = ("row_index", "input", "output", "extracted", "reference", "score", "category", "completions")
        assert list(ev.samples.values_list(*fields)) == list(source.samples.values_list(*fields))
        assert not ev.samples.exclude(prompt_tokens=None).exists() and source.samples.exclude(prompt_tokens=None).count() == 8
        # B scores the same rows: its cells pair with the reused ones.
        assert fresh[name].seed == source.seed
    assert second.notes == [f"{name}: drawn on the rows of eval #{originals[name].pk}, whose finished cells this run reuses." for name in ("gsm8k", "mmlu")]

    drain(sent)
    assert len(servers["a"].requests) == ROWS and len(servers["b"].requests) == ROWS  # nothing asked of A again
    assert {ev.status for ev in second.evals.all()} == {"succeeded"}
    body = api.get(f"/api/v1/suite-runs/{second.pk}").json()
    assert body["status"] == "succeeded" and body["progress"]["reused"] == 2 and body["force"] is False
    cells = {row["benchmark"]: row["cells"] for row in body["table"]}
    assert cells["gsm8k"]["a"]["reused_from"] == originals["gsm8k"].pk and cells["gsm8k"]["b"]["reused_from"] is None
    page = owner_client.get(f"/evals/suite-runs/{second.pk}/").content.decode()
    assert "2 of 4 cells reused" in page and page.count('class="reused"') == 2
    assert f'reused from <a href="/evals/{originals["mmlu"].pk}/">eval #{originals["mmlu"].pk}</a>' in page
    detail = owner_client.get(f"/evals/{reused['gsm8k'].pk}/").content.decode()
    assert 'id="reused-from"' in detail and f'<a href="/evals/{originals["gsm8k"].pk}/">eval #{originals["gsm8k"].pk}</a>, a finished suite cell' in detail


def test_a_suite_comparison_pairs_a_reused_cell_with_a_fresh_one(api, project, owner, deployments, sent):
    a, b = deployments["a"], deployments["b"]
    first = run_on(project, owner, sent, a)
    second = run_on(project, owner, sent, a, b)
    assert reused_benchmarks(second) == {"gsm8k", "mmlu"}

    within = compare_suite_runs(second, second, deployment_a=a, deployment_b=b)  # reused A against fresh B
    rows = {row["benchmark"]: row for row in within["benchmarks"]}
    assert rows["gsm8k"]["n"] == 8 and rows["gsm8k"]["flips"]["right_to_wrong"] == 8 and rows["mmlu"]["delta"] == 0
    assert within["worse"] == ["gsm8k"] and within["gate"] == "fail"
    # The first run against the second's new deployment pairs without same_rows_as: the second took its rows.
    assert compare_suite_runs(first, second, deployment_b=b)["worse"] == ["gsm8k"]
    # A reused cell against the eval it copies: the same answers, row for row.
    same = compare_suite_runs(first, second, deployment_b=a)
    assert [(row["n"], row["delta"]) for row in same["benchmarks"]] == [(8, 0), (8, 0)] and same["gate"] == "pass"
    gate = api.get(f"/api/v1/suite-runs/{second.pk}/compare/{second.pk}", {"deployment_a": "a", "deployment_b": "b"})
    assert gate.status_code == 200 and gate.json()["gate"] == "fail"


def test_force_runs_every_cell_again_and_each_eval_takes_the_runs_cache_mode(project, owner, servers, deployments, sent):
    a = deployments["a"]
    run_on(project, owner, sent, a)
    forced = create_suite_run(project, owner, suite_name="pair", entries=ENTRIES, deployments=[a], force=True, cache="bypass")
    assert (forced.force, forced.cache) == (True, "bypass") and forced.notes == []
    assert [(ev.reused_from_id, ev.cache) for ev in forced.evals.all()] == [(None, "bypass"), (None, "bypass")]
    # Bypassing the cache alone runs every cell too: a reused cell would be the old answers.
    bypassed = create_suite_run(project, owner, suite_name="pair", entries=ENTRIES, deployments=[a], cache="bypass")
    assert [ev.reused_from_id for ev in bypassed.evals.all()] == [None, None]
    bypassed.evals.update(status="cancelled")
    drain(sent)
    assert len(servers["a"].requests) == 2 * ROWS and {ev.status for ev in forced.evals.all()} == {"succeeded"}
    # A later run reuses the newest finished cell of each key: the forced run's.
    later = create_suite_run(project, owner, suite_name="pair", entries=ENTRIES, deployments=[a])
    assert {ev.reused_from_id for ev in later.evals.all()} == set(forced.evals.values_list("pk", flat=True))


def change_epochs(a):
    return {"epochs": 2}


def change_option(a):
    return {"entries": [{**ENTRIES[0], "options": {"lm_eval_prompt": True}}, ENTRIES[1]]}


def change_sample_limit(a):
    return {"entries": [ENTRIES[0], {**ENTRIES[1], "sample_limit": 9}]}


def change_served_fingerprint(a):
    # What the server says it serves, as last seen (its /models entry; this fake lists none, so it stays).
    Deployment.objects.filter(pk=a.pk).update(served_fingerprint="models:0f3c9a1b2d4e5f60")
    a.refresh_from_db()
    return {}


def change_model(a):
    a.model = "a-v2"
    a.save()
    return {}


@pytest.mark.parametrize(
    "change, still_reused",
    [
        (change_epochs, set()),
        (change_option, {"mmlu"}),
        (change_sample_limit, {"gsm8k"}),
        (change_served_fingerprint, set()),
        (change_model, set()),
    ],
)
def test_a_change_to_what_decides_the_answers_is_a_miss(project, owner, servers, deployments, sent, change, still_reused):
    a = deployments["a"]
    run_on(project, owner, sent, a)
    options = change(a)
    again = create_suite_run(project, owner, suite_name="pair", **{"entries": ENTRIES, **options}, deployments=[a])
    assert reused_benchmarks(again) == still_reused
    missed = again.evals.filter(reused_from__isnull=True)
    assert missed.count() == 2 - len(still_reused) and set(missed.values_list("status", flat=True)) <= {"pending", "queued"}


def test_the_cell_key_holds_what_decides_the_answers_and_nothing_else(project, deployments):
    a, b = deployments["a"], deployments["b"]
    plan = plan_eval(project, deployment=a, benchmark="gsm8k", sample_limit=8, seed=1)
    key = cell_key(Eval(**plan))
    assert cell_key(Eval(**{**plan, "generation": {"temperature": 0.7}})) != key
    assert cell_key(Eval(**{**plan, "generation": {"max_tokens": 64}})) != key
    assert cell_key(Eval(**{**plan, "seed": 2})) != key  # other rows
    assert cell_key(Eval(**{**plan, "generation": {"temperature": 0}})) == cell_key(Eval(**{**plan, "generation": {"temperature": 0.0}}))
    # Neither the deployment's name, key, prices and concurrency nor the response cache mode change an answer.
    twin = Deployment.objects.create(
        project=project, name="twin", base_url=a.base_url + "/", model="a", api_key="sk-twin-123456", max_in_flight=3, input_price_per_million=1
    )
    assert cell_key(Eval(**{**plan, "deployment": twin})) == key and cell_key(Eval(**{**plan, "cache": "bypass"})) == key
    twin.api_style = Deployment.Style.COMPLETIONS
    assert cell_key(Eval(**{**plan, "deployment": twin})) != key
    # A whole split is the same rows whatever the seed.
    whole = plan_eval(project, deployment=a, benchmark="gsm8k", seed=1)
    assert cell_key(Eval(**{**whole, "seed": 2})) == cell_key(Eval(**whole)) != key
    # A judged cell: the judge's identity is in it, its name is not.
    judged = plan_eval(project, deployment=a, benchmark="mt_bench", judge=b, sample_limit=4, seed=1)
    judged_key = cell_key(Eval(**judged))
    b.name = "renamed judge"
    assert cell_key(Eval(**judged)) == judged_key
    b.served_fingerprint = "models:1234abcd"
    assert cell_key(Eval(**judged)) != judged_key


def test_a_model_swapped_behind_the_same_name_is_a_miss(project, owner, servers, deployments, sent):
    a = deployments["a"]
    servers["a"].models = [{"id": "a", "object": "model", "root": "/checkpoints/step-1000"}]
    first = run_on(project, owner, sent, a)
    a.refresh_from_db()
    assert a.served_fingerprint.startswith("models:")
    unchanged = create_suite_run(project, owner, suite_name="pair", entries=ENTRIES, deployments=[a])
    assert {ev.reused_from_id for ev in unchanged.evals.all()} == set(first.evals.values_list("pk", flat=True))
    # Nothing ran on it since: the run asks its server what it serves before matching.
    servers["a"].models = [{"id": "a", "object": "model", "root": "/checkpoints/step-2000"}]
    swapped = create_suite_run(project, owner, suite_name="pair", entries=ENTRIES, deployments=[a])
    assert reused_benchmarks(swapped) == set()


def test_a_cell_keyed_on_what_its_answers_said_they_came_from_is_reused(project, owner, servers, sent):
    # The response cache on (the default): the engine learns the answers' system_fingerprint while the eval runs,
    # after its key was made; the key is made again when it finishes, or its first repeat would never match.
    servers["a"].system_fingerprint = "fp_44709d6fcb"
    a = Deployment.objects.create(project=project, name="a", base_url=servers["a"].url, model="a")
    first = run_on(project, owner, sent, a)
    a.refresh_from_db()
    assert "fp_44709d6fcb" in a.served_fingerprint
    again = create_suite_run(project, owner, suite_name="pair", entries=ENTRIES, deployments=[a])
    assert {ev.reused_from_id for ev in again.evals.all()} == set(first.evals.values_list("pk", flat=True))


def test_another_projects_finished_cell_is_never_reused(project, owner, outsider, outsider_project, servers, deployments, sent):
    a = deployments["a"]
    # The same endpoint and model, registered in another project: its answers are that project's.
    theirs = Deployment.objects.create(project=outsider_project, name="a", base_url=a.base_url, model="a", cache_ttl_seconds=0)
    elsewhere = run_on(outsider_project, outsider, sent, theirs)
    assert {ev.status for ev in elsewhere.evals.all()} == {"succeeded"}
    ours = create_suite_run(project, owner, suite_name="pair", entries=ENTRIES, deployments=[a])
    assert reused_benchmarks(ours) == set() and ours.notes == []
    assert {ev.cell_key for ev in ours.evals.all()} & {ev.cell_key for ev in elsewhere.evals.all()} == set()  # other rows: their own seed
    drain(sent)
    # Ours finished too: theirs still reuses only its own.
    again = create_suite_run(outsider_project, outsider, suite_name="pair", entries=ENTRIES, deployments=[theirs])
    assert {ev.reused_from_id for ev in again.evals.all()} == set(elsewhere.evals.values_list("pk", flat=True))


def test_an_errored_or_cancelled_cell_is_never_reused(project, owner, servers, deployments, sent, settings):
    # Every other gsm8k row errors, mmlu's are answered, and errors short of all the rows still succeed: a
    # succeeded cell with errors is not reused either.
    settings.MAX_ERROR_FRACTION = 1
    a = deployments["a"]
    servers["a"].always_fail = dict.fromkeys(list(GSM8K)[::2], 400)
    errored = run_on(project, owner, sent, a)
    gsm, mmlu_eval = by_benchmark(errored, a)["gsm8k"], by_benchmark(errored, a)["mmlu"]
    assert (gsm.status, mmlu_eval.error_count) == ("succeeded", 0) and 0 < gsm.error_count < 8
    servers["a"].always_fail = {}
    # Stopped before it ran (a cancel; a budget stops a suite's evals the same way): never finished.
    cancelled = create_suite_run(project, owner, suite_name="pair", entries=ENTRIES, deployments=[a], force=True)
    assert cancel_suite_run(cancelled) == 2
    drain(sent)
    assert {ev.status for ev in cancelled.evals.all()} == {"cancelled"}
    later = create_suite_run(project, owner, suite_name="pair", entries=ENTRIES, deployments=[a])
    assert {ev.benchmark: ev.reused_from_id for ev in later.evals.all()} == {"gsm8k": None, "mmlu": mmlu_eval.pk}


def test_a_cell_answered_by_sampling_without_a_seed_is_reused_only_under_always(project, owner, servers, deployments, sent, monkeypatch):
    # MT-Bench's categories ask at 0.7 with no seed; gsm8k asked the same way stands in for it here (no judge).
    monkeypatch.setattr(gsm8k.BENCHMARK, "generation", {"temperature": 0.7, "max_tokens": 512})
    a = deployments["a"]
    first = by_benchmark(run_on(project, owner, sent, a), a)
    # The engine records which evals drew their answers: one draw of many is no answer to reuse.
    assert (first["gsm8k"].sampled, first["mmlu"].sampled) == (True, False)
    again = create_suite_run(project, owner, suite_name="pair", entries=ENTRIES, deployments=[a])
    assert {ev.benchmark: ev.reused_from_id for ev in again.evals.all()} == {"gsm8k": None, "mmlu": first["mmlu"].pk}
    assert again.notes == [
        f"gsm8k: drawn on the rows of eval #{first['gsm8k'].pk}, so the cells asked again pair with it row for row.",
        f"mmlu: drawn on the rows of eval #{first['mmlu'].pk}, whose finished cells this run reuses.",
        "gsm8k on a runs again: its finished cell's answers were sampled without a seed, one draw of many. Choose the cache mode `always` to reuse them.",
    ]
    # Asked again on the same rows: the two draws pair, row for row.
    assert by_benchmark(again, a)["gsm8k"].seed == first["gsm8k"].seed
    drain(sent)
    assert len(servers["a"].requests) == ROWS + 8
    # `always` takes sampled answers, as the response cache does under it; and a copy of a draw is still that draw.
    always = create_suite_run(project, owner, suite_name="pair", entries=ENTRIES, deployments=[a], cache="always")
    copies = by_benchmark(always, a)
    assert copies["gsm8k"].reused_from_id == by_benchmark(again, a)["gsm8k"].pk and copies["gsm8k"].sampled
    assert not any("sampled" in note for note in always.notes)
    later = create_suite_run(project, owner, suite_name="pair", entries=ENTRIES, deployments=[a])
    assert by_benchmark(later, a)["gsm8k"].reused_from_id is None


def test_a_cell_sampled_with_a_seed_is_reused(project, owner, servers, deployments, sent, monkeypatch):
    # A seed makes the draw the same draw again: the response cache keeps such answers, and so do the cells.
    monkeypatch.setattr(gsm8k.BENCHMARK, "generation", {"temperature": 0.7, "seed": 3, "max_tokens": 512})
    a = deployments["a"]
    first = by_benchmark(run_on(project, owner, sent, a), a)
    assert first["gsm8k"].sampled is False
    again = create_suite_run(project, owner, suite_name="pair", entries=ENTRIES, deployments=[a])
    assert {ev.benchmark: ev.reused_from_id for ev in again.evals.all()} == {"gsm8k": first["gsm8k"].pk, "mmlu": first["mmlu"].pk}


def test_the_form_and_the_api_take_force_and_the_cache_mode(api, owner_client, project, owner, deployments, sent):
    a = deployments["a"]
    save_suite(project, owner, "pair", ENTRIES)
    posted = owner_client.post("/evals/suites/", {"run": "1", "suite": "pair", "deployments": [a.pk], "force": "on", "cache": "bypass"})
    assert posted.status_code == 302, posted.content.decode()[:2000]
    run = a.suite_runs.get()
    assert (run.force, run.cache, set(run.evals.values_list("cache", flat=True))) == (True, "bypass", {"bypass"})
    created = api.post("/api/v1/suite-runs", {"suite": "pair", "deployments": ["b"], "force": True, "cache": "always"}, format="json")
    assert created.status_code == 201, created.content
    assert (created.json()["force"], created.json()["cache"]) == (True, "always")
    refused = api.post("/api/v1/suite-runs", {"suite": "pair", "deployments": ["b"], "cache": "sometimes"}, format="json")
    assert refused.status_code == 400 and "cache" in json.dumps(refused.json())


def test_bv_suites_run_shows_reused_cells_and_force_runs_them(bv, project, owner, deployments, sent, tmp_path):  # noqa: F811
    first = run_on(project, owner, sent, deployments["a"])
    config = tmp_path / "suite.yaml"
    config.write_text("benchmarks:\n  - {benchmark: gsm8k, sample_limit: 8}\n  - {benchmark: mmlu, sample_limit: 8}\n")
    shown = bv("suites", "run", "--config", str(config), "--deployment", "a")
    assert shown.exit_code == 0, shown.output
    assert "2 of 2 cells reused from finished evals" in shown.output
    assert f"reused from eval #{by_benchmark(first, deployments['a'])['gsm8k'].pk}" in shown.output
    forced = bv("suites", "run", "--config", str(config), "--deployment", "a", "--force", "--cache", "bypass", "--json")
    assert forced.exit_code == 0, forced.output
    body = json.loads(forced.stdout)
    assert (body["force"], body["cache"], body["progress"]["reused"]) == (True, "bypass", 0)
    assert Sample.objects.filter(eval__suite_run_id=body["id"]).count() == 0  # queued, not copied
