"""`bv` for what was dashboard-only: model upload, traces, members. Against a live test server."""

import json
from datetime import timedelta

import pytest
import time_machine
from click.testing import CliRunner
from django.utils import timezone

from belvedir.core.actions import create_account
from belvedir.core.models import ApiKey, Invitation, Membership
from belvedir.localmodel import files
from belvedir_cli.main import cli
from belvedir_cli.upload import MultipartFile
from finetunes.models import FineTunedModel
from harnesses.models import Harness, Run
from traces.models import TaskGroup
from traces.segmentation import process_quiet_sessions

from .adapters import letter_adapter, zipped
from .harness_fixtures import fund
from .otlp_builders import body
from .test_decontamination import NOT_CAUGHT, PLANTED, plant
from .test_models import make_zip
from .test_training_export import expected, support_session

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def bv(live_server, api_key, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))

    def run(*args, key=api_key):
        return CliRunner().invoke(cli, list(args), env={"BELVEDIR_API_KEY": key, "BELVEDIR_BASE_URL": live_server.url}, obj={})

    return run


def test_models_upload_lands_in_the_panel_flow(bv, project, owner_client, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    adapter = tmp_path / "lora.zip"
    adapter.write_bytes(make_zip({"adapter_config.json": b'{"r": 8}', "adapter_model.safetensors": b"\7" * 600_000}))
    result = bv("models", "upload", "support-v4", "--base", "meta-llama/Llama-3.1-8B-Instruct", "--adapter", str(adapter), "--json")
    assert result.exit_code == 0, result.output
    uploaded = json.loads(result.stdout)
    model = FineTunedModel.objects.get(name="support-v4")
    assert uploaded["id"] == model.pk and model.adapter_size == adapter.stat().st_size
    assert model.adapter.read() == adapter.read_bytes()
    # The panel flow: the model's page, and a benchmark run naming it shows on its panel.
    harness = Harness.objects.create(
        project=project, name="lm-eval", repo_url="https://x.org/a/b", install_command="true", run_command="true", compute_type="gpu"
    )
    Run.objects.create(project=project, harness=harness, compute_type="gpu", price_cents=500, status="succeeded", score=0.71, model_label="support-v4")
    assert "0.71" in owner_client.get(f"/models/{model.pk}/").content.decode()
    assert [b["score"] for b in json.loads(bv("models", "benchmarks", "support-v4", "--json").stdout)] == [0.71]


def test_a_gguf_adapter_is_uploaded_and_benchmarked_on_a_cpu_harness_with_the_local_model(bv, project, owner, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    fund(project, 5000)
    weights = files.model_path(settings.LOCAL_MODEL_DIR)
    adapter = tmp_path / "smol-c.zip"
    adapter.write_bytes(zipped(letter_adapter(weights, tmp_path / "answers-c.gguf")))
    uploaded = bv("models", "upload", "smol-c", "--base", files.MODEL_ID, "--adapter", str(adapter), "--json")
    assert uploaded.exit_code == 0, uploaded.output
    assert json.loads(uploaded.stdout)["adapter_format"] == "gguf"
    common = dict(project=project, created_by=owner, repo_url="https://x.org/a/b", install_command="true", run_command="true")
    gpu = Harness.objects.create(name="vllm", compute_type="gpu", gpu_type="A10G", **common)
    local = Harness.objects.create(name="local", local_model=True, **common)
    refused = bv("models", "run", "smol-c", "--harness", str(gpu.pk))
    assert refused.exit_code != 0 and "Choose a CPU harness with the local model of this project." in refused.output
    started = bv("models", "run", "smol-c", "--harness", str(local.pk), "--json")
    assert started.exit_code == 0, started.output
    run = Run.objects.get(pk=json.loads(started.stdout)["id"])
    assert run.harness == local and run.extra_env["MODEL_LABEL"] == "smol-c" and "ADAPTER_URL" in run.secret_env


def test_models_upload_reports_the_servers_validation(bv, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    bad = tmp_path / "bad.zip"
    bad.write_bytes(b"not a zip at all")
    result = bv("models", "upload", "m", "--base", "b", "--adapter", str(bad))
    assert result.exit_code == 2 and "The adapter must be a zip file." in result.output
    missing = bv("models", "upload", "m", "--base", "b", "--adapter", str(tmp_path / "nope.zip"))
    assert missing.exit_code == 2 and "does not exist" in missing.output


def test_the_upload_body_streams_with_a_known_length(tmp_path):
    path = tmp_path / "a.zip"
    path.write_bytes(b"z" * 700_000)
    upload = MultipartFile({"name": "m"}, "adapter", path)
    seen = []
    data = b"".join(upload.chunks(seen.append))
    assert len(data) == upload.length and sum(seen) == 700_000 and len(seen) == 3


@pytest.fixture
def traced(api, project):
    base = timezone.now().timestamp()
    with time_machine.travel(timezone.now(), tick=False) as clock:
        spans = support_session("ok", "order 1", base) + support_session("bad", "order 2", base + 10)
        assert api.generic("POST", "/api/v1/traces", body(spans), content_type="application/json").status_code == 200
        clock.shift(timedelta(seconds=31))
        process_quiet_sessions()
    api.post("/api/v1/outcomes", {"session_id": "bad", "outcome": "fail"}, format="json")
    return TaskGroup.objects.get(name="support")


def test_traces_sessions_and_show(bv, traced):
    sessions = json.loads(bv("traces", "sessions", "--json").stdout)
    assert {s["session_id"] for s in sessions} == {"ok", "bad"}
    failed = json.loads(bv("traces", "sessions", "--outcome", "fail", "--json").stdout)
    assert [s["session_id"] for s in failed] == ["bad"]
    shown = bv("traces", "show", "ok")
    assert shown.exit_code == 0 and "support.workflow" in shown.output and "openai.chat" in shown.output
    assert "user: thanks, and then? → assistant: Then it ships." in shown.output and "3 steps, 2 LLM calls" in shown.output
    steps = json.loads(bv("traces", "show", "ok", "--json").stdout)["steps"]
    assert [(s["number"], s["kind"]) for s in steps] == [(1, "span"), (2, "llm"), (3, "llm")]
    assert [s["kind"] for s in json.loads(bv("traces", "show", "ok", "--kind", "llm", "--json").stdout)["steps"]] == ["llm", "llm"]
    compared = bv("traces", "diff", "ok", "bad")
    assert compared.exit_code == 0 and "They diverge at row 2." in compared.output, compared.output
    assert json.loads(bv("traces", "diff", "ok", "bad", "--json").stdout)["rows"][1]["changes"] == ["message"]
    missing = bv("traces", "show", "nope")
    assert missing.exit_code == 2 and "404" in missing.output


def test_traces_export_to_stdout_and_to_a_file(bv, traced, tmp_path):
    result = bv("traces", "export", "support")
    assert result.exit_code == 0, result.output
    *examples, canary = [json.loads(line) for line in result.stdout.splitlines()]
    assert examples == [expected(1)] and canary["metadata"]["belvedir_canary"] == str(traced.canary)
    assert "No task overlaps a benchmark." in result.stderr
    path = tmp_path / "train.jsonl"
    summary = json.loads(bv("traces", "export", str(traced.pk), "--since", "2020-01-01", "-o", str(path), "--json").stdout)
    assert summary == {
        "group": traced.pk,
        "file": str(path),
        "lines": 2,
        "left_out": 0,
        "left_out_by_benchmark": {},
        "included_marked": 0,
        "included_marked_by_benchmark": {},
    }
    assert json.loads(path.read_text().splitlines()[0]) == expected(1)
    assert bv("traces", "export", "nope").exit_code == 2
    bad_date = bv("traces", "export", "support", "--since", "someday")
    assert bad_date.exit_code == 2 and "not a date" in bad_date.output


def test_traces_export_says_what_the_benchmark_check_left_out_and_lists_it(bv, api):
    tutor = plant(api)
    result = bv("traces", "export", "tutor")
    assert result.exit_code == 0, result.output
    assert len(result.stdout.splitlines()) == len(NOT_CAUGHT) + 1
    assert "Left out 5 tasks that overlap a benchmark (gsm8k 2, mbpp 1, mmlu 2)" in result.stderr
    assert "bv traces export tutor --show-overlaps" in result.stderr
    listed = bv("traces", "export", "tutor", "--show-overlaps")
    assert listed.exit_code == 0 and "5 tasks overlap a benchmark: gsm8k 2, mbpp 1, mmlu 2." in listed.output
    assert "task" in listed.output and "(session mmlu-stem): mmlu row high_school_geography/0, 13-gram in the user message" in listed.output
    rows = json.loads(bv("traces", "export", str(tutor.pk), "--show-overlaps", "--json").stdout)
    assert sorted(r["session_id"] for r in rows) == sorted(set(PLANTED) - NOT_CAUGHT)
    marked = bv("traces", "export", "tutor", "--allow-benchmark-overlap")
    assert sum("benchmark_overlap" in json.loads(line) for line in marked.stdout.splitlines()) == 5
    assert "Included 5 tasks that overlap a benchmark, each marked with benchmark_overlap (gsm8k 2, mbpp 1, mmlu 2)." in marked.stderr


def test_members_list_invite_remove(bv, project, owner):
    carol = create_account(username="carol", password=None, email="carol@example.com")
    assert [m["username"] for m in json.loads(bv("members", "list", "--json").stdout)] == ["alice"]
    invited = bv("members", "invite", "carol@example.com")
    assert invited.exit_code == 0 and "/invitations/" in invited.output
    Membership.objects.create(project=project, user=carol)
    carol_key = ApiKey.issue(project=project, user=carol, name="c")[1]
    assert "carol" in bv("members", "list").output
    removed = bv("members", "remove", "carol", "--json")
    assert removed.exit_code == 0 and json.loads(removed.stdout) == {"removed": "carol"}
    assert bv("members", "list", key=carol_key).exit_code == 2  # their key stopped working
    assert bv("members", "remove", "carol").exit_code == 2
    assert Invitation.objects.count() == 1


def test_members_cannot_invite(bv, project, owner):
    bob = create_account(username="bob", password=None)
    Membership.objects.create(project=project, user=bob)
    key = ApiKey.issue(project=project, user=bob, name="b")[1]
    result = bv("members", "invite", "alice", key=key)
    assert result.exit_code == 2 and "403" in result.output
