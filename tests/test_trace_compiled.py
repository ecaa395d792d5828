"""The trace ingest modules compiled with Cython: in use, storing exactly what plain Python stores, and giving way to the source when stale."""

import importlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from importlib.machinery import EXTENSION_SUFFIXES

import orjson
import pytest

from bench.ingest import make_body
from traces import compiled

from .otlp_builders import attr, new_id, request, span
from .servers import REPO

RECEIVED = datetime(2026, 12, 1, tzinfo=UTC)

# Parses the bodies given on stdin with the modules' plain Python source and
# prints the rows: with no digest recorded, every build counts as stale, so
# the finder traces/__init__.py installs imports the sources.
PLAIN = """
import os, sys
from pathlib import Path

from traces import compiled

compiled.DIGESTS = Path(os.devnull)
import django

django.setup()
from tests.test_trace_compiled import rows

result = rows(sys.stdin.buffer.read().split(b"\\n"))
assert all(sys.modules[f"traces.{name}"].__file__.endswith(".py") for name in compiled.MODULES)
sys.stdout.buffer.write(result)
"""

# Starts the app in a fresh interpreter, on the `traces` package under the
# current directory, and prints which file each compiled module was imported
# from, whether the edit below took effect and what `manage.py check` says.
START = """
import importlib, io, json
import django
from django.core.management import call_command

django.setup()
from traces import compiled, otlp

check = io.StringIO()
call_command("check", stdout=check, stderr=check)
modules = {name: importlib.import_module(f"traces.{name}").__file__ for name in compiled.MODULES}
print(json.dumps({"modules": modules, "edited": getattr(otlp, "EDITED", None), "check": check.getvalue()}))
"""
WARNING = "Trace ingest runs as plain Python, slower"


def start(tree):
    env = {**os.environ, "PYTHONPATH": str(REPO), "DJANGO_SETTINGS_MODULE": "belvedir.settings"}
    result = subprocess.run([sys.executable, "-c", START], cwd=tree, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout), result.stderr


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


@pytest.mark.processes
@pytest.mark.django_db
def test_the_compiled_modules_are_the_ones_running_and_store_what_plain_python_stores():
    modules = [importlib.import_module(f"traces.{name}") for name in compiled.MODULES]
    assert all(module.__file__.endswith(tuple(EXTENSION_SUFFIXES)) for module in modules), "scripts/compile.py did not compile them"
    assert not any(compiled.unusable(name) for name in compiled.MODULES)

    bodies = [make_body(7, 60), varied_body()]
    compiled_rows = rows(bodies)
    plain = subprocess.run([sys.executable, "-c", PLAIN], input=b"\n".join(bodies), cwd=REPO, capture_output=True, check=True)
    assert orjson.loads(plain.stdout) == orjson.loads(compiled_rows)
    # The comparison covered what it should: every shape stored, the bad spans rejected.
    result = orjson.loads(compiled_rows)
    assert [len(body["rows"]) for body in result] == [60, 4] and result[1]["rejected"] == 2


@pytest.mark.processes
def test_the_app_starts_on_the_fresh_builds_without_a_warning():
    started, log = start(REPO)
    assert all(path.endswith(".so") for path in started["modules"].values()), started["modules"]
    assert WARNING not in log and "belvedir.W005" not in started["check"]


@pytest.mark.processes
def test_a_stale_missing_or_broken_build_gives_way_to_its_source_with_a_warning(tmp_path):
    # A copy of the package, its builds and their digests: the real ones stay as they are.
    traces = tmp_path / "traces"
    shutil.copytree(REPO / "traces", traces, ignore=shutil.ignore_patterns("__pycache__"))
    suffix = EXTENSION_SUFFIXES[0]
    with open(traces / "otlp.py", "a") as file:
        file.write('\nEDITED = "after the build"\n')
    (traces / f"extract{suffix}").write_bytes(b"a build cut short")
    (traces / f"messages{suffix}").unlink()

    started, log = start(tmp_path)
    modules = {name: path.removeprefix(str(traces) + "/") for name, path in started["modules"].items()}
    assert modules == {"otlp": "otlp.py", "extract": "extract.py", "messages": "messages.py"}
    assert started["edited"] == "after the build"
    assert log.count(WARNING) == 1
    warning = next(line for line in log.splitlines() if WARNING in line)
    assert "traces/otlp.py changed after it was compiled" in warning and "scripts/compile.py" in warning
    assert "traces/extract.py has a build that does not load" in warning and "traces/messages.py is not compiled" in warning
    assert started["check"].count("belvedir.W005") == 3 and "scripts/compile.py" in started["check"]


def test_a_build_left_of_a_module_no_longer_compiled_never_shadows_its_source(tmp_path):
    # ingest.py was compiled until its build was measured to buy nothing: a checkout may still hold one.
    traces = tmp_path / "traces"
    shutil.copytree(REPO / "traces", traces, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(traces / f"otlp{EXTENSION_SUFFIXES[0]}", traces / f"ingest{EXTENSION_SUFFIXES[0]}")  # a build that is not ingest's
    with open(traces / "ingest.py", "a") as file:
        file.write('\nEDITED = "the source runs"\n')
    probe = "import django; django.setup(); from traces import ingest; print(ingest.__file__, ingest.EDITED)"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}:{REPO}", "DJANGO_SETTINGS_MODULE": "belvedir.settings"}
    ran = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == [str(traces / "ingest.py"), "the", "source", "runs"]


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
    assert not compiled.builds("otlp") and compiled.recorded() == {} and compiled.unusable("otlp") == "is not compiled"
    assert "gcc" in capsys.readouterr().err
