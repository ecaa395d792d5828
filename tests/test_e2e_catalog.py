"""In Chromium: a person reads the benchmark catalog, starts an MMLU eval from it, and reads its per-subject table."""

import pytest

from evals import benchmarks
from evals.benchmarks import mmlu
from evals.models import Deployment

from .fakes.openai_server import FakeOpenAI
from .test_e2e_browser import shot
from .test_e2e_comparison import signed_in_page
from .test_eval_categories import stem_only

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("loopback_deployments")]


def test_a_person_runs_mmlu_from_the_catalog_and_reads_it_by_subject(live_server, client, project, owner, worker):
    catalog = {name: benchmarks.describe(b) for name, b in benchmarks.CATALOG.items()}
    with FakeOpenAI(answer=stem_only) as fake:
        Deployment.objects.create(project=project, name="fake", base_url=fake.url, model="fake-model")
        with signed_in_page(live_server, client, owner) as page:
            page.set_default_timeout(30_000)
            page.goto(f"{live_server.url}/evals/benchmarks/")
            for name, entry in catalog.items():
                row = page.inner_text(f"#benchmark-{name}")
                assert f"{entry['rows']}" in row and entry["licence"] in row and entry["version"][:17] in row, name
            assert "subject, group" in page.inner_text("#benchmark-mmlu") and "level, subject" in page.inner_text("#benchmark-math500")
            assert "graded by an LLM judge" in page.inner_text("#benchmark-mt_bench")
            shot(page, "44-benchmark-catalog")
            page.click("#benchmark-mmlu >> text=Run")
            assert page.input_value("#id_benchmark") == "mmlu"
            page.select_option("#id_deployment", label="fake")
            page.fill("#id_sample_limit", "80")
            page.click("text=Start eval")
            page.wait_for_selector("#progress:has-text('Succeeded')", timeout=60_000)
            page.wait_for_selector("#by-subject tbody tr")  # the page reloads once the eval ends, with its tables
            subjects = page.locator("#by-subject tbody tr")
            assert subjects.count() > 10 and page.locator("#by-subject svg g").count() == subjects.count()
            for i in range(subjects.count()):
                name, rows, score, interval = subjects.nth(i).locator("td").all_inner_texts()
                assert score == ("1.000" if mmlu.GROUP_OF[name] == "STEM" else "0.000") and int(rows) >= 1 and "–" in interval
            groups = page.inner_text("#by-group")
            assert "STEM" in groups and "1.000" in groups
            shot(page, "45-mmlu-by-subject")
