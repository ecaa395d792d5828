"""In Chromium: a person starts a job of two agents on two shipped tasks, watches its matrix fill as real sandboxes
(runc) run the trials, and opens a trial to read what its verifier printed."""

from pathlib import Path

import pytest
from django.conf import settings

from agent_tasks.actions import import_task_set
from belvedir.sandbox.models import SandboxHost

from .harness_fixtures import fund
from .test_e2e_browser import shot
from .test_e2e_comparison import signed_in_page

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.docker]

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "tasks"


def test_a_person_starts_a_job_watches_its_matrix_and_reads_a_trial(live_server, client, project, owner, worker):
    SandboxHost.objects.update(enabled=False)
    SandboxHost.objects.create(name="e2e-jobs", url=settings.SANDBOX_DOCKER_URL, capacity=2)
    files = {f"tasks/{p.relative_to(EXAMPLES).as_posix()}": p.read_bytes() for p in sorted(EXAMPLES.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}
    version = import_task_set(project, owner, "examples", files)[0]
    fund(project, 500)
    with signed_in_page(live_server, client, owner) as page:
        page.set_default_timeout(30_000)
        page.goto(f"{live_server.url}/jobs/")
        page.select_option("#id_version", str(version.pk))
        page.check("#id_agents input[value=oracle]")
        page.check("#id_agents input[value=nop]")
        page.fill("#id_attempts", "1")
        page.fill("#id_budget", "1")
        page.fill("#id_tasks", "upper-names, csv-totals")
        page.select_option("#id_runtime", "runc")
        page.click("text=Start job")
        page.wait_for_selector("#job-matrix")
        assert "4 trials" in page.inner_text("body")
        # The matrix fills in place (polled) until every trial ended; then the page stops polling.
        page.wait_for_function("document.querySelectorAll('#job-matrix a.trial-succeeded').length === 4", timeout=120_000)
        matrix = page.inner_text("#job-matrix table")
        assert matrix.count("✓") == 2 and matrix.count("✗") == 2
        assert "4 of 4 trials ended" in page.inner_text("#job-progress")
        page.reload()
        assert page.locator("#job-results svg circle").count() >= 2 and "oracle" in page.inner_text("#job-results")
        shot(page, "50-job-matrix")
        page.click("#job-matrix tr:has-text('upper-names') a.trial-succeeded >> nth=0")
        page.wait_for_selector("#verifier-output")
        assert "reward 1.0" in page.inner_text("#trial-summary")
        assert "None: this trial's sandbox had no network." in page.inner_text("#egress")
        shot(page, "51-trial")
