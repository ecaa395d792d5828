"""The shipped drivers served as read-only git repos, and the presets that point at them."""

import importlib
import subprocess

import pytest
from django.apps import apps
from django.core.exceptions import ValidationError

from harnesses import drivers, repo
from harnesses.models import Preset
from harnesses.validation import validate_repo_url

pytestmark = pytest.mark.django_db(transaction=True)

DRIVERS = ["aider-polyglot", "gaia", "lm-eval", "local-model", "mt-bench", "openclaw", "reference-agent", "swe-bench-lite", "tau-bench", "terminal-bench"]


@pytest.fixture
def served(settings, live_server):
    settings.BELVEDIR_BASE_URL = live_server.url
    settings.PRESET_REPO_ORG = ""
    # Transactional tests flush the catalog the data migrations seeded: seed it again, the same way.
    importlib.import_module("harnesses.migrations.0006_presets_use_shipped_drivers").seed(apps, None)
    importlib.import_module("harnesses.migrations.0012_local_model").seed(apps, None)
    return live_server.url


def git(*args, cwd=None):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60, env={"GIT_TERMINAL_PROMPT": "0", "PATH": "/usr/bin:/bin"})


def test_it_ships_one_driver_per_preset():
    assert drivers.names() == DRIVERS


def test_every_preset_answers_ls_remote_and_its_clone_holds_the_driver(served, tmp_path):
    presets = list(Preset.objects.all())
    assert len(presets) == 10 and presets[-1].name == "Local model + adapter (CPU)"
    for preset in presets:
        url = preset.resolved_repo_url
        assert url.startswith(f"{served}/drivers/") and url.endswith(".git")
        listed = git("ls-remote", url)
        assert listed.returncode == 0, listed.stderr
        sha = listed.stdout.split()[0]
        assert "refs/heads/main" in listed.stdout and "HEAD" in listed.stdout
        # The worker's own clone (harnesses/repo.py) takes it, at the default branch.
        dest = tmp_path / preset.slug
        assert repo.clone(url, "", str(dest), timeout=60) == sha
        name = url.rsplit("/", 1)[1].removesuffix(".git")
        assert (dest / "README.md").read_text() == (drivers.SOURCE / name / "README.md").read_text()
        assert (dest / "belvedir_driver.py").is_file(), "the shared helpers travel with every driver"
        assert not list(dest.rglob("__pycache__"))


def test_the_same_files_always_make_the_same_commit(served, tmp_path, settings):
    first = drivers.ensure_repo("reference-agent")
    # Another process (or a rebuild after a deploy) starts from an empty folder.
    settings.VAR_DIR = tmp_path
    assert drivers.ensure_repo("reference-agent") == first
    assert (tmp_path / "driver-repos" / "reference-agent.git").is_dir()
    assert git("clone", "-q", f"{served}/drivers/reference-agent.git", str(tmp_path / "c")).returncode == 0
    assert git("rev-parse", "HEAD", cwd=tmp_path / "c").stdout.strip() == first


def test_a_pinned_commit_clones(served, tmp_path):
    sha = drivers.ensure_repo("openclaw")
    assert repo.clone(f"{served}/drivers/openclaw.git", sha, str(tmp_path / "c"), timeout=60) == sha


def test_pushing_is_refused(served, tmp_path):
    work = tmp_path / "work"
    assert git("clone", "-q", f"{served}/drivers/gaia.git", str(work)).returncode == 0
    (work / "evil.txt").write_text("pwned")
    git("-c", "user.email=x@example.com", "-c", "user.name=x", "add", ".", cwd=work)
    git("-c", "user.email=x@example.com", "-c", "user.name=x", "commit", "-qm", "evil", cwd=work)
    pushed = git("push", "origin", "HEAD:main", cwd=work)
    assert pushed.returncode != 0 and "403" in pushed.stderr
    assert git("ls-remote", f"{served}/drivers/gaia.git", "main").stdout.split()[0] == drivers.ensure_repo("gaia")


def test_only_the_fetch_protocol_is_answered(served, client):
    assert client.get("/drivers/gaia.git/info/refs?service=git-receive-pack").status_code == 403
    assert client.post("/drivers/gaia.git/git-receive-pack", b"", content_type="application/x-git-receive-pack-request").status_code == 403
    assert client.get("/drivers/gaia.git/info/refs").status_code == 403  # dumb HTTP is not served
    assert client.get("/drivers/gaia.git/HEAD").status_code == 404
    assert client.get("/drivers/_shared.git/info/refs?service=git-upload-pack").status_code == 404
    assert client.get("/drivers/nope.git/info/refs?service=git-upload-pack").status_code == 404
    refs = client.get("/drivers/gaia.git/info/refs?service=git-upload-pack")
    assert refs.status_code == 200 and refs["Content-Type"] == "application/x-git-upload-pack-advertisement"
    assert b"refs/heads/main" in b"".join(refs.streaming_content)


def test_the_platforms_own_driver_urls_pass_validation(served, settings):
    settings.HARNESS_ALLOW_LOCAL_REPOS = False
    validate_repo_url(f"{served}/drivers/reference-agent.git")  # plain http on 127.0.0.1, but ours
    for url in (f"{served}/drivers/nope.git", f"{served}/other/reference-agent.git", "http://127.0.0.1:9/drivers/gaia.git"):
        with pytest.raises(ValidationError):
            validate_repo_url(url)


def test_a_hosted_organisation_still_switches_the_presets(served, settings):
    settings.PRESET_REPO_ORG = "acme"
    assert Preset.objects.get(slug="gaia").resolved_repo_url == "https://github.com/acme/gaia.git"


def test_a_harness_on_a_shipped_driver_is_accepted_by_the_api(served, settings, api):
    settings.HARNESS_ALLOW_LOCAL_REPOS = False
    url = f"{served}/drivers/reference-agent.git"
    created = api.post(
        "/api/v1/harnesses", {"name": "ref", "repo_url": url, "install_command": "true", "run_command": "python3 agent.py", "tasks": "say hi"}, format="json"
    )
    assert created.status_code == 201, created.json()
    refused = api.post("/api/v1/harnesses", {"name": "x", "repo_url": f"{served}/admin/", "install_command": "true", "run_command": "true"}, format="json")
    assert refused.status_code == 400 and "repo_url" in refused.json()


def test_backends_are_bounded_and_every_one_gives_its_slot_back(served, client, monkeypatch):
    url = f"{served}/drivers/gaia.git"
    for _ in range(drivers.MAX_BACKENDS * 2):  # more fetches than slots: each returns its own
        assert git("ls-remote", url).returncode == 0
    monkeypatch.setattr(drivers, "BUSY_WAIT_SECONDS", 0.1)
    for _ in range(drivers.MAX_BACKENDS):
        drivers._backends.acquire()
    try:
        busy = client.get("/drivers/gaia.git/info/refs?service=git-upload-pack")
        assert busy.status_code == 503 and busy["Retry-After"] == "5"
    finally:
        for _ in range(drivers.MAX_BACKENDS):
            drivers._backends.release()
    assert git("ls-remote", url).returncode == 0
