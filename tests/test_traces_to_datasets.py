"""Dataset rows made of traces: from a session or a task (its page's "Add to dataset"), from the session list ("add these
50", one version or none), and by the API."""

import html
import json
import re
from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from evals.datasets.rows import DatasetError
from evals.datasets.versions import create_dataset, rows_at
from evals.models import Dataset, DatasetRow, DatasetVersion
from traces.models import Task, TraceSession
from traces.segmentation import process_quiet_sessions
from traces.to_datasets import CONVERSATION, NoUserMessage, Source, add_to_dataset, row_from

from .otlp_builders import body, new_id, span
from .pages import shown
from .test_training_export import messages_attrs, support_session

pytestmark = pytest.mark.django_db


def text(response) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", shown(response))).split())


def mute_session(session_id, start_s):
    """An LLM call with a system prompt and an answer, and no user: nothing to make a row's input of."""
    attributes = {**messages_attrs("prompt", [("system", "You are a cron job.")]), **messages_attrs("completion", [("assistant", "Done.")])}
    return [span("openai.chat", session_id=session_id, trace_id=new_id(32), start_s=start_s, attributes=attributes)]


@pytest.fixture
def traced(api, project):
    """Sessions ok, bad and other (support conversations: a workflow step, then two LLM calls), and mute."""
    base = timezone.now().timestamp()
    with time_machine.travel(timezone.now(), tick=False) as clock:
        spans = support_session("ok", "order 1", base) + support_session("bad", "order 2", base + 10) + support_session("other", "order 3", base + 20)
        spans += mute_session("mute", base + 30)
        assert api.generic("POST", "/api/v1/traces", body(spans), content_type="application/json").status_code == 200
        clock.shift(timedelta(seconds=31))
        process_quiet_sessions()
    api.post("/api/v1/outcomes", {"session_id": "bad", "outcome": "fail"}, format="json")
    return {s.session_id: s for s in TraceSession.objects.filter(project=project)}


def test_a_row_of_a_sessions_first_user_message_and_its_answer(traced):
    row = row_from(Source(session=traced["ok"]))
    task = Task.objects.get(session=traced["ok"])
    assert (row["input"], row["expected"]) == ("order 1", "Let me look at order 1")
    assert row["metadata"] | {"span_id": None} == {
        "source": "trace",
        "session_id": "ok",
        "input_from": "first_user_message",
        "task_id": task.pk,
        "step": 2,
        "span_id": None,
    }


def test_a_row_of_the_conversation_up_to_a_step(traced):
    last = row_from(Source(session=traced["ok"], input=CONVERSATION))
    assert [m["content"] for m in last["input"]] == ["You are support.", "order 1", "Let me look at order 1", "thanks, and then?"]
    assert (last["expected"], last["metadata"]["step"]) == ("Then it ships.", 3)
    second = row_from(Source(session=traced["ok"], input=CONVERSATION, step=2))
    assert [m["role"] for m in second["input"]] == ["system", "user"] and second["expected"] == "Let me look at order 1"
    # By its span, as the session page's links name a step.
    assert row_from(Source(session=traced["ok"], input=CONVERSATION, span_id=second["metadata"]["span_id"]))["input"] == second["input"]
    task = Task.objects.get(session=traced["ok"])
    assert row_from(Source(session=traced["ok"], task=task, input=CONVERSATION))["metadata"]["task_id"] == task.pk


@pytest.mark.parametrize(
    "source, error, message",
    [
        (lambda s: Source(session=s["mute"]), NoUserMessage, "Session mute has no user message: a row needs one as its input."),
        (lambda s: Source(session=s["mute"], input=CONVERSATION), NoUserMessage, "Session mute has no user message up to step 1"),
        (lambda s: Source(session=s["ok"], input=CONVERSATION, step=1), DatasetError, "Step 1 of session ok is not an LLM call"),
        (lambda s: Source(session=s["ok"], input=CONVERSATION, step=9), DatasetError, "Session ok has 3 steps: there is no step 9."),
        (lambda s: Source(session=s["ok"], step=2), DatasetError, "give input=conversation with it"),
    ],
)
def test_a_source_that_makes_no_row_says_why(traced, source, error, message):
    with pytest.raises(error, match=re.escape(message)):
        row_from(source(traced))


