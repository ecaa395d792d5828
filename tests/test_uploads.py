"""Uploads stop at their limit while streaming in, answered 413 with the reason."""

import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from evals.models import Dataset

pytestmark = pytest.mark.django_db


def rows(count: int) -> bytes:
    return b"".join(b'{"input": "question %d", "expected": "answer"}\n' % i for i in range(count))


def test_a_dataset_over_the_limit_is_refused_with_413(api, owner_client, settings):
    settings.UPLOAD_MAX_BYTES = 64 * 1024
    big = rows(10_000)  # ~470 KB
    response = api.post("/api/v1/datasets", {"name": "big", "file": SimpleUploadedFile("d.jsonl", big)}, format="multipart")
    assert response.status_code == 413 and response.json()["detail"] == "The upload is larger than the 64 KB limit."
    page = owner_client.post("/evals/datasets/", {"name": "big", "file": SimpleUploadedFile("d.jsonl", big)})
    assert page.status_code == 413
    assert not Dataset.objects.exists()
    small = api.post("/api/v1/datasets", {"name": "small", "file": SimpleUploadedFile("d.jsonl", rows(100))}, format="multipart")
    assert small.status_code == 201 and small.json()["row_count"] == 100


@pytest.mark.parametrize("declared", [True, False], ids=["content-length-over", "body-grows-over"])
def test_an_oversized_upload_stops_being_read_at_the_limit(api, settings, monkeypatch, declared):
    from django.core.files import uploadhandler

    settings.UPLOAD_MAX_BYTES = 256 * 1024
    kept = []  # what reached the handlers that store an upload
    for handler in (uploadhandler.MemoryFileUploadHandler, uploadhandler.TemporaryFileUploadHandler):
        real = handler.receive_data_chunk
        monkeypatch.setattr(handler, "receive_data_chunk", lambda self, data, start, real=real: kept.append(len(data)) or real(self, data, start))
    big = rows(200_000)  # ~9 MB
    extra = {} if declared else {"CONTENT_LENGTH": str(200 * 1024)}  # a body longer than it says
    response = api.post("/api/v1/datasets", {"name": "big", "file": SimpleUploadedFile("d.jsonl", big)}, format="multipart", **extra)
    if declared:
        assert response.status_code == 413 and "256 KB limit" in response.json()["detail"]
    assert sum(kept) <= settings.UPLOAD_MAX_BYTES
    assert not Dataset.objects.exists()


def test_dataset_files_are_parsed_line_by_line():
    from evals.datasets.rows import parse_jsonl

    class Lines(io.BytesIO):
        read_whole = False

        def read(self, *args):
            Lines.read_whole = Lines.read_whole or not args or args[0] in (-1, None)
            return super().read(*args)

    data = Lines(rows(3))
    assert [r["input"] for r in parse_jsonl(data)] == ["question 0", "question 1", "question 2"]
    assert not Lines.read_whole
