"""Suites: many benchmarks against many deployments as one run, its table and rerun on the same rows, the comparison
of two runs corrected for multiplicity with its gate, the suite's budget, and the bad input a suite refuses."""

import hashlib
import json
from decimal import Decimal

import pytest

from evals import statistics
from evals.benchmarks import gsm8k, mmlu
from evals.models import Deployment, Eval, Sample, SuiteRun
from evals.subset import select_rows
from evals.suites.actions import QUICK_ROWS, SuiteError, create_suite_run
from evals.suites.comparison import compare_suite_runs, summary

from .fakes.openai_server import FakeOpenAI
from .harness_fixtures import wait_for
from .test_cli import bv  # noqa: F401  (the fixture: bv against a live server)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("loopback_deployments")]
GSM8K = {row.input: row.reference for row in gsm8k.rows()}
MMLU = {row.input: row.reference for row in mmlu.BENCHMARK.rows()}
ENTRIES = [{"benchmark": "gsm8k", "sample_limit": 40}, {"benchmark": "mmlu", "sample_limit": 30}]


def slips(question: str) -> bool:
    """The questions the weaker deployment gets wrong: a fixed two thirds of them, whatever rows are drawn.

    A suite draws its rows with a fresh seed, so how many of the 40 slip varies from run to run. With a third,
    6 or fewer slipped in 0.3 % of draws, and McNemar over 6 discordant rows is not significant after Holm (a red
    CI once); with two thirds that takes fewer than 7 of 40 where 26 are expected, about one draw in 10**9.
    """
    return int(hashlib.sha256(question.encode()).hexdigest(), 16) % 3 != 0


def answer(weak: bool):
    def reply(text: str) -> str:
        if text in MMLU:
            return f"Answer: {MMLU[text]}"
        return "#### -1" if weak and slips(text) else f"So\n#### {GSM8K.get(text, '0')}"

    return reply


@pytest.fixture
def servers():
    with FakeOpenAI(answer=answer(False), latency=0.02) as strong, FakeOpenAI(answer=answer(True), latency=0.02) as weak:
        yield {"strong": strong, "weak": weak}


@pytest.fixture
def deployments(project, servers):
    # A small max_in_flight: two evals of one deployment at once would show in its server's peak.
    return {name: Deployment.objects.create(project=project, name=name, base_url=server.url, model=name, max_in_flight=4) for name, server in servers.items()}


def finished(run_id: int) -> SuiteRun:
    wait_for(lambda: not Eval.objects.filter(suite_run_id=run_id, status__in=Eval.ACTIVE).exists(), timeout=120)
    return SuiteRun.objects.get(pk=run_id)


def test_a_suite_runs_on_two_deployments_as_one_object(api, worker, deployments, servers):
    created = api.post("/api/v1/suite-runs", {"name": "mine", "benchmarks": ENTRIES, "deployments": ["strong", "weak"]}, format="json")
    assert created.status_code == 201, created.content
    run = finished(created.json()["id"])
    body = api.get(f"/api/v1/suite-runs/{run.pk}").json()
    assert body["status"] == "succeeded" and body["progress"] == {"evals": 4, "active": 0, "succeeded": 4, "reused": 0, "stopped": 0, "failed": 0, "errors": 0}
    table = {row["benchmark"]: row["cells"] for row in body["table"]}
    assert list(table) == ["gsm8k", "mmlu"] and set(table["gsm8k"]) == {"strong", "weak"}
    assert table["gsm8k"]["strong"]["score"] == 1.0 and table["mmlu"]["strong"]["score"] == table["mmlu"]["weak"]["score"] == 1.0
    evals = {(ev.benchmark, ev.deployment.name): ev for ev in run.evals.select_related("deployment")}
    drawn = [gsm8k.rows()[i].input for i in select_rows(len(gsm8k.rows()), 40, evals["gsm8k", "weak"].seed)]
    assert table["gsm8k"]["weak"]["score"] == pytest.approx(1 - sum(map(slips, drawn)) / 40)
    assert table["gsm8k"]["weak"]["score_ci"] == pytest.approx(statistics.wilson(40 - sum(map(slips, drawn)), 40).as_list(), abs=1e-6)
    # Every deployment scored the same rows of each benchmark; each deployment ran one eval at a time.
    for name in ("gsm8k", "mmlu"):
        assert evals[name, "strong"].seed == evals[name, "weak"].seed and evals[name, "strong"].total == evals[name, "weak"].total
    assert servers["strong"].peak_in_flight <= 4 and servers["weak"].peak_in_flight <= 4
    # Rerun on the same rows against another deployment: each benchmark's rows come from the first run.
    with FakeOpenAI(answer=answer(False)) as third:
        Deployment.objects.create(project=run.project, name="third", base_url=third.url, model="third")
        again = api.post("/api/v1/suite-runs", {"name": "mine", "benchmarks": ENTRIES, "deployments": ["third"], "same_rows_as": run.pk}, format="json")
        assert again.status_code == 201, again.content
        rerun = finished(again.json()["id"])
    for ev in rerun.evals.all():
        source = evals[ev.benchmark, "strong"]
        assert (ev.seed, ev.sample_limit, ev.same_rows_as_id) == (source.seed, source.sample_limit, source.pk)
    assert rerun.same_rows_as_id == run.pk


