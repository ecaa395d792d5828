"""Deployments, the LLM judge and Test connection call only where the
outbound policy allows, checked on the address connected to, every time."""

import ipaddress
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from evals.actions import EvalConfigError, create_eval
from evals.models import Deployment, Eval, Sample
from evals.tasks import run_eval

from .fakes.openai_server import FakeOpenAI

pytestmark = pytest.mark.django_db
INTERNAL_SECRET = "internal-admin-token-4242"


class Recorder(BaseHTTPRequestHandler):
    """An internal service (127.0.0.2) or a redirector, recording what reaches it."""

    def do_POST(self):
        self.server.hits.append((self.path, self.rfile.read(int(self.headers.get("Content-Length") or 0))))
        if self.server.redirect_to:
            self.send_response(307)
            self.send_header("Location", self.server.redirect_to)
            self.end_headers()
            return
        self.send_response(500)
        self.end_headers()
        self.wfile.write(INTERNAL_SECRET.encode())

    def log_message(self, *args):
        pass


@pytest.fixture
def serve():
    servers = []

    def start(address, redirect_to=""):
        server = ThreadingHTTPServer((address, 0), Recorder)
        server.hits, server.redirect_to = [], redirect_to
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server, f"http://{address}:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def production_policy(settings):
    # Private addresses off, as in production; 127.0.0.1 stands in for the
    # public internet (an operator-allowed network), 127.0.0.2 for the inside.
    settings.EVAL_ALLOW_PRIVATE_URLS = False
    settings.EGRESS_ALLOW_NETWORKS = (ipaddress.ip_network("127.0.0.1/32"),)


def test_a_deployment_whose_address_became_private_is_refused_when_connecting(api, project, serve, production_policy):
    internal, url = serve("127.0.0.2")
    # Saved while its name answered a public address; now it answers an internal one.
    deployment = Deployment.objects.create(project=project, name="rebound", base_url=url + "/v1", model="m")
    result = api.post(f"/api/v1/deployments/{deployment.pk}/test").json()
    assert result["ok"] is False
    assert "127.0.0.2" in result["error"] and "private or special-purpose" in result["error"]
    assert internal.hits == []


def test_names_are_checked_on_the_resolved_address_when_connecting(api, project, serve, settings):
    settings.EVAL_ALLOW_PRIVATE_URLS = False
    internal, url = serve("127.0.0.1")
    port = url.rsplit(":", 1)[1]
    # A name, so the check happens in the resolver the connection uses.
    deployment = Deployment.objects.create(project=project, name="by-name", base_url=f"http://localhost:{port}/v1", model="m")
    result = api.post(f"/api/v1/deployments/{deployment.pk}/test").json()
    assert result["ok"] is False and "localhost resolves to" in result["error"]
    assert internal.hits == []


def test_a_redirect_to_an_internal_service_is_not_followed(api, project, serve, production_policy):
    internal, internal_url = serve("127.0.0.2")
    redirector, url = serve("127.0.0.1", redirect_to=internal_url + "/admin/reset")
    created = api.post("/api/v1/deployments", {"name": "public", "base_url": url + "/v1", "model": "m"}, format="json")
    assert created.status_code == 201, created.json()
    result = api.post(f"/api/v1/deployments/{created.json()['id']}/test").json()
    assert result["ok"] is False and "redirects are not followed" in result["error"]
    assert len(redirector.hits) == 1
    assert internal.hits == []  # the body was never re-sent inside


@pytest.mark.parametrize("allow_private", [False, True], ids=["refused", "allowed-private"])
def test_errors_never_echo_a_body_from_an_internal_target(api, project, serve, settings, allow_private):
    internal, url = serve("127.0.0.2")
    deployment = Deployment.objects.create(project=project, name="inside", base_url=url + "/v1", model="m")
    settings.EVAL_ALLOW_PRIVATE_URLS = allow_private
    settings.EVAL_MAX_ATTEMPTS = 1
    result = api.post(f"/api/v1/deployments/{deployment.pk}/test").json()
    assert result["ok"] is False and INTERNAL_SECRET not in str(result)
    if allow_private:  # reached (development, or an operator-allowed network), its answer withheld
        assert len(internal.hits) == 1 and "HTTP 500 (from a private address; body not shown)" in result["error"]
    else:
        assert internal.hits == []


