"""The Datasets pages: uploads, a dataset's versions and diffs, a version's rows, and edits that each make a version."""

import html
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from evals.datasets.versions import create_dataset, rows_at
from evals.models import Dataset

from .pages import shown

pytestmark = pytest.mark.django_db


def text(response) -> str:
    """The page as read: tags out, whitespace collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", shown(response))).split())


@pytest.fixture
def qa(project, owner):
    return create_dataset(project, owner, "qa", b'{"input": "1+1", "expected": "2"}\n{"input": "2+2", "expected": "5"}\n')


def test_a_csv_uploaded_on_the_page_opens_its_dataset(owner_client):
    response = owner_client.post("/evals/datasets/", {"name": "geo", "file": SimpleUploadedFile("geo.csv", b"input,expected\nFrance?,Paris\n")})
    dataset = Dataset.objects.get(name="geo")
    assert response.status_code == 302 and response["Location"] == f"/evals/datasets/{dataset.pk}/"
    assert [(r.input, r.expected) for r in rows_at(dataset)] == [("France?", "Paris")]
    assert "v1" in shown(owner_client.get("/evals/datasets/"))


def test_edits_on_the_page_make_versions_and_the_page_shows_them_with_their_diffs(owner_client, qa):
    base = f"/evals/datasets/{qa.pk}"
    assert owner_client.post(f"{base}/rows/1/edit/", {"input": "2+2", "expected": "4"})["Location"] == f"{base}/?diff=2"
    assert owner_client.post(f"{base}/rows/", {"input": "3+3", "expected": "6"}).status_code == 302
    assert owner_client.post(f"{base}/rows/0/remove/").status_code == 302
    upload = SimpleUploadedFile("more.jsonl", b'{"input": "4+4", "expected": "8"}\n')
    assert owner_client.post(f"{base}/upload/", {"file": upload}).status_code == 302
    page = text(owner_client.get(f"{base}/"))
    assert "Version 5 (the latest) · 3 rows · 5 versions" in page
    assert "Row 1 edited" in page and "A row added" in page and "Row 0 removed" in page and "Uploaded more.jsonl, appended" in page
    assert "+1 added" in page and "1 edited" in page and "−1 removed" in page
    diff = text(owner_client.get(f"{base}/", {"version": 2, "diff": 2}))
    assert "Version 2 against version 1" in diff and "0 added · 1 edited · 0 removed" in diff
    old = text(owner_client.get(f"{base}/", {"version": 1}))
    assert "An older version, as it was: read only." in old and "Row Input Expected Source 0 1+1 2 1 2+2 5" in old
    assert "remove" not in old.split("Rows of version 1", 1)[1]  # no edits of a past version


def test_a_refused_edit_keeps_what_was_typed(owner_client, qa):
    response = owner_client.post(f"/evals/datasets/{qa.pk}/rows/1/edit/", {"input": "   ", "expected": "what I typed"})
    page = shown(response)
    assert response.status_code == 200 and "Row 1 has no input" in page and "what I typed" in page
    added = owner_client.post(f"/evals/datasets/{qa.pk}/rows/", {"input": "", "expected": "an answer to nothing"})
    assert "The new row has no input" in shown(added) and "an answer to nothing" in shown(added)
    bad_file = owner_client.post(f"/evals/datasets/{qa.pk}/upload/", {"file": SimpleUploadedFile("x.jsonl", b"not json\n")})
    assert "Line 1 is not valid JSON" in shown(bad_file)
    qa.refresh_from_db()
    assert qa.version == 1 and qa.versions.count() == 1


def test_a_missing_version_says_which_there_are(owner_client, qa):
    response = owner_client.get(f"/evals/datasets/{qa.pk}/", {"version": 7}, follow=True)
    assert "Dataset qa has versions 1 to 1; there is no version 7." in shown(response)


def test_the_dataset_eval_form_offers_a_version(owner_client, qa, project):
    page = shown(owner_client.get("/evals/new/dataset/", {"dataset": qa.pk, "dataset_version": 1}))
    assert "Blank for the dataset's latest version." in page
