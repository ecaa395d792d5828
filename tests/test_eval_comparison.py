"""Same rows and paired comparisons: evals that share rows decide, evals that do not are never paired."""

from decimal import Decimal

import pytest

from evals import serving
from evals.actions import create_eval, resume_eval
from evals.models import Eval, Sample
from evals.tasks import run_eval

from .eval_pairs import ROWS, SEED, PairedEvals, questions

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("loopback_deployments")]


@pytest.fixture
def pairs(project, owner):
    with PairedEvals(project, owner) as p:
        yield p


def rows_of(ev):
    return list(Sample.objects.filter(eval=ev).order_by("row_index").values_list("row_index", "input"))


def test_it_scores_exactly_the_rows_of_an_earlier_eval_on_another_deployment(api, pairs):
    a = pairs.run("a")
    deployment = pairs.deployment("b")
    created = api.post("/api/v1/evals", {"deployment": "b", "same_rows_as": a.pk}, format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["benchmark"], body["sample_limit"], body["seed"], body["same_rows_as"]) == ("gsm8k", ROWS, SEED, a.pk)
    b = Eval.objects.get(pk=body["id"])
    assert b.deployment == deployment
    run_eval(b.pk)
    assert rows_of(b) == rows_of(a) and len(rows_of(a)) == ROWS
    refused = api.post("/api/v1/evals", {"deployment": "b", "same_rows_as": a.pk, "seed": 5}, format="json")
    assert refused.status_code == 400 and "leave them unset" in refused.json()["detail"]


def test_the_same_rows_survive_a_cancel_and_resume(project, owner, pairs, monkeypatch):
    from evals.engine import EvalRun

    a = pairs.run("a")
    deployment = pairs.deployment("slow", latency=0.05, max_in_flight=1)
    b = create_eval(project, owner, deployment=deployment, same_rows_as=a)
    original = EvalRun._write

    def cancel_after_five(self, batch):
        # A user's cancel, landing once five rows are stored.
        if original(self, batch) or Sample.objects.filter(eval=self.eval).count() < 5:
            return not Eval.objects.filter(pk=self.eval.pk, status="running").exists()
        Eval.objects.filter(pk=self.eval.pk, status="running").update(status="cancelled")
        return True

    monkeypatch.setattr(EvalRun, "_write", cancel_after_five)
    run_eval(b.pk)
    monkeypatch.setattr(EvalRun, "_write", original)
    b.refresh_from_db()
    assert b.status == "cancelled" and 5 <= b.done_count < ROWS
    assert resume_eval(b)
    run_eval(b.pk)
    b.refresh_from_db()
    assert (b.status, b.done_count) == ("succeeded", ROWS)
    assert rows_of(b) == rows_of(a)


def test_a_paired_comparison_lists_exactly_the_flipped_rows(api, pairs):
    asked = questions()
    a = pairs.run("a", wrong=asked[:3])
    b = pairs.run("b", wrong=asked[2:20])  # row 2 wrong in both; 3..19 newly wrong; 0, 1 newly right
    body = api.get(f"/api/v1/evals/{a.pk}/compare/{b.pk}").json()
    assert body["n"] == ROWS and body["unpaired"] == 0
    assert body["flips"] == {"right_to_wrong": 17, "wrong_to_right": 2}
    flipped = {f["input"]: f["direction"] for f in body["flipped"]}
    assert flipped == {**{q: "right_to_wrong" for q in asked[3:20]}, **{q: "wrong_to_right" for q in asked[:2]}}
    one = next(f for f in body["flipped"] if f["input"] == asked[5])
    assert one["output_a"].endswith(one["reference"]) and one["output_b"] == "#### -1"
    assert body["a"]["score"] == pytest.approx(37 / 40) and body["b"]["score"] == pytest.approx(22 / 40)
    assert body["delta"] == pytest.approx(-15 / 40)
    low, high = body["delta_ci"]
    assert low < -15 / 40 < high < 0
    assert body["mcnemar_p"] < 0.001 and body["verdict"] == "worse" and body["rows_needed"] is None
    assert body["a"]["score_ci"][0] < 37 / 40 < body["a"]["score_ci"][1]
    reverse = api.get(f"/api/v1/evals/{b.pk}/compare/{a.pk}").json()
    assert reverse["verdict"] == "better" and reverse["flips"] == {"right_to_wrong": 2, "wrong_to_right": 17}


