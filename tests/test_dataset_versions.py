"""Versioned datasets: every change a new immutable version, old versions readable, diffs, and evals pinned to theirs."""

import importlib
import json
import threading

import pytest
from django.apps import apps

from evals.actions import create_eval, rescore_eval
from evals.comparison import NotPaired, check_same_rows, compare_evals
from evals.datasets import versions as dataset_versions
from evals.datasets.evals import DatasetBenchmark
from evals.datasets.rows import DatasetError
from evals.datasets.versions import RowNotFound, add_rows, create_dataset, diff, edit_row, remove_rows, replace_rows, rows_at, upload_into
from evals.models import DatasetRow, DatasetVersion, Deployment, Eval, Sample
from evals.tasks import run_eval

from .concurrency import someone_waits_on_a_lock, start_thread
from .fakes.openai_server import FakeOpenAI
from .harness_fixtures import wait_for

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("loopback_deployments")]


def jsonl(*pairs) -> bytes:
    return b"".join(json.dumps({"input": i, "expected": e}).encode() + b"\n" for i, e in pairs)


def contents(dataset, number=None) -> list[tuple]:
    return [(r.position, r.input, r.expected) for r in rows_at(dataset, number)]


@pytest.fixture
def capitals(project, owner):
    return create_dataset(project, owner, "capitals", jsonl(("France?", "Paris"), ("Spain?", "Madrid"), ("Italy?", "Rome")), filename="capitals.jsonl")


def test_an_upload_is_version_1(capitals):
    assert (capitals.version, capitals.row_count) == (1, 3)
    assert contents(capitals) == [(0, "France?", "Paris"), (1, "Spain?", "Madrid"), (2, "Italy?", "Rome")]
    first = DatasetVersion.objects.get(dataset=capitals)
    assert (first.number, first.row_count, first.added, first.note) == (1, 3, 3, "Uploaded capitals.jsonl")


def test_adding_editing_and_removing_each_make_a_version_and_old_versions_stay_readable(capitals, owner):
    v2 = add_rows(capitals, owner, [{"input": "Peru?", "expected": "Lima"}])
    v3 = edit_row(capitals, owner, 1, {"expected": "Madrid, Spain"})
    v4 = remove_rows(capitals, owner, [0])
    assert [v.number for v in (v2, v3, v4)] == [2, 3, 4] and (capitals.version, capitals.row_count) == (4, 3)
    assert [(v.added, v.edited, v.removed, v.row_count) for v in (v2, v3, v4)] == [(1, 0, 0, 4), (0, 1, 0, 4), (0, 0, 1, 3)]
    assert contents(capitals, 1) == [(0, "France?", "Paris"), (1, "Spain?", "Madrid"), (2, "Italy?", "Rome")]
    assert contents(capitals, 2) == [(0, "France?", "Paris"), (1, "Spain?", "Madrid"), (2, "Italy?", "Rome"), (3, "Peru?", "Lima")]
    # An edited row keeps its place; the version before keeps it as it was.
    assert contents(capitals, 3)[1] == (1, "Spain?", "Madrid, Spain")
    assert contents(capitals) == [(1, "Spain?", "Madrid, Spain"), (2, "Italy?", "Rome"), (3, "Peru?", "Lima")]
    # Four versions, five stored rows: the three uploaded, the one added, the edit. Nothing is copied per version.
    assert DatasetRow.objects.filter(dataset=capitals).count() == 5


def test_a_versions_rows_are_one_query(capitals, owner, django_assert_num_queries):
    edit_row(capitals, owner, 2, {"input": "Italy, capital?"})
    with django_assert_num_queries(1):
        assert [r.input for r in rows_at(capitals, 1)] == ["France?", "Spain?", "Italy?"]


