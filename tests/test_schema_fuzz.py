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


def test_the_schema_states_a_secrets_rules_and_the_api_keeps_them(api):
    schema = api.get("/api/schema/?format=json").json()["components"]["schemas"]["SecretWrite"]
    name = schema["properties"]["name"]
    assert name["pattern"] == "^[A-Za-z_][A-Za-z0-9_]*$"
    assert name["maxLength"] == 100
    assert set(schema["required"]) == {"name", "value"}
    for bad in ({"name": "9X", "value": "v"}, {"name": "A" * 101, "value": "v"}, {"name": "A"}):
        assert api.post("/api/v1/secrets", bad, format="json").status_code == 400
    refused = api.post("/api/v1/secrets", {"name": "a-b", "value": "v"}, format="json")
    assert refused.json() == {"name": ["Letters, digits and _, not starting with a digit."]}
    assert api.post("/api/v1/secrets", {"name": "HF_TOKEN", "value": "v"}, format="json").status_code == 201
