"""Ids from requests (belvedir/core/ids.py): ASCII digits of a positive bigint, nothing else, wherever a request names
an object by id or by name. The query parameters of every page and API list are swept in test_scoping_sweep.py."""

import pytest

from belvedir.core.ids import parse_id
from evals.models import Deployment

from .harness_fixtures import fund

pytestmark = pytest.mark.django_db

NOT_IDS = ["²", "٣", "1²", "0", "-1", "+1", " 1", "1.0", "0x1f", "9" * 19, "1" + "0" * 23, "", None, True, 1.0, "١٢"]


@pytest.mark.parametrize("value", NOT_IDS, ids=repr)
def test_only_ascii_digits_of_a_positive_bigint_name_an_object(value):
    assert parse_id(value) is None


def test_ids_read_as_they_are_written():
    assert [parse_id("1"), parse_id("007"), parse_id(42), parse_id(str(2**63 - 1))] == [1, 7, 42, 2**63 - 1]


@pytest.mark.parametrize("value", ["²", "٣", "1" + "0" * 23])
def test_a_name_or_id_of_any_form_is_refused_or_found_by_name_never_a_500(project, owner, api, value):
    """Each place a body or a query names an object by name or id: `²` read as an id by isdigit() was a 500."""
    fund(project, 1000)
    Deployment.objects.create(project=project, name=value, base_url="https://example.com/v1", model="m")
    answers = {
        "jobs: task_set": api.post("/api/v1/jobs", {"task_set": value, "agents": ["nop"], "budget": "1"}, format="json").status_code,
        "jobs: deployments": api.post(
            "/api/v1/jobs", {"task_set": "x", "agents": ["reference"], "deployments": [value], "budget": "1"}, format="json"
        ).status_code,
        "evals: deployment": api.post("/api/v1/evals", {"deployment": value, "benchmark": "gsm8k", "limit": 1}, format="json").status_code,
        "runs: harness": api.get("/api/v1/runs", {"harness": value}).status_code,
        "sessions: run": api.get("/api/v1/sessions", {"run": value}).status_code,
        "sessions: evaluator": api.get("/api/v1/sessions", {"evaluator": value, "score": "pass"}).status_code,
        "evaluators: judge": api.post(
            "/api/v1/evaluators", {"name": "j", "kind": "judge", "judge": value, "rubric": "Is it polite?"}, format="json"
        ).status_code,
        "rows from traces: dataset": api.post("/api/v1/datasets/rows-from-traces", {"dataset": value, "sessions": ["s"]}, format="json").status_code,
    }
    assert {where: code for where, code in answers.items() if code >= 500} == {}
