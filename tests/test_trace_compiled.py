"""The trace ingest modules compiled with Cython: in use, storing exactly what plain Python stores, and never stale."""

import importlib
import importlib.util
import json
import subprocess
import sys
from datetime import UTC, datetime
from importlib.machinery import EXTENSION_SUFFIXES

import orjson
import pytest
from django.apps import apps
from django.core.exceptions import ImproperlyConfigured

from bench.ingest import make_body
from traces import compiled

from .otlp_builders import attr, new_id, request, span
from .servers import REPO

RECEIVED = datetime(2026, 12, 1, tzinfo=UTC)

# Parses the bodies given on stdin with the modules' plain Python source (a
# path hook that sees no compiled files under traces/) and prints the rows.
PLAIN = """
import os, sys
from importlib.machinery import FileFinder, SourceFileLoader, SOURCE_SUFFIXES

TRACES = os.path.realpath("traces")


def source_only(path):
    if os.path.realpath(path) != TRACES:
        raise ImportError(path)
    return FileFinder(path, (SourceFileLoader, SOURCE_SUFFIXES))


sys.path_hooks.insert(0, source_only)
sys.path_importer_cache.clear()
import django

django.setup()
from tests.test_trace_compiled import rows
from traces import compiled

result = rows(sys.stdin.buffer.read().split(b"\\n"))
assert all(sys.modules[f"traces.{name}"].__file__.endswith(".py") for name in compiled.MODULES)
sys.stdout.buffer.write(result)
"""


def rows(bodies: list[bytes]) -> bytes:
    """What storing each body would write: its rows (as COPY gets them) and its rejections."""
    from traces import ingest, otlp

    out = []
    for body in bodies:
        parsed = otlp.parse(body, "application/json")
        values = ingest._copy_values([ingest._row(1, raw, RECEIVED) for raw in parsed.spans])
        out.append({"rows": values, "rejected": parsed.rejected, "reasons": parsed.reasons})
    return orjson.dumps(out, default=lambda value: value.decode("latin-1") if isinstance(value, bytes) else str(value))


def varied_body() -> bytes:
    """Each kind of value and each generation of messages, odd text, and spans that are rejected."""
    structured = span(
        "chat",
        session_id="s-1",
        attributes={
            "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": "héllo \u2603"}]}]),
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "f", "arguments": {"x": 1}}]}]),
            "gen_ai.usage.input_tokens": 3.0,
            "flag": True,
            "nul": "a\x00b",
        },
    )
    structured["attributes"] += [
        {"key": "list", "value": {"arrayValue": {"values": [{"intValue": "1"}, {"stringValue": "two"}, {"doubleValue": 2.5}]}}},
        {"key": "map", "value": {"kvlistValue": {"values": [attr("inner", "v"), {"key": "deep", "value": {"boolValue": False}}]}}},
        {"key": "huge", "value": {"intValue": "99999999999999999999999"}},
        {"key": "nan", "value": {"doubleValue": "NaN"}},
        {"key": "bytes", "value": {"bytesValue": "AAEC"}},
    ]
    evented = span("events", session_id="s-2", user_message=None, tokens=(2, 1))
    evented["events"] = [
        {"name": "gen_ai.user.message", "timeUnixNano": "1", "attributes": [attr("content", "from an event")]},
        {"name": "gen_ai.choice", "timeUnixNano": "2", "attributes": [attr("message", '{"content": "answer"}'), attr("finish_reason", "stop")]},
    ]
    indexed = span("indexed", session_id="s-1", user_message="plain question", model="gpt", tokens=(7, 9), kind="workflow")
    indexed["attributes"] += [attr("gen_ai.completion.0.tool_calls.0.name", "lookup"), attr("gen_ai.completion.0.tool_calls.0.arguments", "{}")]
    bad_ids = {**span("bad"), "traceId": "zz" * 16}
    backwards = {**span("backwards"), "startTimeUnixNano": "5", "endTimeUnixNano": "4"}
    snake = {"trace_id": new_id(32), "span_id": new_id(16), "name": "snake", "start_time_unix_nano": 10, "end_time_unix_nano": 20, "kind": "SPAN_KIND_SERVER"}
    return json.dumps(request([structured, evented, indexed, bad_ids, backwards, snake]), ensure_ascii=False).encode()


@pytest.mark.django_db
def test_the_compiled_modules_are_the_ones_running_and_store_what_plain_python_stores():
    modules = [importlib.import_module(f"traces.{name}") for name in compiled.MODULES]
    assert all(module.__file__.endswith(tuple(EXTENSION_SUFFIXES)) for module in modules), "scripts/compile.py did not compile them"
    assert not compiled.stale()

    bodies = [make_body(7, 60), varied_body()]
    compiled_rows = rows(bodies)
    plain = subprocess.run([sys.executable, "-c", PLAIN], input=b"\n".join(bodies), cwd=REPO, capture_output=True, check=True)
    assert orjson.loads(plain.stdout) == orjson.loads(compiled_rows)
    # The comparison covered what it should: every shape stored, the bad spans rejected.
    result = orjson.loads(compiled_rows)
    assert [len(body["rows"]) for body in result] == [60, 4] and result[1]["rejected"] == 2


def test_a_module_edited_after_it_was_compiled_stops_the_app_from_starting(tmp_path, monkeypatch):
    monkeypatch.setattr(compiled, "HERE", tmp_path)
    monkeypatch.setattr(compiled, "DIGESTS", tmp_path / "compiled-sources.json")
    (tmp_path / "otlp.py").write_text("VERSION = 1\n")
    (tmp_path / "extract.py").write_text("plain = True\n")  # never compiled: runs as it is
    (tmp_path / f"otlp{EXTENSION_SUFFIXES[0]}").write_bytes(b"")
    compiled.record(["otlp"])
    assert compiled.stale() == [] and compiled.current("otlp") and not compiled.current("extract")
    apps.get_app_config("traces").ready()

    (tmp_path / "otlp.py").write_text("VERSION = 2\n")
    assert compiled.stale() == ["otlp"]
    with pytest.raises(ImproperlyConfigured, match=r"traces/otlp\.py changed after it was compiled: run .*scripts/compile\.py"):
        apps.get_app_config("traces").ready()

    compiled.remove("otlp")  # what a failed build does: the source runs again
    assert compiled.stale() == [] and not compiled.builds("otlp")


def test_a_build_that_fails_leaves_the_modules_to_run_as_plain_python(tmp_path, monkeypatch, capsys):
    spec = importlib.util.spec_from_file_location("compile_script", REPO / "scripts" / "compile.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    monkeypatch.setattr(compiled, "HERE", tmp_path)
    monkeypatch.setattr(compiled, "DIGESTS", tmp_path / "compiled-sources.json")
    for name in compiled.MODULES:
        (tmp_path / f"{name}.py").write_text(f"NAME = {name!r}\n")
    (tmp_path / f"otlp{EXTENSION_SUFFIXES[0]}").write_bytes(b"an older build")

    def no_compiler(names):
        raise SystemExit("error: command 'gcc' failed: No such file or directory")

    monkeypatch.setattr(script, "build", no_compiler)
    monkeypatch.setattr(sys, "argv", ["compile.py"])
    script.main()
    assert not compiled.builds("otlp") and compiled.recorded() == {} and compiled.stale() == []
    assert "gcc" in capsys.readouterr().err