def test_evals_whose_servers_differ_only_in_their_server_header_are_flagged_when_compared(api, owner_client, pairs):
    a = pairs.run("a", server="vllm/0.6.3")
    b = pairs.run("b", server="sglang/0.4.1")
    c = pairs.run("c", server="vllm/0.6.3")
    assert a.serving_stack["server"] == ["vllm/0.6.3"] and 1 <= a.serving_stack["peak_in_flight"] <= ROWS
    flagged = api.get(f"/api/v1/evals/{a.pk}/compare/{b.pk}").json()
    assert flagged["verdict"] == "not decisive"  # the same answers: the difference, if any, would be the stack's
    assert flagged["serving"]["differs"] == [{"part": "server", "label": "Server header", "a": "vllm/0.6.3", "b": "sglang/0.4.1"}]
    assert flagged["serving"]["warning"].startswith("Served by different stacks (Server header vllm/0.6.3 against sglang/0.4.1)")
    same = api.get(f"/api/v1/evals/{a.pk}/compare/{c.pk}").json()["serving"]
    assert (same["same"], same["differs"], same["warning"]) == (True, [], "")
    assert 'id="serving-stacks"' in owner_client.get(f"/evals/{a.pk}/compare/{b.pk}/").content.decode()
    assert 'id="serving-stacks"' not in owner_client.get(f"/evals/{a.pk}/compare/{c.pk}/").content.decode()
    assert "Served by: Server header vllm/0.6.3; at most" in owner_client.get(f"/evals/{a.pk}/").content.decode()
    assert api.get(f"/api/v1/evals/{b.pk}").json()["served_by"].startswith("Server header sglang/0.4.1; at most")
    # A part one side never saw (answered wholly from the cache: no header) is no difference; an eval stamped
    # before stamps were kept cannot tell at all.
    Eval.objects.filter(pk=c.pk).update(serving_stack={**c.serving_stack, "server": []})
    assert api.get(f"/api/v1/evals/{b.pk}/compare/{c.pk}").json()["serving"]["same"] is True
    Eval.objects.filter(pk=c.pk).update(serving_stack={})
    assert api.get(f"/api/v1/evals/{a.pk}/compare/{c.pk}").json()["serving"] is None


def test_a_resumed_evals_stamp_keeps_what_each_pass_saw():
    first = serving.Seen()
    first.headers({"Server": "vllm/0.6.3"})
    first.reply("fp_1", in_flight=8)
    stamp = first.stamp({}, models="abc")
    second = serving.Seen()
    second.headers({"Server": "vllm/0.6.4"})
    second.reply("fp_1", in_flight=3)
    second.reply(" fp_2\n", in_flight=2)
    assert second.stamp(stamp, models="") == {
        "server": ["vllm/0.6.3", "vllm/0.6.4"],
        "models": "abc",
        "system_fingerprints": ["fp_1", "fp_2"],
        "peak_in_flight": 8,
    }
    # A server that names itself anew on every answer is kept as a few names, not thousands.
    many = serving.Seen()
    for n in range(100):
        many.headers({"Server": f"edge-{n}"})
    assert many.servers == [f"edge-{n}" for n in range(serving.KEPT)]


def test_a_small_gap_is_not_decisive_and_says_how_many_rows_would_be(api, pairs):
    asked = questions()
    a = pairs.run("a", wrong=asked[:10])
    b = pairs.run("b", wrong=asked[:8])
    body = api.get(f"/api/v1/evals/{a.pk}/compare/{b.pk}").json()
    assert body["verdict"] == "not decisive" and body["mcnemar_p"] == 0.5
    assert body["mde"] > 0.05 and body["rows_needed"] > ROWS


def test_evals_on_different_rows_are_never_paired(api, project, owner, pairs):
    a = pairs.run("a")
    other = create_eval(project, owner, deployment=pairs.deployment("b"), benchmark="gsm8k", sample_limit=ROWS, seed=SEED + 1)
    run_eval(other.pk)
    response = api.get(f"/api/v1/evals/{a.pk}/compare/{other.pk}")
    assert response.status_code == 409
    assert "drew different rows" in response.json()["detail"] and response.json()["same_rows_as"] == a.pk
    humaneval = create_eval(project, owner, deployment=pairs.deployment("c"), benchmark="humaneval", sample_limit=3)
    assert "no shared rows" in api.get(f"/api/v1/evals/{a.pk}/compare/{humaneval.pk}").json()["detail"]


def test_an_outsider_cannot_compare_against_a_project_eval(api, outsider_api, pairs):
    a = pairs.run("a")
    b = pairs.run("b")
    assert api.get(f"/api/v1/evals/{a.pk}/compare/{b.pk}").status_code == 200
    assert outsider_api.get(f"/api/v1/evals/{a.pk}/compare/{b.pk}").status_code == 404


