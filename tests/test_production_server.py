"""The production web server setup: gunicorn with the repository's gunicorn.conf.py."""

import signal
import socket
import subprocess
import sys

import pytest
import requests

from traces.models import Span

from .harness_fixtures import wait_for
from .otlp_builders import body, span


@pytest.mark.django_db(transaction=True)
def test_gunicorn_with_the_repository_config_serves_ingest(subprocess_env, api_key):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**subprocess_env, "DEBUG": "0", "SECRET_KEY": "production-test-" + "k" * 40, "WEB_CONCURRENCY": "2", "BIND": f"127.0.0.1:{port}",
           # Plain HTTP straight to gunicorn: no TLS proxy in front to redirect to.
           "SECURE_SSL_REDIRECT": "0"}
    server = subprocess.Popen([sys.executable, "-m", "gunicorn", "belvedir.wsgi"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _answers(f"{url}/login/"), timeout=30)
        spans = [span(f"call-{i}", session_id="prod") for i in range(50)]
        response = requests.post(
            f"{url}/api/v1/traces", data=body(spans), headers={"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}, timeout=10
        )
        assert response.status_code == 200 and response.json() == {}
        assert Span.objects.filter(session_id="prod").count() == 50
    finally:
        server.send_signal(signal.SIGTERM)
        output, _ = server.communicate(timeout=30)
    assert server.returncode == 0, output


def _answers(url) -> bool:
    try:
        return requests.get(url, timeout=5).status_code == 200
    except requests.RequestException:  # not up yet, or a worker still booting on a busy machine
        return False
