"""The datasets API: uploads (JSONL and CSV) that make versions, a dataset's versions, a version's rows, the diff, and rows
added, edited and removed."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from evals.models import Dataset, DatasetRow, Deployment

pytestmark = pytest.mark.django_db

CSV = b'input,expected,topic\r\nFrance?,Paris,geo\r\n"Two\r\nlines?",yes,text\r\n'


def upload(api, name, data, filename):
    return api.post("/api/v1/datasets", {"name": name, "file": SimpleUploadedFile(filename, data)}, format="multipart")


def test_a_csv_upload_is_version_1_with_its_other_columns_as_metadata(api):
    created = upload(api, "geo", b"\xef\xbb\xbf" + CSV, "geo.csv")  # with the byte-order mark Excel writes
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["version"], body["row_count"]) == (1, 2)
    rows = api.get(f"/api/v1/datasets/{body['id']}/rows").json()["results"]
    assert [(r["position"], r["input"], r["expected"], r["metadata"]) for r in rows] == [
        (0, "France?", "Paris", {"topic": "geo"}),
        (1, "Two\r\nlines?", "yes", {"topic": "text"}),
    ]


@pytest.mark.parametrize(
    "data, message",
    [
        (b"question,answer\nx,y\n", 'must name its columns, among them "input" and "expected"'),
        (b"input,expected\nx,y,z\n", "Line 2 has 3 fields; the header has 2"),
        (b"input,expected\nx,y\n ,nothing asked\n", "Line 3 has no input"),
        (b"input,expected\n", "The file has no rows"),
    ],
)
def test_bad_csv_files_are_refused_naming_the_line(api, data, message):
    response = upload(api, "bad", data, "bad.csv")
    assert response.status_code == 400 and message in response.json()["detail"], response.content
    assert not Dataset.objects.exists() and not DatasetRow.objects.exists()


def test_uploads_into_a_dataset_append_or_replace_as_new_versions(api):
    dataset = upload(api, "geo", CSV, "geo.csv").json()
    appended = api.post(f"/api/v1/datasets/{dataset['id']}/upload", {"file": SimpleUploadedFile("more.jsonl", b'{"input": "Peru?", "expected": "Lima"}\n')})
    assert appended.status_code == 201 and appended.json() | {"created_at": None, "created_by": None} == {
        "number": 2,
        "row_count": 3,
        "added": 1,
        "edited": 0,
        "removed": 0,
        "note": "Uploaded more.jsonl, appended",
        "created_by": None,
        "created_at": None,
    }
    replaced = api.post(
        f"/api/v1/datasets/{dataset['id']}/upload", {"file": SimpleUploadedFile("fix.csv", b"input,expected\nFrance?,Paris!\n"), "replace": "true"}
    )
    assert replaced.status_code == 201 and (replaced.json()["edited"], replaced.json()["removed"], replaced.json()["row_count"]) == (1, 2, 1)
    versions = api.get(f"/api/v1/datasets/{dataset['id']}/versions").json()
    assert [(v["number"], v["row_count"], v["created_by"]) for v in versions] == [(3, 1, "alice"), (2, 3, "alice"), (1, 2, "alice")]
    # Each version's rows, as they were.
    assert len(api.get(f"/api/v1/datasets/{dataset['id']}/rows", {"version": 2}).json()["results"]) == 3
    assert [r["expected"] for r in api.get(f"/api/v1/datasets/{dataset['id']}/rows").json()["results"]] == ["Paris!"]
    assert api.get(f"/api/v1/datasets/{dataset['id']}/rows", {"version": 9}).status_code == 404


def test_rows_are_added_edited_and_removed_each_as_a_version_and_diffed(api):
    dataset = upload(api, "qa", b'{"input": "1+1", "expected": "2"}\n{"input": "2+2", "expected": "5"}\n', "qa.jsonl").json()
    base = f"/api/v1/datasets/{dataset['id']}"
    added = api.post(f"{base}/rows", {"rows": [{"input": "3+3", "expected": "6", "metadata": {"by": "hand"}}]}, format="json")
    assert added.status_code == 201 and added.json()["number"] == 2
    edited = api.patch(f"{base}/rows/1", {"expected": "4"}, format="json")
    assert edited.status_code == 200 and edited.json()["note"] == "Row 1 edited"
    removed = api.delete(f"{base}/rows/0")
    assert removed.status_code == 200 and removed.json()["number"] == 4
    changes = api.get(f"{base}/diff", {"version": 4, "base": 1}).json()
    assert changes["counts"] == {"added": 1, "edited": 1, "removed": 1}
    assert [r["input"] for r in changes["added"]] == ["3+3"] and changes["added"][0]["metadata"] == {"by": "hand"}
    assert (changes["edited"][0]["before"]["expected"], changes["edited"][0]["after"]["expected"]) == ("5", "4")
    assert [r["input"] for r in changes["removed"]] == ["1+1"]
    assert api.get(f"{base}/diff").json()["counts"] == {"added": 0, "edited": 0, "removed": 1}  # the latest against the one before
    assert api.get(f"{base}/diff", {"version": 2, "base": 3}).status_code == 400
    assert api.get(f"{base}").json()["version"] == 4


def test_bad_rows_are_refused_whole(api):
    dataset = upload(api, "qa", b'{"input": "1+1", "expected": "2"}\n', "qa.jsonl").json()
    base = f"/api/v1/datasets/{dataset['id']}"
    refused = api.post(f"{base}/rows", {"rows": [{"input": "fine", "expected": "x"}, {"expected": "no input"}]}, format="json")
    assert refused.status_code == 400 and refused.json()["detail"].startswith("Row 2 of the request has no input")
    assert api.patch(f"{base}/rows/0", {"input": "  "}, format="json").status_code == 400
    assert api.patch(f"{base}/rows/0", {}, format="json").json()["detail"] == "Give what to change: input, expected or metadata."
    assert api.patch(f"{base}/rows/7", {"expected": "x"}, format="json").status_code == 404
    assert api.delete(f"{base}/rows/0").json()["detail"].startswith("A dataset keeps at least one row")
    assert api.get(f"{base}/versions").json()[0]["number"] == 1 and DatasetRow.objects.count() == 1


def test_an_eval_names_its_dataset_version(api, project):
    Deployment.objects.create(project=project, name="fake", base_url="https://api.example.com/v1", model="m")
    dataset = upload(api, "qa", b'{"input": "1+1", "expected": "2"}\n{"input": "2+2", "expected": "4"}\n', "qa.jsonl").json()
    api.post(f"/api/v1/datasets/{dataset['id']}/rows", {"rows": [{"input": "3+3", "expected": "6"}]}, format="json")
    pinned = api.post("/api/v1/evals", {"dataset_id": dataset["id"], "dataset_version": 1, "deployment": "fake", "scorers": ["exact_match"]}, format="json")
    assert pinned.status_code == 201 and pinned.json()["dataset_version"] == 1
    latest = api.post("/api/v1/evals", {"dataset_id": dataset["id"], "deployment": "fake", "scorers": ["exact_match"], "sample_limit": 3}, format="json")
    assert latest.status_code == 201 and latest.json()["dataset_version"] == 2
    too_many = api.post(
        "/api/v1/evals", {"dataset_id": dataset["id"], "dataset_version": 1, "deployment": "fake", "scorers": ["exact_match"], "sample_limit": 3}, format="json"
    )
    assert too_many.status_code == 400 and "above the 2 rows" in too_many.json()["detail"]