@pytest.mark.parametrize(
    "url", ["http://100.64.0.1/v1", "http://192.0.0.1/v1", "http://198.18.0.1/v1", "http://[::1]:8080/v1", "http://0.0.0.0/v1", "http://[::ffff:127.0.0.1]/v1"]
)
def test_every_special_purpose_range_is_refused_on_save(api, settings, url):
    settings.EVAL_ALLOW_PRIVATE_URLS = False
    response = api.post("/api/v1/deployments", {"name": "x", "base_url": url, "model": "m"}, format="json")
    assert response.status_code == 400 and "private" in str(response.json()["base_url"]), url


@pytest.mark.django_db(transaction=True)
def test_the_llm_judge_is_checked_when_connecting_too(project, owner, serve, production_policy):
    from evals.datasets.versions import create_dataset

    internal, internal_url = serve("127.0.0.2")
    with FakeOpenAI(answer=lambda text: "Paris") as fake:
        model = Deployment.objects.create(project=project, name="model", base_url=fake.url, model="m")
        judge = Deployment.objects.create(project=project, name="judge", base_url=internal_url + "/v1", model="j")
        dataset = create_dataset(project, owner, "d", b'{"input": "Capital of France?", "expected": "Paris"}\n')
        # Asked once before anything is created: a judge the policy refuses refuses the eval, never a zero per row.
        with pytest.raises(EvalConfigError, match="The judge deployment judge cannot be reached: Refused"):
            create_eval(project, owner, deployment=model, dataset=dataset, scorers=[{"name": "llm_judge", "deployment": judge.pk}])
        assert not Eval.objects.exists()
        # Refused while scoring (the judge became unreachable after creation): the row is an error to retry, not a 0.
        ev = Eval.objects.create(
            project=project, deployment=model, dataset=dataset, scorers=[{"name": "llm_judge", "deployment": judge.pk}], judge=judge, seed=1
        )
        run_eval(ev.pk)
    sample = Sample.objects.get(eval=ev)
    assert sample.score is None and "The judge (judge) could not be asked: Refused" in sample.error
    assert internal.hits == []


def test_a_deployment_moved_to_another_origin_loses_its_key_unless_one_comes_with_the_move(api, project, loopback_deployments, member_api):
    """A member moving a keyed deployment to a host of theirs, then pressing Test, must not receive the stored key."""
    with FakeOpenAI(answer=lambda text: "ok") as first, FakeOpenAI(answer=lambda text: "ok") as theirs:
        deployment = Deployment.objects.create(project=project, name="keyed", base_url=first.url, model="m", api_key="sk-stored-secret")
        assert member_api.patch(f"/api/v1/deployments/{deployment.pk}", {"base_url": f"{first.url}/beta"}, format="json").status_code == 200
        deployment.refresh_from_db()
        assert deployment.api_key == "sk-stored-secret"  # the same origin: kept
        moved = member_api.patch(f"/api/v1/deployments/{deployment.pk}", {"base_url": theirs.url}, format="json")
        assert moved.status_code == 200 and moved.json()["api_key_masked"] == ""
        member_api.post(f"/api/v1/deployments/{deployment.pk}/test")
        assert theirs.requests and all("sk-stored-secret" not in (r["auth"] or "") for r in theirs.requests)
        rekeyed = api.patch(f"/api/v1/deployments/{deployment.pk}", {"base_url": first.url, "api_key": "sk-new"}, format="json")
        assert rekeyed.status_code == 200 and Deployment.objects.get(pk=deployment.pk).api_key == "sk-new"