def test_every_score_carries_its_interval(api, owner_client, pairs):
    a = pairs.run("a", wrong=questions()[:10])
    body = api.get(f"/api/v1/evals/{a.pk}").json()
    low, high = body["score_ci"]
    assert low < 0.75 < high and high - low < 0.3
    listed = api.get("/api/v1/evals").json()["results"][0]
    assert listed["score_ci"] == body["score_ci"]
    shown = f"{low:.3f}–{high:.3f}"
    assert shown in owner_client.get(f"/evals/{a.pk}/").content.decode()
    assert shown in owner_client.get("/evals/").content.decode()
    b = pairs.run("b")
    compare_page = owner_client.get("/evals/compare/gsm8k/").content.decode()
    assert shown in compare_page and f'href="/evals/{a.pk}/compare/{b.pk}/">against #{a.pk}' in compare_page


def test_cost_is_counted_and_a_budget_stops_the_eval_until_resumed_with_more(api, project, owner, pairs):
    deployment = pairs.deployment("priced", input_price_per_million=Decimal("1000"), output_price_per_million=Decimal("2000"), max_in_flight=1)
    ev = create_eval(project, owner, deployment=deployment, benchmark="gsm8k", sample_limit=ROWS, seed=SEED, max_cost=Decimal("0.2"))
    run_eval(ev.pk)
    ev.refresh_from_db()
    assert ev.status == "cancelled" and "budget reached" in ev.status_message
    assert 0 < ev.done_count < ROWS
    prompt = sum(Sample.objects.filter(eval=ev).values_list("prompt_tokens", flat=True))
    completion = sum(Sample.objects.filter(eval=ev).values_list("completion_tokens", flat=True))
    assert (ev.prompt_tokens, ev.completion_tokens) == (prompt, completion)
    assert ev.cost == (Decimal(prompt) * 1000 + Decimal(completion) * 2000) / 1_000_000 >= Decimal("0.2")
    kept = rows_of(ev)

    resumed = api.post(f"/api/v1/evals/{ev.pk}/resume", {"max_cost": "100"}, format="json")
    assert resumed.status_code == 200 and resumed.json()["max_cost"] == "100.000000"
    run_eval(ev.pk)
    ev.refresh_from_db()
    assert (ev.status, ev.done_count) == ("succeeded", ROWS)
    assert set(kept) < set(rows_of(ev))
    assert api.get(f"/api/v1/evals/{ev.pk}").json()["cost"] == str(ev.cost)


def test_the_comparison_page_and_the_same_rows_button(owner_client, outsider_client, pairs):
    asked = questions()
    a = pairs.run("a")
    b = pairs.run("b", wrong=asked[:15])
    page = owner_client.get(f"/evals/{a.pk}/").content.decode()
    assert f"/evals/{a.pk}/compare/{b.pk}/" in page and "Run again on these rows against another deployment" in page
    compared = owner_client.get(f"/evals/{a.pk}/compare/{b.pk}/").content.decode()
    assert "B is worse" in compared and "right → wrong" in compared and asked[3][:40] in compared
    # It leads with the delta drawn against zero, red for worse, and its p in a sentence that reads.
    card = compared[compared.index('id="delta-card"') : compared.index("</section>", compared.index('id="delta-card"'))]
    assert 'class="card verdict-card worse"' in compared and "-0.375" in card and "no difference 0" in card and "#c92a2a" in card
    assert "p &lt; 0.0001" in card and "p = &lt;" not in compared
    assert outsider_client.get(f"/evals/{a.pk}/compare/{b.pk}/").status_code == 404

    c = pairs.deployment("c")
    rerun = owner_client.post(f"/evals/{a.pk}/rerun/", {"deployment": c.pk})
    ev = Eval.objects.get(deployment=c)
    assert rerun.status_code == 302 and rerun["Location"] == f"/evals/{ev.pk}/"
    assert (ev.same_rows_as_id, ev.seed, ev.sample_limit) == (a.pk, a.seed, a.sample_limit)


def test_rows_needed_for_an_expected_gap_on_run_a_benchmark(owner_client):
    page = owner_client.get("/evals/new/benchmark/", {"gap": "5", "baseline": "50"}).content.decode()
    assert "about <strong>1570</strong> rows per eval" in page
    partial = owner_client.get("/evals/new/benchmark/", {"gap": "15.5", "part": "sample_size"}, HTTP_HX_REQUEST="true").content.decode()
    assert "<form" not in partial and "about <strong>164</strong> rows" in partial


