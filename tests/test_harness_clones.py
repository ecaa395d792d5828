"""Harness clones run on the worker: only https and ssh (and the platform's
own origin), only to addresses the egress policy allows, pinned to the
checked address, with nothing of the worker's credentials, size-capped.
A refused clone ends the run `launch_failed`, refunded, before any sandbox."""

import subprocess
import threading
from functools import partial
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest

from belvedir.core.models import ProjectSecret
from belvedir.sandbox import launch
from belvedir.sandbox.models import SandboxHost
from billing.models import Account, LedgerEntry
from harnesses import repo
from harnesses.actions import start_run
from harnesses.execution import execute_run

from .harness_fixtures import fund, harness, make_repo

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _worker(settings):
    settings.HARNESS_HEARTBEAT_SECONDS = 0.5
    settings.HARNESS_SANDBOX_NETWORK = "none"
    SandboxHost.objects.get_or_create(name="local", defaults={"url": settings.SANDBOX_DOCKER_URL, "capacity": 4})


@pytest.fixture
def sandboxes_started(monkeypatch):
    """Records every sandbox the worker starts (the real ones still start)."""
    started = []
    real_start = launch.start

    def start(backend, specs):
        started.extend(spec.name for spec in specs)
        return real_start(backend, specs)

    monkeypatch.setattr(launch, "start", start)
    return started


class Redirector(BaseHTTPRequestHandler):
    def do_GET(self):
        self.server.hits.append(self.path)
        self.send_response(301)
        self.send_header("Location", self.server.redirect_to + self.path)
        self.end_headers()

    def log_message(self, *args):
        pass


def serve(handler, address="127.0.0.1", **attrs):
    server = ThreadingHTTPServer((address, 0), handler)
    server.hits = []
    for name, value in attrs.items():
        setattr(server, name, value)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://{address}:{server.server_address[1]}"


@pytest.mark.parametrize(
    "url, reason",
    [
        ("https://127.0.0.1:{port}/org/repo.git", "127.0.0.1, a private or special-purpose address"),
        ("https://169.254.169.254/x", "169.254.169.254, a private or special-purpose address"),
        ("git@localhost:/etc", "localhost resolves to"),
        ("ssh://git@[::1]/etc", "::1, a private or special-purpose address"),
        ("http://example.com/org/repo.git", "Only https and ssh"),
        ("ext::sh -c touch% /tmp/pwned", "Only https and ssh"),
        ("/srv/local/repo", "Local paths"),
    ],
)
def test_a_refused_clone_is_refunded_at_launch_before_any_sandbox(owner, project, url, reason, sandboxes_started, settings):
    settings.HARNESS_ALLOW_LOCAL_REPOS = False
    fund(project, 1000)
    run = start_run(harness(project, owner, url.format(port=8443)), owner)
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "launch_failed", (run.status, run.status_message)
    assert reason in run.status_message
    assert LedgerEntry.objects.filter(kind="refund", reference=f"run:{run.pk}").exists()
    assert Account.balance_for(project) == 1000
    assert sandboxes_started == []


def test_a_server_that_redirects_to_loopback_is_not_followed(owner, project, settings, sandboxes_started):
    inside, inside_url = serve(Redirector, "127.0.0.2", redirect_to="")
    outside, outside_url = serve(Redirector, redirect_to=inside_url)
    try:
        # The redirector is the platform's own origin: the one http host clones may use.
        settings.BELVEDIR_BASE_URL = outside_url
        fund(project, 1000)
        run = start_run(harness(project, owner, f"{outside_url}/drivers/x.git"), owner)
        execute_run(run.pk)
        run.refresh_from_db()
    finally:
        inside.shutdown()
        outside.shutdown()
    assert run.status == "launch_failed" and "redirects are not followed" in run.status_message, run.status_message
    assert outside.hits and inside.hits == []
    assert Account.balance_for(project) == 1000 and sandboxes_started == []