def test_two_runs_compared_per_benchmark_with_holm_and_the_gate_exits_0_1_2(bv, api, worker, deployments, project, owner):
    first = create_suite_run(project, owner, suite_name="pair", entries=ENTRIES, deployments=[deployments["strong"]])
    finished(first.pk)
    second = create_suite_run(project, owner, suite_name="pair", entries=ENTRIES, deployments=[deployments["weak"]], same_rows_as=first)
    finished(second.pk)
    result = compare_suite_runs(first, second)
    rows = {row["benchmark"]: row for row in result["benchmarks"]}
    wrong = rows["gsm8k"]["flips"]["right_to_wrong"]
    assert wrong > 5 and rows["gsm8k"]["corrected_verdict"] == "worse" and rows["mmlu"]["corrected_verdict"] == "not decisive"
    # Holm over two benchmarks: the smaller p doubled, the larger at least that.
    p_gsm8k = statistics.mcnemar_exact(0, wrong)
    assert rows["gsm8k"]["p_value"] == p_gsm8k and rows["gsm8k"]["p_adjusted"] == pytest.approx(min(1, 2 * p_gsm8k))
    points = f"−{wrong / 40 * 100:.1f} points"
    assert result["summary"] == f"worse on gsm8k ({points}, significant), nothing else decisive" and result["gate"] == "fail"

    worse = bv("suites", "compare", str(first.pk), str(second.pk), "--fail-if-worse")
    assert worse.exit_code == 1, worse.output
    assert f"worse on gsm8k ({points}, significant)" in worse.output and "Gate: fail" in worse.output
    better = bv("suites", "compare", str(second.pk), str(first.pk), "--fail-if-worse")
    assert better.exit_code == 0 and "better on gsm8k" in better.output
    assert bv("suites", "compare", str(first.pk), str(second.pk)).exit_code == 0  # without the flag it only reports
    # Other rows: forced, or it would reuse the second run's finished cells (and their rows) instead (tests/test_suite_cells.py).
    elsewhere = create_suite_run(project, owner, suite_name="pair", entries=ENTRIES, deployments=[deployments["weak"]], force=True)
    # Finished here: left running, its evals outlived the fake servers' teardown and retried into the worker's 60 s join (48 s a run).
    finished(elsewhere.pk)
    refused = bv("suites", "compare", str(first.pk), str(elsewhere.pk), "--fail-if-worse")
    assert refused.exit_code == 2 and "never paired" in refused.output
    body = json.loads(bv("suites", "compare", str(first.pk), str(second.pk), "--json").stdout)
    assert body["correction"] == "holm" and body["worse"] == ["gsm8k"]
    page = api.get(f"/api/v1/suite-runs/{first.pk}/compare/{elsewhere.pk}")
    assert page.status_code == 400 and "different rows" in page.json()["detail"]