def test_the_diff_names_rows_added_edited_and_removed(capitals, owner):
    add_rows(capitals, owner, [{"input": "Peru?", "expected": "Lima"}])
    edit_row(capitals, owner, 1, {"expected": "Madrid, Spain"})
    remove_rows(capitals, owner, [0])
    assert [r.input for r in diff(capitals, 2).added] == ["Peru?"] and diff(capitals, 2).counts == {"added": 1, "edited": 0, "removed": 0}
    ((before, after),) = diff(capitals, 3).edited
    assert (before.position, before.expected, after.expected) == (1, "Madrid", "Madrid, Spain")
    assert [r.input for r in diff(capitals, 4).removed] == ["France?"]
    # Across versions: 4 against 1.
    assert diff(capitals, 4, base=1).counts == {"added": 1, "edited": 1, "removed": 1}
    # A row edited, then edited back, reads the same across the two edits.
    edit_row(capitals, owner, 1, {"expected": "Madrid"})
    assert diff(capitals, 5, base=2).counts == {"added": 0, "edited": 0, "removed": 1}
    with pytest.raises(DatasetError, match="the older first"):
        diff(capitals, 2, base=3)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d, u: add_rows(d, u, [{"input": "ok", "expected": "x"}, {"input": "   ", "expected": "y"}]), "has no input"),
        (lambda d, u: edit_row(d, u, 1, {"input": ""}), "Row 1 has no input"),
        (lambda d, u: edit_row(d, u, 1, {"expected": "Madrid"}), "nothing changed"),
        (lambda d, u: edit_row(d, u, 9, {"expected": "x"}), "Row 9 is not in the latest version"),
        (lambda d, u: remove_rows(d, u, [0, 1, 2]), "keeps at least one row"),
        (lambda d, u: upload_into(d, u, jsonl(("Peru?", "Lima")) + b'{"input": "", "expected": "none"}\n'), "Line 2 has no input"),
        (lambda d, u: replace_rows(d, u, [{"input": r.input, "expected": r.expected} for r in rows_at(d)]), "nothing changed"),
    ],
    ids=["blank-input", "edit-to-blank", "same-content", "missing-row", "every-row", "file-with-blank", "same-file"],
)
def test_bad_changes_are_refused_and_nothing_half_created(capitals, owner, change, message):
    with pytest.raises(DatasetError, match=message):
        change(capitals, owner)
    capitals.refresh_from_db()
    assert (capitals.version, capitals.row_count) == (1, 3)
    assert DatasetRow.objects.filter(dataset=capitals).count() == 3 and DatasetVersion.objects.filter(dataset=capitals).count() == 1
    assert contents(capitals) == [(0, "France?", "Paris"), (1, "Spain?", "Madrid"), (2, "Italy?", "Rome")]


def test_a_missing_row_is_a_404_error(capitals, owner):
    with pytest.raises(RowNotFound) as refused:
        remove_rows(capitals, owner, [7])
    assert refused.value.status_code == 404


def test_replacing_matches_rows_by_place(capitals, owner):
    version = upload_into(capitals, owner, jsonl(("France?", "Paris"), ("Spain?", "Madrid!"), ("Italy?", "Rome"), ("Peru?", "Lima")), replace=True)
    assert (version.added, version.edited, version.removed, version.number) == (1, 1, 0, 2)
    assert contents(capitals) == [(0, "France?", "Paris"), (1, "Spain?", "Madrid!"), (2, "Italy?", "Rome"), (3, "Peru?", "Lima")]
    shorter = upload_into(capitals, owner, jsonl(("France?", "Paris")), replace=True)
    assert (shorter.added, shorter.edited, shorter.removed) == (0, 0, 3) and contents(capitals) == [(0, "France?", "Paris")]
    # A removed row's place is not reused: a row added later has a new one.
    add_rows(capitals, owner, [{"input": "Chile?", "expected": "Santiago"}])
    assert contents(capitals)[-1][0] == 4


