"""The web servers Belvedir is served with, started for real on a free port.

`production`: gunicorn with the repository's gunicorn.conf.py and DEBUG=0, as
docs/running/production.md runs it. `make-run`: scripts/web.sh, the command
`make run` starts, with DEBUG=1 as scripts/run.sh sets it. And the local
model server (`manage.py serve_local_model`), which `make run` starts beside it.
"""

import os
import signal
import socket
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import requests
from django.conf import settings

from .harness_fixtures import wait_for

REPO = Path(__file__).resolve().parent.parent
COMMANDS = {
    # Plain HTTP straight to gunicorn: no TLS proxy in front, so no redirect to HTTPS.
    "production": (
        [sys.executable, "-m", "gunicorn", "belvedir.wsgi"],
        {"DEBUG": "0", "SECRET_KEY": "production-test-" + "k" * 40, "SECURE_SSL_REDIRECT": "0"},
    ),
    "make-run": ([str(REPO / "scripts" / "web.sh")], {"DEBUG": "1", "BELVEDIR_ALLOW_PRIVATE_DEPLOYMENTS": "1"}),
}


def subprocess_environ() -> dict:
    """Environment for a subprocess of this installation that works on the test database
    (which it sees only with `django_db(transaction=True)`: no open transaction).

    Of the variables belvedir/settings.py reads, the child gets only those
    named here (and what its caller adds): whatever this process's
    environment holds (a developer's STRIPE_SECRET_KEY, a test's setenv) never
    reaches it, so it runs on the production defaults as the suite does
    (pytest.ini), with DEBUG on.
    """
    db = settings.DATABASES["default"]
    return {
        **{name: value for name, value in os.environ.items() if name not in settings.ENV_VARIABLES},
        "DEBUG": "1",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        # The same installation as this process (it is named after the database URL it was started with).
        "BELVEDIR_INSTANCE": settings.SANDBOX_INSTANCE,
        # Where things are: the same engine, files and benchmark data as this process.
        "DOCKER_HOST": settings.SANDBOX_DOCKER_URL,
        "BELVEDIR_VAR_DIR": str(settings.VAR_DIR),
        "BELVEDIR_BENCHMARK_DATA_DIR": str(settings.BENCHMARK_DATA_DIR),
        "BELVEDIR_BENCHMARK_WHEEL_DIR": str(settings.BENCHMARK_WHEEL_DIR),
    }


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def web_server(kind: str, result: dict | None = None, environ: dict | None = None):
    """Yield the base URL of a running server of this kind; stop it (SIGTERM) after.

    `result`, when given, receives the server's exit code and output.
    `environ`: the environment to start from instead of subprocess_environ() (another database).
    """
    command, env = COMMANDS[kind]
    port = free_port()
    # Two workers: enough to serve concurrent exporters, light on a 2-core machine.
    env = {**(environ or subprocess_environ()), **env, "WEB_CONCURRENCY": "2", "BIND": f"127.0.0.1:{port}"}
    url = f"http://127.0.0.1:{port}"
    server = _started(command, env, f"{url}/login/")
    # Ingest answers before it stores: the batch processor production and
    # `make run` start beside the server stores the spans.
    processor = subprocess.Popen(
        [sys.executable, "manage.py", "process_trace_batches"], env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        yield url
    finally:
        processor.send_signal(signal.SIGTERM)
        server.send_signal(signal.SIGTERM)
        output, _ = server.communicate(timeout=30)
        processor.wait(30)
        if result is not None:
            result.update(returncode=server.returncode, output=output)


def batches_stored(timeout=30):
    """Wait until the batch processor has stored every accepted trace batch."""
    from traces.models import TraceBatch

    wait_for(lambda: not TraceBatch.objects.exists(), timeout=timeout, interval=0.05)


def _started(command: list[str], env: dict, ready_url: str) -> subprocess.Popen:
    """A server process, once `ready_url` answers 200; its output in the failure if it exits first."""
    server = subprocess.Popen(command, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wait_for(lambda: server.poll() is not None or _answers(ready_url), timeout=60)
    assert server.poll() is None, server.communicate()[0][-3000:]
    return server


def _answers(url) -> bool:
    try:
        return requests.get(url, timeout=5).status_code == 200
    except requests.RequestException:  # not listening yet, or a cold first request
        return False


@contextmanager
def local_model_server(*arguments: str):
    """`manage.py serve_local_model` on a free port (the real weights, from `manage.py install_local_model`); yields its base URL."""
    port = free_port()
    # One thread: llama.cpp's threads wait for each other at every layer, so beside the suite's other workers a core
    # taken from one holds up all (the gsm8k test with two cores kept busy: 200-227 s at 2 threads, 132 s at 1).
    command = [sys.executable, "manage.py", "serve_local_model", "--port", str(port), "--threads", "1", *arguments]
    url = f"http://127.0.0.1:{port}/v1"
    server = _started(command, subprocess_environ(), f"{url}/models")
    try:
        yield url
    finally:
        server.terminate()
        output, _ = server.communicate(timeout=30)
    assert server.returncode == 0, output[-3000:]
