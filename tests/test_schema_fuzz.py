"""schemathesis against the live OpenAPI schema: no input makes the API answer 500."""

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.django_db(transaction=True)


def test_no_generated_request_gets_a_server_error(live_server, api_key):
    schemathesis = Path(sys.executable).with_name("schemathesis")
    result = subprocess.run(
        [
            str(schemathesis),
            "run",
            f"{live_server.url}/api/schema/",
            "-H",
            f"Authorization: Bearer {api_key}",
            "--checks",
            "not_a_server_error",
            "--phases",
            "fuzzing",
            "-n",
            "5",
            "--seed",
            "1",
            "--request-timeout",
            "30",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-4000:]
    assert " passed" in result.stdout