def test_many_sessions_make_one_version_or_none(traced, project, owner):
    dataset = create_dataset(project, owner, "support", b'{"input": "hello", "expected": "hi"}\n')
    version = add_to_dataset(project, owner, [Source(session=traced[s]) for s in ("ok", "bad", "other")], dataset=dataset)
    assert (version.number, version.added, version.note) == (2, 3, "3 rows from sessions")
    assert [r.input for r in rows_at(dataset)] == ["hello", "order 1", "order 2", "order 3"]
    with pytest.raises(NoUserMessage, match=r"1 of the 4 sessions have no user message to make an input of \(mute\); no row was added"):
        add_to_dataset(project, owner, [Source(session=traced[s]) for s in ("ok", "bad", "other", "mute")], dataset=dataset)
    dataset.refresh_from_db()
    assert dataset.version == 2 and DatasetRow.objects.filter(dataset=dataset).count() == 4
    with pytest.raises(NoUserMessage):
        add_to_dataset(project, owner, [Source(session=traced["mute"])], new_name="never")
    assert not Dataset.objects.filter(name="never").exists()


def test_the_session_page_previews_the_row_and_saves_the_edited_answer(owner_client, traced):
    session_page = shown(owner_client.get("/traces/sessions/ok/"))
    assert "/traces/sessions/ok/to-dataset/" in session_page and "input=conversation&amp;span=" in session_page
    preview = shown(owner_client.get("/traces/sessions/ok/to-dataset/"))
    assert '<pre tabindex="0" id="row-input">order 1</pre>' in preview and "Let me look at order 1</textarea>" in preview
    saved = owner_client.post(
        "/traces/sessions/ok/to-dataset/", {"input": "first_user_message", "new_name": "support", "expected": "Order 1 shipped on Monday."}
    )
    dataset = Dataset.objects.get(name="support")
    assert saved.status_code == 302 and saved["Location"] == f"/evals/datasets/{dataset.pk}/"
    row = rows_at(dataset).get()
    assert (row.input, row.expected, row.metadata["session_id"]) == ("order 1", "Order 1 shipped on Monday.", "ok")
    # A conversation up to step 2, into the same dataset: its next version.
    conversation = shown(owner_client.get("/traces/sessions/ok/to-dataset/", {"input": "conversation", "step": 2}))
    assert "up to step 2" in html.unescape(conversation) and '"role": "system"' in html.unescape(conversation)
    owner_client.post("/traces/sessions/ok/to-dataset/", {"input": "conversation", "step": 2, "dataset": dataset.pk, "expected": "Looking."})
    dataset.refresh_from_db()
    assert dataset.version == 2 and rows_at(dataset).last().input_format == "messages"
    assert "session ok , step 2" in text(owner_client.get(f"/evals/datasets/{dataset.pk}/"))


def test_the_session_page_refuses_without_losing_the_edit(owner_client, traced):
    refused = owner_client.post("/traces/sessions/ok/to-dataset/", {"input": "first_user_message", "expected": "my careful edit"})
    assert "Choose a dataset to add to, or name a new one" in text(refused) and "my careful edit</textarea>" in shown(refused)
    mute = owner_client.get("/traces/sessions/mute/to-dataset/")
    assert "Session mute has no user message" in text(mute) and 'id="save-row"' not in shown(mute)
    assert owner_client.post("/traces/sessions/mute/to-dataset/", {"input": "first_user_message", "new_name": "x"}).status_code == 200
    assert not Dataset.objects.exists()


