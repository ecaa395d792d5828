"""In Chromium: a person keeps a session as a test case (its answer edited before saving), edits and removes rows of the
dataset, reads its versions and their diffs, an old version as it was, and adds the failed sessions the list shows."""

import pytest

from evals.datasets.versions import create_dataset, rows_at
from evals.models import Dataset

from .test_e2e_browser import shot
from .test_e2e_comparison import signed_in_page
from .test_traces_to_datasets import traced  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_person_builds_a_dataset_from_traces_and_reads_its_versions(live_server, client, project, owner, traced):  # noqa: F811
    # The ORM is used before and after the browser, never inside it: Playwright's event loop would give the ORM connections of its own.
    dataset = create_dataset(
        project, owner, "support", b'{"input": "Where is my parcel?", "expected": "On its way."}\n{"input": "Refund?", "expected": "No."}\n'
    )
    with signed_in_page(live_server, client, owner) as page:
        page.set_default_timeout(30_000)
        keep_a_session(page, live_server)
        edit_and_remove_rows(page)
        read_versions(page)
        add_the_failed_sessions(page, live_server)
    dataset.refresh_from_db()
    assert dataset.version == 5 and dataset.versions.count() == 5
    assert [(r.position, r.input, r.expected) for r in rows_at(dataset)] == [
        (1, "Refund?", "Yes, within 30 days."),
        (2, "order 1", "Order 1 ships on Monday."),
        (3, "order 2", "Let me look at order 2"),
    ]
    assert [r.metadata.get("session_id") for r in rows_at(dataset)] == [None, "ok", "bad"]
    assert [r.input for r in rows_at(dataset, 1)] == ["Where is my parcel?", "Refund?"]
    assert Dataset.objects.count() == 1


def keep_a_session(page, live_server):
    page.goto(f"{live_server.url}/traces/sessions/ok/")
    page.click("text=Add to dataset")
    assert page.inner_text("#row-input") == "order 1"
    assert page.input_value("#id_expected") == "Let me look at order 1"
    page.fill("#id_expected", "Order 1 ships on Monday.")
    page.select_option("#id_dataset", label="support")
    shot(page, "50-session-to-dataset")
    page.click("text=Save to the dataset")
    page.wait_for_selector("#versions")
    assert "Row added to support: its version 2." in page.inner_text("body")
    assert "session ok, step 2" in " ".join(page.inner_text("#row-2").split()).replace(" ,", ",")


def edit_and_remove_rows(page):
    page.click("#row-1 >> text=edit")
    page.fill("#row-1 textarea[name=expected]", "Yes, within 30 days.")
    page.click("#row-1 >> text=Save as version 3")
    page.wait_for_selector("#diff")
    diff = page.inner_text("#diff")
    assert "Version 3 against version 2" in diff and "0 added · 1 edited · 0 removed" in diff
    assert page.inner_text("#diff .diff-edited del") == "expected: No." and page.inner_text("#diff .diff-edited ins") == "expected: Yes, within 30 days."
    shot(page, "51-dataset-edited-row")
    page.click("#row-0 >> text=remove")
    page.wait_for_selector("#versions")
    assert "Version 4: row 0 removed; version 3 keeps it." in page.inner_text("body")
    assert page.locator("#row-0").count() == 0


def read_versions(page):
    versions = page.inner_text("#versions")
    assert "Row 0 removed" in versions and "Row 1 edited" in versions and "Row from session ok" in versions
    page.click("#version-2 >> text=diff")
    page.wait_for_selector("#diff")
    assert "Version 2 against version 1" in page.inner_text("#diff") and "order 1" in page.inner_text("#diff .diff-added")
    page.click("#version-1 >> text=v1")
    page.wait_for_selector("#old-version")
    rows = page.inner_text("#rows")
    assert "Where is my parcel?" in rows and "No." in rows and "order 1" not in rows
    assert page.locator("#rows >> text=remove").count() == 0
    shot(page, "52-dataset-old-version")


def add_the_failed_sessions(page, live_server):
    page.goto(f"{live_server.url}/traces/?outcome=fail")
    assert "Add these 1 session to a dataset" in page.inner_text("#add-to-dataset")
    page.select_option("#bulk-dataset", label="support")
    page.click("#add-to-dataset >> text=Add to the dataset")
    page.wait_for_selector("#diff")
    assert "1 rows added to support, as its version 5." in page.inner_text("body")
    assert "order 2" in page.inner_text("#diff .diff-added")
    shot(page, "53-dataset-from-the-session-list")
