"""Every object URL, generated from the URL conf, tried by an outsider with the owner's ids: 404.

The owner has one object of every kind; the outsider has none. Any URL with
an id in it, dashboard or API, must then be "not found" for the outsider
(405 first where a view takes another method: then that method is tried).
"""

import re

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from belvedir.core.models import ApiKey, ProjectSecret
from billing.models import Account, TopUp
from evals.datasets import create_dataset
from evals.models import Deployment, Eval
from harnesses.models import Harness, Run
from traces.models import TraceSession

pytestmark = pytest.mark.django_db

SKIP_PREFIXES = ("admin/", "static/", "api/schema", "api/docs")
# Values for non-id URL parts; ids are filled with the owner's primary keys.
PLACEHOLDERS = {"fmt": "csv", "benchmark": "gsm8k", "token": "not-a-valid-token", "session_id": "owner-session"}
CONVERTER = re.compile(r"<(?:(\w+):)?(\w+)>")
REGEX_GROUP = re.compile(r"\(\?P<(\w+)>[^)]*\)")
ID_NAMES = {"pk", "run_id", "session_id"}


def routes(patterns, prefix=""):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from routes(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            yield prefix + str(pattern.pattern)


def value_for(converter: str, name: str, object_id: int) -> str:
    if converter == "int" or name in {"pk", "run_id", "other"}:
        return str(object_id)
    if name not in PLACEHOLDERS:
        raise AssertionError(f"no placeholder for <{name}>")
    return PLACEHOLDERS[name]


def fill(route: str, object_id: int) -> str | None:
    """The route with the object's id (and placeholders) in it; None when it names no object."""
    if "(?P<format>" in route:
        return None  # DRF's format-suffix twin of another route
    if "(?P<" in route:  # a router's regex route
        names = REGEX_GROUP.findall(route)
        if not set(names) & ID_NAMES:
            return None
        path = REGEX_GROUP.sub(lambda m: value_for("", m.group(1), object_id), route).replace("^", "").replace("$", "").replace("\\.", ".")
        return "/" + path
    names = CONVERTER.findall(route)
    if not any(c == "int" or n in ID_NAMES for c, n in names):
        return None
    path = route
    for converter, name in names:
        path = path.replace(f"<{converter + ':' if converter else ''}{name}>", value_for(converter, name, object_id), 1)
    return "/" + path


@pytest.fixture
def owners_objects(project, owner):
    harness = Harness.objects.create(project=project, name="h", repo_url="https://x.org/a/b", install_command="true", run_command="true")
    run = Run.objects.create(project=project, harness=harness, compute_type="cpu", price_cents=50)
    deployment = Deployment.objects.create(project=project, name="d", base_url="https://api.example.com/v1", model="m")
    dataset = create_dataset(project, owner, "ds", b'{"input": "a", "expected": "b"}\n')
    ev = Eval.objects.create(project=project, deployment=deployment, benchmark="gsm8k", seed=1)
    key = ApiKey.issue(project=project, user=owner, name="k")[0]
    secret = ProjectSecret.objects.create(project=project, name="HF_TOKEN", value="x")
    topup = TopUp.objects.create(account=Account.for_project(project), amount_cents=1000)
    TraceSession.objects.create(project=project, session_id="owner-session", first_span_at=run.created_at, last_span_at=run.created_at)
    return {o.pk for o in [harness, run, deployment, dataset, ev, key, secret, topup]}


def test_the_sweep_covers_every_object_route():
    object_routes = [r for r in routes(get_resolver().url_patterns) if not r.startswith(SKIP_PREFIXES) and fill(r, 1)]
    assert len(object_routes) >= 30, object_routes


def test_an_outsider_gets_404_on_every_object_url(owners_objects, outsider_client, outsider_api):
    checked = []
    for route in routes(get_resolver().url_patterns):
        if route.startswith(SKIP_PREFIXES):
            continue
        for object_id in sorted(owners_objects):
            url = fill(route, object_id)
            if url is None:
                continue
            client = outsider_api if url.startswith("/api/") else outsider_client
            response = client.get(url)
            if response.status_code == 405:
                response = client.post(url)
            if response.status_code == 405:
                response = client.patch(url) if url.startswith("/api/") else response
            allowed = {404, 403} if "/adapter/" in url else {404}  # a bad signature is refused before any lookup
            assert response.status_code in allowed, (url, response.status_code)
            checked.append(url)
    assert len(checked) >= 30  # every object route at least once