def test_the_platform_origin_stays_cloneable(tmp_path, settings):
    source = tmp_path / "src"
    sha = make_repo(source, {"run.py": "print('driver')\n"})
    bare = tmp_path / "www" / "drivers" / "demo.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(source), str(bare)], check=True)
    subprocess.run(["git", "-C", str(bare), "update-server-info"], check=True)
    server, url = serve(partial(SimpleHTTPRequestHandler, directory=str(tmp_path / "www")))
    try:
        settings.BELVEDIR_BASE_URL = url
        assert repo.clone(f"{url}/drivers/demo.git", "", str(tmp_path / "checkout"), 60) == sha
    finally:
        server.shutdown()
    assert (tmp_path / "checkout" / "run.py").read_text() == "print('driver')\n"


def test_the_size_cap_stops_a_clone_while_it_grows(tmp_path, settings):
    import os

    settings.HARNESS_ALLOW_LOCAL_REPOS = True
    settings.HARNESS_CLONE_MAX_BYTES = 1024 * 1024
    source = tmp_path / "big"
    make_repo(source, {"README": "x"})
    (source / "blob.bin").write_bytes(os.urandom(3 * 1024 * 1024))  # incompressible
    subprocess.run(["git", "-c", "user.email=t@e", "-c", "user.name=t", "-C", str(source), "add", "."], check=True)
    subprocess.run(["git", "-c", "user.email=t@e", "-c", "user.name=t", "-C", str(source), "commit", "-qm", "big"], check=True)
    with pytest.raises(repo.RepoError, match="larger than the 1 MB clone limit"):
        repo.clone(f"file://{source}", "", str(tmp_path / "checkout"), 60)
    assert not (tmp_path / "checkout").exists()


def test_git_gets_nothing_of_the_workers_credentials(tmp_path, monkeypatch, settings):
    # A worker whose own HOME configures git to rewrite URLs and answer for
    # credentials, with an SSH agent: none of it may reach a harness clone.
    settings.HARNESS_ALLOW_LOCAL_REPOS = True
    worker_home = tmp_path / "worker-home"
    worker_home.mkdir()
    marker = tmp_path / "helper-ran"
    (worker_home / ".gitconfig").write_text(f'[credential]\n\thelper = "!touch {marker}; echo"\n[url "{tmp_path}/decoy"]\n\tinsteadOf = {tmp_path}/real\n')
    monkeypatch.setenv("HOME", str(worker_home))
    monkeypatch.setenv("SSH_AUTH_SOCK", str(tmp_path / "agent.sock"))
    make_repo(tmp_path / "real", {"which": "real\n"})
    make_repo(tmp_path / "decoy", {"which": "decoy\n"})
    repo.clone(str(tmp_path / "real"), "", str(tmp_path / "checkout"), 60)
    assert (tmp_path / "checkout" / "which").read_text() == "real\n"
    (tmp_path / "iso").mkdir()
    target = repo.Target("ssh", "github.com", 22, "140.82.112.3")
    env, config = repo._isolated(str(tmp_path / "iso"), target, repo.Credentials(ssh_key="KEY"))
    assert "SSH_AUTH_SOCK" not in env and env["HOME"] == str(tmp_path / "iso")
    assert "IdentityAgent=none" in env["GIT_SSH_COMMAND"] and "HostName=140.82.112.3" in env["GIT_SSH_COMMAND"]
    assert "credential.helper=" in config
    assert (tmp_path / "iso" / "deploy_key").stat().st_mode & 0o777 == 0o600
    assert not marker.exists()


def test_a_private_repo_uses_the_projects_token_secret(owner, project):
    ProjectSecret.objects.create(project=project, name=repo.TOKEN_SECRET, value="ghp_project_token")
    credentials = repo.Credentials.for_project(project)
    env, _ = repo._isolated("/tmp/x", repo.Target("https", "github.com", 443, "140.82.112.3"), credentials)
    assert env["GIT_CONFIG_KEY_0"] == "http.extraHeader" and env["GIT_CONFIG_VALUE_0"].startswith("Authorization: Basic ")