def test_conversation_rows_keep_their_messages(project, owner):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    dataset = create_dataset(project, owner, "chats", json.dumps({"input": messages, "expected": "Hello"}).encode() + b"\n")
    row = rows_at(dataset).get()
    assert row.input_format == "messages" and row.messages == messages
    # Its edit stays a conversation, and must still be one.
    with pytest.raises(DatasetError, match="JSON array of messages"):
        edit_row(dataset, owner, 0, {"input": "not json"})
    edit_row(dataset, owner, 0, {"input": json.dumps([*messages, {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Bye"}])})
    assert len(rows_at(dataset).get().messages) == 4
    with pytest.raises(DatasetError, match="no user message"):
        edit_row(dataset, owner, 0, {"input": json.dumps([{"role": "system", "content": "only this"}])})


@pytest.mark.django_db(transaction=True)
def test_an_eval_pins_its_version_and_same_rows_as_keeps_it_while_the_dataset_moves_on(project, owner, owner_client):
    asked = []

    def reply(body):
        asked.append(body["messages"])
        return {"role": "assistant", "content": body["messages"][-1]["content"].rstrip("?")}

    with FakeOpenAI(reply=reply) as server:
        deployment = Deployment.objects.create(project=project, name="fake", base_url=server.url, model="m")
        other = Deployment.objects.create(project=project, name="other", base_url=server.url, model="m2")
        dataset = create_dataset(project, owner, "echo", jsonl(("Paris?", "Paris"), ("Rome?", "Rome"), ("Lima?", "Oslo")))
        first = create_eval(project, owner, deployment=deployment, dataset=dataset, scorers=["exact_match"])
        run_eval(first.pk)
        # The dataset moves on: a row fixed, two added, one removed.
        edit_row(dataset, owner, 2, {"expected": "Lima"})
        add_rows(dataset, owner, [{"input": f"{c}?", "expected": c} for c in ("Quito", "Bogota")])
        remove_rows(dataset, owner, [0])
        assert dataset.version == 4
        rerun = create_eval(project, owner, deployment=other, same_rows_as=first)
        latest = create_eval(project, owner, deployment=deployment, dataset=dataset, scorers=["exact_match"])
        pinned_v2 = create_eval(project, owner, deployment=deployment, dataset=dataset, dataset_version=2, scorers=["exact_match"])
        for ev in (rerun, latest, pinned_v2):
            run_eval(ev.pk)
    first, rerun, latest, pinned_v2 = (Eval.objects.get(pk=e.pk) for e in (first, rerun, latest, pinned_v2))
    assert [e.dataset_version for e in (first, rerun, latest, pinned_v2)] == [1, 1, 4, 2]
    inputs = {e.pk: list(Sample.objects.filter(eval=e).order_by("row_index").values_list("input", "reference")) for e in (first, rerun, latest)}
    assert inputs[first.pk] == inputs[rerun.pk] == [("Paris?", "Paris"), ("Rome?", "Rome"), ("Lima?", "Oslo")]
    assert inputs[latest.pk] == [("Rome?", "Rome"), ("Lima?", "Lima"), ("Quito?", "Quito"), ("Bogota?", "Bogota")]
    assert (first.score, rerun.score, latest.score) == (pytest.approx(2 / 3), pytest.approx(2 / 3), 1.0)
    assert compare_evals(first, rerun)["n"] == 3
    with pytest.raises(NotPaired, match=r"version 1 of dataset echo and eval #\d+ version 4: its rows changed"):
        check_same_rows(first, latest)
    # The benchmark the worker loads is the pinned version's, whatever the latest is.
    assert [r.input for r in DatasetBenchmark(dataset, ["exact_match"], version=1).load()] == ["Paris?", "Rome?", "Lima?"]
    # A re-score keeps the version too.
    assert rescore_eval(first, owner).dataset_version == 1
    page = owner_client.get(f"/evals/{first.pk}/").content.decode()
    assert "echo, version 1" in page and "the dataset is at version 4 now" in page
    with pytest.raises(Exception, match="dataset_version 9 is not one of them"):
        create_eval(project, owner, deployment=deployment, dataset=dataset, dataset_version=9, scorers=["exact_match"])
    with pytest.raises(Exception, match="leave dataset_version unset"):
        create_eval(project, owner, deployment=deployment, same_rows_as=first, dataset_version=4)


def test_the_migration_pins_existing_evals_to_version_1(capitals, project):
    deployment = Deployment.objects.create(project=project, name="d", base_url="https://api.example.com/v1", model="m")
    ev = Eval.objects.create(project=project, deployment=deployment, dataset=capitals, seed=1)
    DatasetVersion.objects.all().delete()
    migration = importlib.import_module("evals.migrations.0013_dataset_versions")
    migration.first_versions(apps, None)
    ev.refresh_from_db()
    version = DatasetVersion.objects.get(dataset=capitals)
    assert ev.dataset_version == 1 and (version.number, version.row_count, version.added) == (1, 3, 3)


@pytest.mark.django_db(transaction=True)
def test_two_edits_at_once_make_two_versions_one_after_the_other_and_lose_neither(capitals, owner, monkeypatch):
    # The first edit stops inside its change, after it has read the version it builds on; the second goes meanwhile.
    read, go = threading.Event(), threading.Event()
    current, reads_of_row_0 = dataset_versions._current, []

    def current_then_wait(dataset, positions):
        found = current(dataset, positions)
        if positions == [0]:
            reads_of_row_0.append(positions)
            if len(reads_of_row_0) == 2:  # edit_row reads the row, then _change does, holding the next number
                read.set()
                go.wait(30)
        return found

    monkeypatch.setattr(dataset_versions, "_current", current_then_wait)

    def edit(position, expected):
        try:
            return edit_row(capitals, owner, position, {"expected": expected})
        except Exception as exc:  # noqa: BLE001 - the test reads what each edit got
            return exc

    france = start_thread(edit, 0, "Paris, France")
    try:
        assert read.wait(30)
        spain = start_thread(edit, 1, "Madrid, Spain")
        # The second edit either finishes (nothing holds it back) or waits on the lock the first holds.
        wait_for(lambda: not spain.is_alive() or someone_waits_on_a_lock(), timeout=30)
    finally:
        go.set()
    france.join(30)
    spain.join(30)
    assert isinstance(france.result, DatasetVersion) and isinstance(spain.result, DatasetVersion), (france.result, spain.result)
    assert (france.result.number, spain.result.number) == (2, 3)
    assert [(v.number, v.note, v.edited, v.row_count) for v in DatasetVersion.objects.filter(dataset=capitals).order_by("number")] == [
        (1, "Uploaded capitals.jsonl", 0, 3),
        (2, "Row 0 edited", 1, 3),
        (3, "Row 1 edited", 1, 3),
    ]
    capitals.refresh_from_db()
    assert capitals.version == 3
    assert contents(capitals, 2) == [(0, "France?", "Paris, France"), (1, "Spain?", "Madrid"), (2, "Italy?", "Rome")]
    assert contents(capitals) == [(0, "France?", "Paris, France"), (1, "Spain?", "Madrid, Spain"), (2, "Italy?", "Rome")]