def test_deployment_prices_are_set_in_the_form_and_the_api(owner_client, api, project):
    created = api.post(
        "/api/v1/deployments",
        {"name": "priced", "base_url": "https://203.0.113.9/v1", "model": "m", "input_price_per_million": "2.5", "output_price_per_million": "10"},
        format="json",
    )
    assert created.status_code == 201 and created.json()["output_price_per_million"] == "10.0000"
    posted = owner_client.post(
        "/evals/deployments/",
        {
            "name": "form",
            "base_url": "https://203.0.113.9/v1",
            "model": "m",
            "api_style": "chat",
            "max_in_flight": 10,
            "input_price_per_million": "0.15",
            "output_price_per_million": "0.6",
        },
    )
    assert posted.status_code == 302
    page = owner_client.get("/evals/deployments/").content.decode()
    assert "0.1500 / 0.6000" in page and "2.5000 / 10.0000" in page
    from evals.models import Deployment

    # 1,000 input and 2,000 output tokens at $2.50 and $10 per million.
    assert Deployment.objects.get(name="priced").cost(1000, 2000) == Decimal("0.0225")
    assert Deployment.objects.get(name="form").cost(0, 0) == Decimal("0")


def test_pass_at_k_and_budgets_are_refused_where_they_cannot_apply(api, pairs):
    pairs.deployment("unpriced")
    code_only = api.post("/api/v1/evals", {"benchmark": "gsm8k", "deployment": "unpriced", "samples_per_problem": 5}, format="json")
    assert code_only.status_code == 400 and "code benchmarks only" in code_only.json()["detail"]
    too_many = api.post("/api/v1/evals", {"benchmark": "humaneval", "deployment": "unpriced", "samples_per_problem": 21}, format="json")
    assert too_many.status_code == 400
    no_prices = api.post("/api/v1/evals", {"benchmark": "gsm8k", "deployment": "unpriced", "max_cost": "1"}, format="json")
    assert no_prices.status_code == 400 and "prices per million tokens" in no_prices.json()["detail"]
    unknown = api.post("/api/v1/evals", {"deployment": "unpriced", "same_rows_as": 999999}, format="json")
    assert unknown.status_code == 400 and "No such eval" in str(unknown.json())
    assert not Eval.objects.exists()


def test_the_eval_page_resumes_a_budget_stop_with_a_higher_budget(owner_client, project, owner, pairs):
    deployment = pairs.deployment("priced", input_price_per_million=Decimal("1000"), output_price_per_million=Decimal("2000"), max_in_flight=1)
    ev = create_eval(project, owner, deployment=deployment, benchmark="gsm8k", sample_limit=ROWS, seed=SEED, max_cost=Decimal("0.1"))
    run_eval(ev.pk)
    page = owner_client.get(f"/evals/{ev.pk}/").content.decode()
    assert "budget reached" in page and 'name="max_cost"' in page
    # A budget that is no number of dollars the column holds is refused and says why; the eval stays as it was.
    for bad, why in (("nan", "Enter a number."), ("inf", "Enter a number."), ("-1", "greater than or equal to 0"), ("1" + "0" * 20, "no more than 14 digits")):
        page = owner_client.post(f"/evals/{ev.pk}/resume/", {"max_cost": bad}, follow=True).content.decode()
        assert "The budget must be a number of dollars" in page and why in page, bad
        ev.refresh_from_db()
        assert (ev.status, ev.max_cost) == ("cancelled", Decimal("0.1"))
    owner_client.post(f"/evals/{ev.pk}/resume/", {"max_cost": "50"})
    ev.refresh_from_db()
    assert (ev.status, ev.max_cost) == ("queued", Decimal("50"))


def test_dataset_evals_with_different_scorers_are_not_paired(api, project, owner, pairs):
    from evals.datasets.versions import create_dataset

    dataset = create_dataset(project, owner, "d", b'{"input": "1+1", "expected": "2"}\n{"input": "2+2", "expected": "4"}\n')
    deployment = pairs.deployment("a")
    a = create_eval(project, owner, deployment=deployment, dataset=dataset, scorers=["exact_match"])
    b = create_eval(project, owner, deployment=deployment, same_rows_as=a, scorers=["contains"])
    response = api.get(f"/api/v1/evals/{a.pk}/compare/{b.pk}")
    assert response.status_code == 409 and "different scorers" in response.json()["detail"]
    same = create_eval(project, owner, deployment=deployment, same_rows_as=a)
    assert same.scorers == [{"name": "exact_match", "options": {"expected": ""}}] and api.get(f"/api/v1/evals/{a.pk}/compare/{same.pk}").status_code == 200
