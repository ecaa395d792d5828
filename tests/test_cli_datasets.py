"""`bv datasets`: list, versions, rows, diff, upload and add-from-traces, against a live test server."""

import json

import pytest

from evals.datasets.versions import rows_at
from evals.models import Dataset

from .test_cli_parity import bv  # noqa: F401 (a fixture)
from .test_traces_to_datasets import traced  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def test_upload_versions_rows_and_diff(bv, tmp_path):  # noqa: F811
    first = tmp_path / "geo.csv"
    first.write_text("input,expected\nFrance?,Paris\nSpain?,Madird\n")
    created = json.loads(bv("datasets", "upload", str(first), "--name", "geo", "--json").stdout)
    assert (created["name"], created["version"], created["row_count"]) == ("geo", 1, 2)
    fixed = tmp_path / "fixed.csv"
    fixed.write_text("input,expected\nFrance?,Paris\nSpain?,Madrid\nPeru?,Lima\n")
    replaced = bv("datasets", "upload", str(fixed), "--into", "geo", "--replace")
    assert replaced.exit_code == 0, replaced.output
    assert "fixed.csv" in replaced.output
    assert [(d["name"], d["version"], d["row_count"]) for d in json.loads(bv("datasets", "list", "--json").stdout)] == [("geo", 2, 3)]
    versions = json.loads(bv("datasets", "versions", "geo", "--json").stdout)
    assert [(v["number"], v["added"], v["edited"], v["removed"]) for v in versions] == [(2, 1, 1, 0), (1, 2, 0, 0)]
    old = json.loads(bv("datasets", "rows", "geo", "--version", "1", "--json").stdout)
    assert [r["expected"] for r in old] == ["Paris", "Madird"]
    shown = bv("datasets", "diff", "geo")
    assert shown.exit_code == 0, shown.output
    assert "Version 2 against version 1: 1 added, 1 edited, 0 removed" in shown.output
    assert "~ row 1 expected: Madird → Madrid" in shown.output and "+ row 2: Peru? → Lima" in shown.output
    assert json.loads(bv("datasets", "diff", "geo", "2", "--base", "1", "--json").stdout)["counts"] == {"added": 1, "edited": 1, "removed": 0}
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"input": "", "expected": "x"}\n')
    refused = bv("datasets", "upload", str(bad), "--into", "geo")
    assert refused.exit_code == 2 and "Line 1 has no input" in refused.output
    assert bv("datasets", "versions", "nope").exit_code == 2


def test_add_from_traces_by_session_and_by_filter(bv, traced):  # noqa: F811
    made = bv("datasets", "add-from-traces", "--new", "support", "--session", "ok", "--session", "other", "--json")
    assert made.exit_code == 0, made.output
    assert json.loads(made.stdout)["version"] | {"created_at": None} == {
        "number": 1,
        "row_count": 2,
        "added": 2,
        "edited": 0,
        "removed": 0,
        "note": "2 rows from sessions",
        "created_by": "alice",
        "created_at": None,
    }
    failed = bv("datasets", "add-from-traces", "support", "--outcome", "fail", "--input", "conversation")
    assert failed.exit_code == 0 and "support" in failed.output, failed.output
    dataset = Dataset.objects.get(name="support")
    assert dataset.version == 2 and rows_at(dataset).last().metadata["session_id"] == "bad"
    refused = bv("datasets", "add-from-traces", "support", "--session", "mute")
    assert refused.exit_code == 2 and "Session mute has no user message" in refused.output
    assert bv("datasets", "add-from-traces", "support").exit_code == 2  # no sessions chosen
