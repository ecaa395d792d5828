"""Sessions keep who and what: association properties become the session's user and metadata; chunked bodies."""

import io

import pytest
from django.db import connection

from traces import otlp
from traces.models import Span, TraceSession

from .otlp_builders import body, span

pytestmark = pytest.mark.django_db


def post(client, spans, **extra):
    return client.generic("POST", "/api/v1/traces", body(spans), content_type="application/json", **extra)


def with_association(name, session_id, **properties):
    return span(name, session_id=session_id, attributes={f"traceloop.association.properties.{k}": v for k, v in properties.items()})


def test_association_properties_become_the_sessions_user_and_metadata(api, project):
    assert post(api, [with_association("a", "s1", user_id="u-1", plan="pro", region="eu")]).status_code == 200
    # A later request adds to the metadata; one without a user keeps the user.
    assert post(api, [with_association("b", "s1", plan="enterprise", team="ml"), span("c", session_id="s1")]).status_code == 200
    session = TraceSession.objects.get(project=project, session_id="s1")
    assert session.user_id == "u-1"
    assert session.metadata == {"plan": "enterprise", "region": "eu", "team": "ml"}
    # The properties stay on the spans too; the session id and user are not metadata.
    assert Span.objects.get(name="a").attributes["traceloop.association.properties.plan"] == "pro"


def test_the_sessions_api_returns_and_filters_by_user_and_metadata(api, outsider_api):
    post(api, [with_association("a", "s-alice", user_id="alice", plan="pro"), with_association("b", "s-bob", user_id="bob", plan="free")])
    post(api, [with_association("c", "s-carol", user_id="carol", plan="pro", region="us")])

    def ids(**params):
        return sorted(r["session_id"] for r in api.get("/api/v1/sessions", params).json()["results"])

    assert ids(user="bob") == ["s-bob"]
    assert ids(metadata="plan=pro") == ["s-alice", "s-carol"]
    assert api.get("/api/v1/sessions?metadata=plan=pro&metadata=region=us").json()["results"][0]["session_id"] == "s-carol"
    assert len(api.get("/api/v1/sessions?metadata=plan=pro&metadata=region=us").json()["results"]) == 1
    assert ids(metadata="plan=gold") == []
    assert ids(metadata="no-equals-sign") == ["s-alice", "s-bob", "s-carol"]  # not a filter: ignored
    detail = api.get("/api/v1/sessions/s-carol").json()
    assert (detail["user_id"], detail["metadata"]) == ("carol", {"plan": "pro", "region": "us"})
    assert outsider_api.get("/api/v1/sessions", {"user": "bob"}).json()["results"] == []


def test_the_traces_page_lists_users_and_filters_by_user_and_metadata(api, owner_client):
    post(api, [with_association("a", "s-alice", user_id="alice", plan="pro"), with_association("b", "s-bob", user_id="bob", plan="free")])
    listing = owner_client.get("/traces/").content.decode()
    assert "?user=alice" in listing and "?user=bob" in listing
    by_user = owner_client.get("/traces/", {"user": "alice"}).content.decode()
    assert "s-alice" in by_user and "s-bob" not in by_user
    by_metadata = owner_client.get("/traces/", {"metadata": "plan=free"}).content.decode()
    assert "s-bob" in by_metadata and "s-alice" not in by_metadata
    page = owner_client.get("/traces/sessions/s-alice/").content.decode()
    assert "<code>alice</code>" in page and "<code>plan=pro</code>" in page


def test_the_session_page_shows_tool_calls_with_name_and_arguments(api, owner_client):
    llm = span(
        "openai.chat",
        session_id="tools",
        attributes={
            "gen_ai.input.messages": '[{"role": "user", "parts": [{"type": "text", "content": "Weather in Oslo?"}]}]',
            "gen_ai.output.messages": '[{"role": "assistant", "parts": [{"type": "reasoning", "content": "Need the tool."}, '
            '{"type": "tool_call", "id": "call_9", "name": "get_weather", "arguments": {"city": "Oslo"}}], "finish_reason": "tool_call"}]',
        },
    )
    tool_result = span(
        "openai.chat",
        session_id="tools",
        attributes={
            "gen_ai.input.messages": '[{"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_9", "response": "Snow, -4"}]}]',
        },
    )
    assert post(api, [llm, tool_result]).status_code == 200
    page = owner_client.get("/traces/sessions/tools/").content.decode()
    assert "Weather in Oslo?" in page
    assert "Tool call <strong>get_weather</strong>" in page and "{&quot;city&quot;:&quot;Oslo&quot;}" in page
    assert "result of tool call <code>call_9</code>" in page and "Snow, -4" in page
    assert "Need the tool." in page


def test_the_metadata_filter_can_use_its_gin_index():
    # On an empty table the planner would scan anything; with sequential scans
    # off, the containment test must be answerable by the GIN index.
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        sql, params = TraceSession.objects.with_metadata("plan", "pro").query.sql_with_params()
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "Index Scan on session_metadata" in plan


# -- chunked bodies (what gunicorn hands the view) -----------------------------------


class CountingStream(io.BytesIO):
    """A de-chunked wsgi.input that records how much the view read."""

    read_total = 0

    def read(self, size=-1):
        data = super().read(size)
        self.read_total += len(data)
        return data


def chunked(payload: bytes, terminated=True):
    stream = CountingStream(payload)
    # No CONTENT_LENGTH: the client sent Transfer-Encoding: chunked.
    return stream, {"CONTENT_LENGTH": "", "HTTP_TRANSFER_ENCODING": "chunked", "wsgi.input": stream, "wsgi.input_terminated": terminated}


def test_a_chunked_body_is_read_whole(api):
    stream, environ = chunked(body([span(f"c{i}", session_id="chunked") for i in range(300)]))
    response = post(api, [], **environ)
    assert response.status_code == 200, response.content
    assert Span.objects.filter(session_id="chunked").count() == 300


def test_a_chunked_body_over_the_limit_is_413_after_reading_one_byte_past_it(api):
    stream, environ = chunked(b" " * (otlp.MAX_BODY_BYTES * 3))
    response = post(api, [], **environ)
    assert response.status_code == 413
    assert stream.read_total == otlp.MAX_BODY_BYTES + 1


def test_a_chunked_body_the_server_cannot_dechunk_is_411_not_an_empty_body(api):
    stream, environ = chunked(b"5\r\nhello\r\n0\r\n\r\n", terminated=False)
    response = post(api, [], **environ)
    assert response.status_code == 411 and "gunicorn" in response.json()["detail"]


def test_a_session_keeps_at_most_fifty_metadata_keys(api, project):
    post(api, [with_association("a", "wide", **{f"k{i}": "v" for i in range(40)})])
    post(api, [with_association("b", "wide", **{f"extra{i}": "v" for i in range(20)}, k0="changed")])
    session = TraceSession.objects.get(project=project, session_id="wide")
    # The second request would make 60 keys: it is not merged.
    assert len(session.metadata) == 40 and session.metadata["k0"] == "v"
