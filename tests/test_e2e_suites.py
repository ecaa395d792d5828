"""In Chromium: a person runs a suite on two deployments, watches its table fill, compares it with a rerun, and labels
a judge's verdicts until its calibration card says it is calibrated."""

from decimal import Decimal

import pytest

from evals.actions import create_eval
from evals.models import Deployment, Sample
from evals.tasks import run_eval

from .fakes.openai_server import FakeOpenAI
from .test_e2e_browser import shot
from .test_e2e_comparison import signed_in_page
from .test_mt_bench import judge_reply, model_reply
from .test_suites import answer

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("loopback_deployments")]


def test_a_person_runs_a_suite_on_two_deployments_and_compares_them(live_server, client, project, owner, worker):
    # The ORM is used before the browser starts: inside it, Playwright's event loop gives the ORM connections of its own.
    with FakeOpenAI(answer=answer(False), latency=0.05) as strong, FakeOpenAI(answer=answer(True), latency=0.05) as weak:
        ids = {
            name: Deployment.objects.create(
                project=project, name=name, base_url=server.url, model=name, max_in_flight=8, input_price_per_million=Decimal(50)
            ).pk
            for name, server in (("strong", strong), ("weak", weak))
        }
        with signed_in_page(live_server, client, owner) as page:
            run_and_compare(page, live_server, ids)


def run_and_compare(page, live_server, ids):
    page.set_default_timeout(30_000)
    page.goto(f"{live_server.url}/evals/suites/")
    # Define a suite of one's own, then run it on both deployments.
    page.fill("#id_name", "checkpoint")
    page.fill("#id_entries", "- {benchmark: gsm8k, sample_limit: 40}\n- {benchmark: mmlu, sample_limit: 30}")
    page.click("button[name=define]")
    assert "Suite checkpoint saved with 2 benchmarks" in page.inner_text("body")
    page.select_option("#id_suite", "checkpoint")
    page.check(f"#run-suite input[type=checkbox][value='{ids['strong']}']")
    page.check(f"#run-suite input[type=checkbox][value='{ids['weak']}']")
    page.click("button[name=run]")
    page.wait_for_selector("#suite-table")
    # The table fills in place (polled); once every eval ended the page reloads with the chart.
    page.wait_for_selector("#suite-chart circle", timeout=90_000)
    assert "succeeded" in page.inner_text("#suite-status") and page.locator("#suite-table td.cell").count() == 4
    assert page.locator("#suite-chart circle").count() == 4 and "strong" in page.inner_text("#suite-chart figcaption")
    shot(page, "40-suite-run")
    run_id = page.url.rstrip("/").rsplit("/", 1)[1]

    # The two deployments of this run side by side: A the strong one, B the weak one.
    page.select_option("#id_other", run_id)
    page.select_option("#id_deployment_a", label="strong")
    page.select_option("#id_deployment_b", label="weak")
    page.click("text=Compare with this run as A")
    page.wait_for_selector("#suite-summary")
    summary = page.inner_text("#suite-summary")
    assert "worse on gsm8k" in summary and "significant" in summary and "fail" in summary
    rows = page.inner_text("#suite-comparison")
    assert "gsm8k" in rows and "mmlu" in rows and "not decisive" in rows
    shot(page, "41-suite-comparison")


def test_a_person_labels_verdicts_and_reads_the_judges_card(live_server, client, project, owner):
    with FakeOpenAI(reply=model_reply) as model, FakeOpenAI(reply=judge_reply) as judge_server:
        deployment = Deployment.objects.create(project=project, name="model", base_url=model.url, model="m")
        judge = Deployment.objects.create(project=project, name="judge", base_url=judge_server.url, model="j")
        ev = create_eval(project, owner, deployment=deployment, benchmark="mt_bench", judge=judge, sample_limit=40, seed=2)
        run_eval(ev.pk)
        rows = list(Sample.objects.filter(eval=ev, error="").order_by("row_index").values_list("row_index", flat=True))
        with signed_in_page(live_server, client, owner) as page:
            page.set_default_timeout(30_000)
            page.goto(f"{live_server.url}/evals/{ev.pk}/")
            assert "judge not calibrated" in page.inner_text("body")
            # Agree with turn 1 of 28 verdicts, one click each, and grade two lower oneself.
            for row in rows[:28]:
                page.click(f"#row-{row} ~ tr.verdicts .verdict:first-child button[value=agree]")
                page.wait_for_selector(f"#row-{row} ~ tr.verdicts .verdict:first-child :text('your label: 8')")
            for row in rows[28:30]:
                page.fill(f"#row-{row} ~ tr.verdicts .verdict:first-child input[name=value]", "5")
                page.click(f"#row-{row} ~ tr.verdicts .verdict:first-child button[value=grade]")
                page.wait_for_selector(f"#row-{row} ~ tr.verdicts .verdict:first-child :text('your label: 5')")
            shot(page, "42-judged-eval-labelled")
            assert "judge not calibrated" not in page.inner_text("body")
            page.goto(f"{live_server.url}/evals/judges/")
            card = page.inner_text(".judge-card")
            assert "calibrated" in card and "not calibrated" not in card and page.inner_text(".judge-card .labels") == "30"
            # A judge that says 8 to everything tells people nothing: kappa 0, whatever the agreement.
            assert page.inner_text(".judge-card .kappa").startswith("0.000") and "quadratic" in card.lower()
            assert "exact 1.000" in card  # the scripted judge agrees with itself when asked twice
            shot(page, "43-judge-card")