def test_two_deployments_of_one_run_compare_and_the_page_says_what_changed(owner_client, worker, deployments, project, owner):
    run = create_suite_run(project, owner, suite_name="both", entries=ENTRIES, deployments=list(deployments.values()))
    finished(run.pk)
    with pytest.raises(SuiteError, match="say which deployment"):
        compare_suite_runs(run, run)
    result = compare_suite_runs(run, run, deployment_a=deployments["strong"], deployment_b=deployments["weak"])
    assert result["worse"] == ["gsm8k"]
    strong, weak = deployments["strong"].pk, deployments["weak"].pk
    page = owner_client.get(f"/evals/suite-runs/{run.pk}/compare/{run.pk}/?deployment_a={strong}&deployment_b={weak}")
    assert page.status_code == 200
    html = page.content.decode()
    assert "worse on gsm8k" in html and 'class="gate-fail"' in html and "Holm" in html
    table = owner_client.get(f"/evals/suite-runs/{run.pk}/").content.decode()
    assert table.count('class="cell"') == 4 and "scores by benchmark and deployment" in table and "strong" in table and "weak" in table


def test_the_suite_budget_stops_every_eval_of_the_run(worker, project, owner, servers):
    priced = Deployment.objects.create(
        project=project, name="priced", base_url=servers["strong"].url, model="m", max_in_flight=4, input_price_per_million=Decimal(100)
    )
    entries = [*ENTRIES, {"benchmark": "arc_challenge", "sample_limit": 10}]
    # ~$0.005-0.01 a request (50-100 prompt tokens at $100 a million): gsm8k's 40 rows fit, mmlu's do not.
    run = create_suite_run(project, owner, suite_name="budget", entries=entries, deployments=[priced], max_cost=Decimal("0.3"))
    run = finished(run.pk)
    gsm, mmlu_eval, arc = run.evals.order_by("pk")
    assert gsm.status == "succeeded" and gsm.cost < Decimal("0.3")
    for ev in (mmlu_eval, arc):
        assert ev.status == "cancelled" and f"suite run #{run.pk} reached its budget" in ev.status_message
    assert 0 < mmlu_eval.done_count < 30 and arc.started_at is None and arc.done_count == 0  # the pending one never started
    spent = gsm.cost + mmlu_eval.cost
    per_request = max(s.prompt_tokens for s in Sample.objects.filter(eval__suite_run=run)) * Decimal(100) / 1_000_000
    assert Decimal("0.3") <= spent <= Decimal("0.3") + 4 * per_request  # past it by at most what was in flight


def test_bad_suites_are_refused_with_nothing_created(api, project, owner, deployments, settings):
    def refused(payload, message):
        response = api.post("/api/v1/suite-runs", payload, format="json")
        assert response.status_code == 400 and message in json.dumps(response.json()), response.content

    refused({"name": "x", "benchmarks": ["gsm8k", "mmlu_pro"], "deployments": ["strong"]}, "Unknown benchmark 'mmlu_pro'")
    refused({"suite": "nightly", "deployments": ["strong"]}, "No suite named 'nightly'")
    refused({"suite": "quick", "deployments": ["strong", "strong"]}, "listed twice")
    refused({"suite": "quick", "deployments": ["nobody"]}, "No deployment 'nobody'")
    refused({"name": "x", "benchmarks": [{"benchmark": "gsm8k", "sample_limit": 0}], "deployments": ["strong"]}, "positive whole number")
    refused({"name": "x", "benchmarks": [{"benchmark": "gsm8k", "mode": "loglikelihood"}], "deployments": ["strong"]}, "runs in generative mode only")
    settings.EVAL_RETRY_BASE_SECONDS = 0.01
    Deployment.objects.create(project=project, name="down", base_url="http://127.0.0.1:9/v1", model="judge")  # nothing listens there
    refused({"name": "x", "benchmarks": ["mt_bench"], "deployments": ["strong"], "judge": "down"}, "The judge deployment down cannot be reached")
    refused({"name": "x", "benchmarks": ["mt_bench"], "deployments": ["strong"]}, "graded by an LLM judge")
    assert not SuiteRun.objects.exists() and not Eval.objects.exists()


