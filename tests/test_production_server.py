"""The production web server setup: gunicorn with the repository's gunicorn.conf.py."""

import pytest
import requests

from traces.models import Span

from .otlp_builders import body, span
from .servers import batches_stored, web_server

pytestmark = pytest.mark.processes


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", ["production", "make-run"])
def test_gunicorn_with_the_repository_config_serves_ingest(api_key, kind):
    stopped = {}
    with web_server(kind, stopped) as url:
        spans = [span(f"call-{i}", session_id="prod") for i in range(50)]
        response = requests.post(
            f"{url}/api/v1/traces", data=body(spans), headers={"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}, timeout=10
        )
        assert response.status_code == 200 and response.json() == {}
        batches_stored()
        assert Span.objects.filter(session_id="prod").count() == 50
    assert stopped["returncode"] == 0, stopped["output"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", ["production", "make-run"])
def test_a_chunked_body_over_five_megabytes_is_413(api_key, kind):
    def pieces():  # 8 MB, chunked: requests sends a generator without Content-Length
        for _ in range(128):
            yield b" " * (64 * 1024)

    with web_server(kind) as url:
        response = requests.post(
            f"{url}/api/v1/traces", data=pieces(), headers={"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}, timeout=30
        )
    assert response.status_code == 413 and "over 5 MB" in response.json()["detail"]