def test_the_session_list_adds_the_sessions_it_shows(owner_client, traced):
    listed = shown(owner_client.get("/traces/", {"outcome": "fail"}))
    assert 'id="add-to-dataset"' in listed and "Add these 1 session" in listed and 'name="session" value="bad"' in listed
    added = owner_client.post(
        "/traces/to-dataset/", {"session": ["ok", "other"], "new_name": "good ones", "input": "first_user_message", "next": "/traces/?outcome=success"}
    )
    dataset = Dataset.objects.get(name="good ones")
    assert added["Location"] == f"/evals/datasets/{dataset.pk}/" and [r.input for r in rows_at(dataset)] == ["order 3", "order 1"]
    refused = owner_client.post("/traces/to-dataset/", {"session": ["ok", "mute"], "dataset": dataset.pk, "input": "first_user_message", "next": "/traces/"})
    assert refused["Location"] == "/traces/"
    assert "no user message to make an input of (mute); no row was added" in text(owner_client.get("/traces/"))
    dataset.refresh_from_db()
    assert dataset.version == 1
    # Somewhere else is not a place to go back to.
    elsewhere = owner_client.post(
        "/traces/to-dataset/", {"session": ["ok"], "dataset": dataset.pk, "input": "first_user_message", "next": "https://evil.example/"}
    )
    assert elsewhere["Location"] == f"/evals/datasets/{dataset.pk}/?diff=2"


def test_the_api_makes_rows_of_named_or_filtered_sessions(api, traced):
    made = api.post("/api/v1/datasets/rows-from-traces", {"new_dataset": "failures", "filters": {"outcome": "fail"}}, format="json")
    assert made.status_code == 201, made.content
    body = made.json()
    assert (body["dataset"]["name"], body["version"]["number"], body["version"]["added"]) == ("failures", 1, 1)
    dataset = Dataset.objects.get(name="failures")
    one = api.post(
        "/api/v1/datasets/rows-from-traces",
        {"dataset": "failures", "sessions": ["ok"], "input": "conversation", "step": 3, "expected": "It ships on Monday."},
        format="json",
    )
    assert one.status_code == 201 and one.json()["version"]["number"] == 2
    dataset.refresh_from_db()
    row = rows_at(dataset).last()
    assert row.expected == "It ships on Monday." and json.loads(row.input)[-1]["content"] == "thanks, and then?" and row.metadata["step"] == 3


@pytest.mark.parametrize(
    "payload, message",
    [
        ({"sessions": ["ok"]}, "Give dataset"),
        ({"dataset": "support", "new_dataset": "x", "sessions": ["ok"]}, "Give dataset"),
        ({"dataset": "nope", "sessions": ["ok"]}, "No dataset 'nope' in this project"),
        ({"dataset": "support", "sessions": ["ok", "ghost"]}, "No session 'ghost' in this project."),
        ({"dataset": "support", "filters": {"colour": "red"}}, "Unknown filters: colour"),
        ({"dataset": "support", "sessions": ["ok"], "filters": {"outcome": "fail"}}, "not both"),
        ({"dataset": "support", "sessions": ["ok", "bad"], "expected": "x"}, "An edited expected output is for one session's row"),
        ({"dataset": "support", "sessions": ["ok", "mute"]}, "1 of the 2 sessions have no user message"),
        ({"dataset": "support", "filters": {"user": "nobody"}}, "the filters match none"),
    ],
)
def test_the_api_refuses_rows_it_cannot_make_and_adds_none(api, project, owner, traced, payload, message):
    create_dataset(project, owner, "support", b'{"input": "hello", "expected": "hi"}\n')
    response = api.post("/api/v1/datasets/rows-from-traces", payload, format="json")
    assert response.status_code == 400 and message in response.json()["detail"], response.content
    assert DatasetVersion.objects.count() == 1 and Dataset.objects.count() == 1