def test_the_quick_suite_is_the_catalog_at_100_rows_and_leaves_out_what_needs_a_judge(project, owner, deployments):
    run = create_suite_run(project, owner, suite_name="quick", deployments=[deployments["strong"]])
    evals = list(run.evals.order_by("pk"))
    assert [ev.benchmark for ev in evals] == [e["benchmark"] for e in run.entries] and "mt_bench" not in run.entries
    assert run.notes == ["mt_bench left out: it is graded by an LLM judge, and no judge was chosen."]
    assert {ev.sample_limit for ev in evals} == {QUICK_ROWS}
    # One eval is queued (the deployment's turn); the rest wait as pending.
    assert sorted(ev.status for ev in evals).count("queued") == 1 and sum(ev.status == "pending" for ev in evals) == len(evals) - 1


def test_summary_names_categories_that_moved_inside_an_undecided_benchmark():
    rows = [
        {"benchmark": "mbpp", "corrected_verdict": "worse", "delta": -0.062, "by_category": {}},
        {
            "benchmark": "mmlu",
            "corrected_verdict": "not decisive",
            "delta": 0.01,
            "by_category": {"group": [{"name": "STEM", "corrected_verdict": "better"}, {"name": "Other", "corrected_verdict": "not decisive"}]},
        },
        {"benchmark": "gsm8k", "corrected_verdict": "not decisive", "delta": 0.0, "by_category": {}},
    ]
    assert summary(rows) == "worse on mbpp (−6.2 points, significant), better on mmlu/stem, nothing else decisive"
    # A benchmark whose two evals were served by different stacks is named, its verdict kept.
    rows[2]["serving"] = {"same": False}
    rows[0]["serving"] = {"same": True}
    assert summary(rows).endswith("nothing else decisive (gsm8k: served by different stacks)")


def test_a_benchmark_significant_alone_is_not_after_holm_and_the_gate_passes(worker, project, owner, servers):
    # B gets wrong six gsm8k rows A got right, and nothing else changes: McNemar's exact p is 2 / 2**6 = 0.031,
    # below α alone, but Holm over the two benchmarks doubles it to 0.0625, and mmlu (unchanged, p = 1) does not help.
    wrong = set()
    reply = answer(False)
    with FakeOpenAI(answer=lambda text: "#### -1" if text in wrong else reply(text)) as six:
        strong = Deployment.objects.create(project=project, name="strong", base_url=servers["strong"].url, model="strong", max_in_flight=4)
        slipping = Deployment.objects.create(project=project, name="six", base_url=six.url, model="six", max_in_flight=4)
        first = finished(create_suite_run(project, owner, suite_name="pair", entries=ENTRIES, deployments=[strong]).pk)
        wrong.update(sorted(Sample.objects.filter(eval__suite_run=first, eval__benchmark="gsm8k").values_list("input", flat=True))[:6])
        second = finished(create_suite_run(project, owner, suite_name="pair", entries=ENTRIES, deployments=[slipping], same_rows_as=first).pk)
    result = compare_suite_runs(first, second)
    rows = {row["benchmark"]: row for row in result["benchmarks"]}
    gsm = rows["gsm8k"]
    assert (gsm["flips"]["right_to_wrong"], gsm["flips"]["wrong_to_right"]) == (6, 0)
    assert gsm["p_value"] == pytest.approx(0.03125) and gsm["verdict"] == "worse"  # the raw p-value would fail the gate
    assert gsm["p_adjusted"] == pytest.approx(0.0625) and gsm["corrected_verdict"] == "not decisive"
    assert rows["mmlu"]["corrected_verdict"] == "not decisive"
    assert (result["worse"], result["gate"], result["summary"]) == ([], "pass", "nothing decisive")
