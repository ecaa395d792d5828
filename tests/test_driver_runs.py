"""Each internet-bound driver's run.py end to end with its upstream tool stood in for: the tool
gets the tracing relay as its model endpoint, its recorded output becomes results.json, and the
model call lands in the run's trace session."""

import json
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from harnesses import drivers
from traces.models import Span

from .fakes.openai_server import FakeOpenAI

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("loopback_deployments")]

FAKE_TOOL = Path(__file__).resolve().parent / "fakes" / "upstream_tool.py"
RUN_ID = "4242"


def fake(path: Path):
    """An executable at `path` that runs the fake upstream tool."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_TOOL}" "$@"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def python_shim(repo: Path):
    """.venv/bin/python for drivers that run an upstream script with it: the real interpreter."""
    shim = repo / ".venv/bin/python"
    shim.parent.mkdir(parents=True, exist_ok=True)
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    shim.chmod(0o755)


def script(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(FAKE_TOOL, path)


def tau(repo, samples):
    python_shim(repo)
    script(repo / "upstream/run.py")
    return {next(samples.glob("tool-calling-*.json")): repo / "out/tool-calling-x.json"}, {}, 1 / 3


def swe(repo, samples):
    fake(repo / ".venv/bin/mini-extra")
    fake(repo / ".venv/bin/sb-cli")
    outputs = {
        samples / "preds.json": repo / "out/preds.json",
        samples / "swe-bench_lite__test__belvedir-42.json": repo / f"sb-cli-reports/swe-bench_lite__test__belvedir-{RUN_ID}.json",
    }
    return outputs, {}, 1 / 3


def tb(repo, samples):
    fake(repo / ".venv/bin/tb")
    return {samples / "belvedir-42/results.json": repo / f"runs/belvedir-{RUN_ID}/results.json"}, {}, 1 / 3


def gaia(repo, samples):
    fake(repo / ".venv/bin/inspect")
    return {next(samples.glob("*_gaia_*.json")): repo / "logs/2026-11-30_gaia_x.json"}, {}, 1 / 3


def aider(repo, samples):
    python_shim(repo)
    script(repo / "upstream/aider/benchmark/benchmark.py")
    run = next(samples.glob("*--belvedir-42"))
    return {run: repo / "upstream/aider/tmp.benchmarks/2026-11-30-10-20-11--belvedir"}, {}, 0.5


def lm_eval(repo, samples):
    fake(repo / ".venv/bin/lm_eval")
    return {samples / "results_gsm8k_chat.json": repo / "out/m/results_2026.json"}, {}, 0.6


def mt_bench(repo, samples):
    python_shim(repo)
    for name in ("gen_api_answer.py", "gen_judgment.py"):
        script(repo / "upstream/fastchat/llm_judge" / name)
    judgments = repo / "upstream/fastchat/llm_judge/data/mt_bench/model_judgment/gpt-4o_single.jsonl"
    return {samples / "gpt-4o_single.jsonl": judgments}, {"LLM_MODEL": "candidate"}, (8 + 3 + 9) / 3


def openclaw(repo, samples):
    fake(repo / "node_modules/.bin/openclaw")
    tasks = repo.parent / "tasks.txt"
    tasks.write_text("write hi into hello.txt\nand prove it :: test -f proof.txt\n")
    return {}, {"FAKE_STDOUT": str(samples / "task-1.ndjson"), "FRACTAL_TASKS_FILE": str(tasks)}, 0.5


CASES = {
    "tau-bench": tau,
    "swe-bench-lite": swe,
    "terminal-bench": tb,
    "gaia": gaia,
    "aider-polyglot": aider,
    "lm-eval": lm_eval,
    "mt-bench": mt_bench,
    "openclaw": openclaw,
}


@pytest.mark.parametrize("name", CASES)
def test_the_driver_turns_its_upstreams_output_into_results_and_traces_its_model_calls(name, tmp_path, live_server, api_key, project):
    repo = tmp_path / name
    shutil.copytree(drivers.SOURCE / name, repo, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(drivers.SOURCE / "_shared" / "belvedir_driver.py", repo)
    outputs, extra_env, expected_score = CASES[name](repo, drivers.SOURCE / name / "tests" / "samples")
    with FakeOpenAI(answer=lambda q: "ok") as model:
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "FRACTAL_BASE_URL": live_server.url,
            "FRACTAL_API_KEY": api_key,
            "FRACTAL_RUN_ID": RUN_ID,
            "LLM_BASE_URL": model.url,
            "LLM_MODEL": "openai/gpt-4o",
            "LLM_API_KEY": "sk-upstream",
            "OPENAI_API_KEY": "sk-judge",
            "MT_BENCH_JUDGE_BASE_URL": model.url,
            "SWEBENCH_API_KEY": "sb",
            "HF_TOKEN": "hf",
            "DOCKER_HOST": "tcp://x:2376",
            "FAKE_OUTPUTS": json.dumps({str(k): str(v) for k, v in outputs.items()}),
            **extra_env,
        }
        done = subprocess.run([sys.executable, "run.py"], cwd=repo, env=env, capture_output=True, text=True, timeout=120)
        calls = len(model.requests)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    results = json.loads((repo / "results.json").read_text())
    assert results["score"] == pytest.approx(expected_score)
    assert isinstance(results["model"], str) and results["model"]
    assert calls >= 1
    spans = Span.objects.filter(project=project, session_id=RUN_ID, span_kind="llm")
    assert spans.count() == calls, "every model call the upstream made is traced"
    assert spans.filter(prompt__0__content__startswith="fake upstream").count() == calls


@pytest.mark.parametrize("name", ["lm-eval", "mt-bench"])
def test_the_gpu_path_serves_model_and_adapter_with_vllm_and_reports_the_label(name, tmp_path, live_server, api_key, project):
    import socket
    import threading
    import zipfile
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    repo = tmp_path / name
    shutil.copytree(drivers.SOURCE / name, repo, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(drivers.SOURCE / "_shared" / "belvedir_driver.py", repo)
    samples = drivers.SOURCE / name / "tests" / "samples"
    vllm = repo / ".venv/bin/vllm"
    vllm.parent.mkdir(parents=True)
    vllm.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{Path(__file__).resolve().parent / "fakes" / "vllm_server.py"}" "$@"\n')
    vllm.chmod(0o755)
    if name == "lm-eval":
        fake(repo / ".venv/bin/lm_eval")
        outputs, expected = {samples / "candidate": repo / "out/candidate"}, (0.74 + 0.68) / 2
    else:
        outputs, _, expected = mt_bench(repo, samples)
    # The adapter zip, as the platform's signed ADAPTER_URL serves it (files under one folder).
    (tmp_path / "www").mkdir()
    with zipfile.ZipFile(tmp_path / "www" / "adapter.zip", "w") as archive:
        archive.writestr("my-lora/adapter_config.json", '{"r": 8}')
        archive.writestr("my-lora/adapter_model.safetensors", "weights")
    handler = lambda *a, **kw: SimpleHTTPRequestHandler(*a, directory=str(tmp_path / "www"), **kw)  # noqa: E731
    files = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=files.serve_forever, daemon=True).start()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with FakeOpenAI(answer=lambda q: "judged") as judge:
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "FRACTAL_BASE_URL": live_server.url,
            "FRACTAL_API_KEY": api_key,
            "FRACTAL_RUN_ID": RUN_ID,
            "MODEL": "Qwen/Qwen2.5-0.5B",
            "MODEL_LABEL": "my-finetune-v2",
            "ADAPTER_URL": f"http://127.0.0.1:{files.server_address[1]}/adapter.zip",
            "VLLM_PORT": str(port),
            "FAKE_VLLM_RECORD": str(tmp_path / "vllm.json"),
            "OPENAI_API_KEY": "sk-judge",
            "MT_BENCH_JUDGE_BASE_URL": judge.url,
            "FAKE_OUTPUTS": json.dumps({str(k): str(v) for k, v in outputs.items()}),
        }
        done = subprocess.run([sys.executable, "run.py"], cwd=repo, env=env, capture_output=True, text=True, timeout=120)
    files.shutdown()
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    results = json.loads((repo / "results.json").read_text())
    assert results["model"] == "my-finetune-v2" and results["score"] == pytest.approx(expected)
    served = json.loads((tmp_path / "vllm.json").read_text())
    assert served["argv"][:2] == ["serve", "Qwen/Qwen2.5-0.5B"] and "--enable-lora" in served["argv"]
    assert served["lora"] == {"name": "candidate", "has_adapter_config": True}
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0, "vLLM is stopped when the driver ends"
    spans = Span.objects.filter(project=project, session_id=RUN_ID, span_kind="llm")
    assert spans.filter(completion__0__content="served").exists(), "the candidate model's calls went through the relay to vLLM"
