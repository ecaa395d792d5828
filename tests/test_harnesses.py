"""Harnesses, presets, starting runs: pages, API, validation (no Docker needed)."""

import pytest
from django.core.exceptions import ValidationError
from django_q.models import OrmQ

from billing.models import Account, LedgerEntry
from harnesses.models import Harness, HarnessEnvVar, Preset, Run
from harnesses.results import errors_problem, parse_results
from harnesses.validation import validate_repo_url

from .harness_fixtures import fund
from .pages import shown

pytestmark = pytest.mark.django_db

PRESET_NAMES = [
    "SWE-bench Lite",
    "tau-bench",
    "Terminal-Bench 0.2 (harness)",
    "GAIA",
    "Aider Polyglot",
    "lm-eval (vLLM)",
    "MT-Bench (vLLM)",
    "OpenClaw",
    "Tasks (reference agent)",
    "Local model + adapter (CPU)",
]


@pytest.fixture
def a_harness(project, owner):
    h = Harness.objects.create(
        project=project, created_by=owner, name="mine", repo_url="https://example.com/org/repo.git", install_command="true", run_command="true"
    )
    HarnessEnvVar.objects.create(harness=h, name="API_TOKEN", value="super-secret-value", secret=True)
    HarnessEnvVar.objects.create(harness=h, name="MODE", value="fast")
    return h


def form_data(**overrides):
    data = {
        "name": "h",
        "repo_url": "https://github.com/org/repo.git",
        "ref": "",
        "install_command": "pip install .",
        "run_command": "python run.py",
        "compute_type": "cpu",
        "gpu_type": "A10G",
        "tasks": "",
        "time_limit_minutes": "30",
        "preset": "",
        "env-TOTAL_FORMS": "1",
        "env-INITIAL_FORMS": "0",
        "env-0-name": "",
        "env-0-value": "",
        "env-0-secret": "",
    }
    data.update(overrides)
    return data


def test_the_catalog_is_seeded_with_the_presets(api, settings):
    settings.BELVEDIR_BASE_URL = "https://belvedir.example.com"
    assert list(Preset.objects.values_list("name", flat=True)) == PRESET_NAMES
    presets = {p["slug"]: p for p in api.get("/api/v1/presets").json()}
    assert presets["openclaw"]["needs_tasks"] is True
    assert presets["lm-eval"]["compute_type"] == "gpu"
    assert presets["reference-agent"]["needs_tasks"] is True
    assert presets["local-model"]["local_model"] is True and presets["local-model"]["compute_type"] == "cpu"
    assert presets["swe-bench-lite"]["env_var_names"] == ["LLM_MODEL", "LLM_API_KEY", "SWEBENCH_API_KEY"]
    # By default the presets clone the drivers this platform serves.
    assert presets["swe-bench-lite"]["repo_url"] == "https://belvedir.example.com/drivers/swe-bench-lite.git"


def test_preset_org_is_configurable(api, settings):
    settings.PRESET_REPO_ORG = "acme"
    assert api.get("/api/v1/presets/gaia").json()["repo_url"] == "https://github.com/acme/gaia.git"


def test_new_harness_page_shows_cards_and_prefills_from_a_preset(owner_client, settings):
    settings.BELVEDIR_BASE_URL = "http://127.0.0.1:8000"
    page = owner_client.get("/harnesses/new/").content.decode()
    for name in PRESET_NAMES:
        assert name in page
    assert 'href="?preset=openclaw"' in page and 'hx-get="?preset=openclaw"' in page
    partial = owner_client.get("/harnesses/new/?preset=swe-bench-lite", HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in partial
    assert "http://127.0.0.1:8000/drivers/swe-bench-lite.git" in partial
    assert 'value="SWEBENCH_API_KEY"' in partial
    assert "$0.50" in owner_client.get("/settings/balance/").content.decode()


def test_creating_a_harness_from_the_form(owner_client, project):
    data = form_data(**{"env-0-name": "HF_TOKEN", "env-0-value": "hf_secret_123", "env-0-secret": "on"})
    response = owner_client.post("/harnesses/new/", data)
    harness = Harness.objects.get(project=project)
    assert response.status_code == 302 and response["Location"] == f"/harnesses/{harness.pk}/"
    assert harness.time_limit_seconds == 1800
    assert harness.env_vars.get().value == "hf_secret_123"
    page = shown(owner_client.get(f"/harnesses/{harness.pk}/"))
    assert "HF_TOKEN=********" in page and "hf_secret_123" not in page
    edit = shown(owner_client.get(f"/harnesses/{harness.pk}/edit/"))
    assert "HF_TOKEN" in edit and "hf_secret_123" not in edit


@pytest.mark.parametrize(
    "overrides, field, message",
    [
        ({"repo_url": "not a url"}, "repo_url", "https or ssh git URL"),
        ({"repo_url": "http://github.com/org/repo"}, "repo_url", "Use https://"),
        ({"repo_url": "file:///etc"}, "repo_url", "disabled on this server"),
        ({"repo_url": "/srv/repo"}, "repo_url", "disabled on this server"),
        ({"install_command": "   "}, "install_command", "required"),
        ({"run_command": ""}, "run_command", "required"),
        ({"env-0-name": "1BAD", "env-0-value": "x"}, "name", "not a valid variable name"),
        ({"env-0-name": "FRACTAL_API_KEY", "env-0-value": "x"}, "name", "set by the platform"),
        ({"time_limit_minutes": "61"}, "time_limit_minutes", "less than or equal to 60"),
        ({"ref": "--upload-pack=evil"}, "ref", "Not a valid branch"),
        ({"egress_domains": "api.anthropic.com\nhttp://evil/"}, "egress_domains", "is not a domain name"),
        ({"env-0-name": "HTTPS_PROXY", "env-0-value": "http://elsewhere"}, "name", "set by the platform"),
    ],
)
def test_the_form_shows_errors_beside_fields_and_creates_nothing(owner_client, overrides, field, message):
    response = owner_client.post("/harnesses/new/", form_data(**overrides))
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not Harness.objects.exists()


def test_a_preset_that_needs_tasks_requires_them(owner_client):
    preset = Preset.objects.get(slug="openclaw")
    response = owner_client.post("/harnesses/new/", form_data(preset=str(preset.pk)))
    assert "brings no task suite" in response.content.decode()
    assert not Harness.objects.exists()


def test_local_repos_only_when_the_development_setting_allows(settings):
    with pytest.raises(ValidationError):
        validate_repo_url("file:///srv/repo")
    settings.HARNESS_ALLOW_LOCAL_REPOS = True
    validate_repo_url("file:///srv/repo")
    validate_repo_url("git@github.com:org/repo.git")
    validate_repo_url("ssh://git@github.com/org/repo.git")


def test_api_creates_harnesses_and_masks_secrets(api, project):
    payload = {
        "name": "api harness",
        "repo_url": "https://github.com/org/repo.git",
        "install_command": "true",
        "run_command": "true",
        "env_vars": [{"name": "TOKEN", "value": "tok-123", "secret": True}, {"name": "MODE", "value": "x"}],
    }
    created = api.post("/api/v1/harnesses", payload, format="json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert {"name": "TOKEN", "value": "********", "secret": True} in body["env_vars"]
    assert "tok-123" not in created.content.decode()
    harness_id = body["id"]
    # Sending the mask back keeps the stored secret.
    patched = api.patch(f"/api/v1/harnesses/{harness_id}", {"env_vars": [{"name": "TOKEN", "value": "********", "secret": True}]}, format="json")
    assert patched.status_code == 200
    assert HarnessEnvVar.objects.get(name="TOKEN").value == "tok-123"
    assert api.get(f"/api/v1/harnesses/{harness_id}").json()["name"] == "api harness"
    assert api.delete(f"/api/v1/harnesses/{harness_id}").status_code == 204


def test_the_api_takes_an_egress_allowlist(api):
    payload = {"name": "x", "repo_url": "https://github.com/o/r.git", "install_command": "true", "run_command": "true"}
    bad = api.post("/api/v1/harnesses", {**payload, "egress_domains": "not a domain"}, format="json")
    assert bad.status_code == 400 and "egress_domains" in bad.json()
    good = api.post("/api/v1/harnesses", {**payload, "egress_domains": "api.anthropic.com\nAPI.OpenAI.com."}, format="json")
    assert good.status_code == 201
    assert Harness.objects.get(pk=good.json()["id"]).egress_domain_list() == ["api.anthropic.com", "api.openai.com"]


def test_api_validation_errors_name_the_field(api):
    response = api.post(
        "/api/v1/harnesses", {"name": "x", "repo_url": "ftp://x", "install_command": " ", "run_command": "true", "preset": "openclaw"}, format="json"
    )
    assert response.status_code == 400
    errors = response.json()
    assert "repo_url" in errors and "install_command" in errors


def test_starting_a_run_charges_and_queues_it(a_harness, project, api, django_capture_on_commit_callbacks):
    fund(project, 100)
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(f"/api/v1/harnesses/{a_harness.pk}/runs")
    assert response.status_code == 201
    run = Run.objects.get()
    assert response.json()["status"] == "queued" and run.price_cents == 50
    assert LedgerEntry.objects.get(kind="run_charge").reference == f"run:{run.pk}"
    assert Account.balance_for(project) == 50
    assert OrmQ.objects.count() == 1  # enqueued after commit


def test_insufficient_balance_is_402_and_queues_nothing(a_harness, project, api, owner_client, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(f"/api/v1/harnesses/{a_harness.pk}/runs")
    assert response.status_code == 402
    assert response.json()["price_cents"] == 50 and "Insufficient balance" in response.json()["detail"]
    assert set(response.json()) == {"detail", "balance_cents", "price_cents"}  # the body the CLI reads
    page = owner_client.post(f"/harnesses/{a_harness.pk}/runs/")
    assert page.status_code == 402 and "Insufficient balance" in page.content.decode()
    assert not Run.objects.exists() and OrmQ.objects.count() == 0


def test_gpu_harness_costs_the_gpu_price(a_harness, project, api):
    from belvedir.sandbox.models import SandboxHost

    SandboxHost.objects.create(name="gpu", url="unix:///g.sock", kind="gpu", gpu_type="A10G", gpu_count=1)
    a_harness.compute_type = "gpu"
    a_harness.save()
    fund(project, 500)
    assert api.post(f"/api/v1/harnesses/{a_harness.pk}/runs").json()["price_cents"] == 500
    assert Account.balance_for(project) == 0


def test_deleting_a_harness_with_an_active_run_is_refused(a_harness, project, api):
    fund(project, 100)
    api.post(f"/api/v1/harnesses/{a_harness.pk}/runs")
    assert api.delete(f"/api/v1/harnesses/{a_harness.pk}").status_code == 409


def test_cancelling_a_queued_run_refunds_it(a_harness, project, api):
    fund(project, 100)
    run_id = api.post(f"/api/v1/harnesses/{a_harness.pk}/runs").json()["id"]
    assert api.post(f"/api/v1/runs/{run_id}/cancel").json()["status"] == "cancelled"
    assert Account.balance_for(project) == 100  # cancelled before it started: nothing ran, refunded


@pytest.mark.parametrize(
    "raw, score, model, error",
    [
        (b'{"score": 0.5, "model": "m"}', 0.5, "m", ""),
        (b'{"score": 3}', 3.0, "", ""),
        (b'{"score": true}', None, "", "finite number"),
        (b'{"score": NaN}', None, "", "not valid JSON"),
        (b'{"model": "m"}', None, "m", "no top-level"),
        (b"\xff\xfe", None, "", "not UTF-8"),
        (b'"just a string"', None, "", "JSON object"),
    ],
)
def test_results_parsing(raw, score, model, error):
    parsed = parse_results(raw)
    assert (parsed.score, parsed.model) == (score, model)
    assert error in parsed.error if error else parsed.error == ""


@pytest.mark.parametrize(
    ("counts", "fails"),
    [
        ({"errors": 3, "total": 3}, "3 errors of its 3 tasks (none may)"),
        ({"errors": 2, "total": 12}, "2 errors of its 12 tasks (at most 10% may"),
        ({"errors": 1, "total": 12}, ""),  # 8%: within the share
        ({"errors": 0, "total": 0}, ""),
        ({"errors": 1, "total": 0}, "1 errors of its 0 tasks (none may)"),
        ({"errors": 3}, ""),  # no total: nothing to weigh them against
        ({"errors": True, "total": 1}, ""),  # not counts
        ({"errors": "3", "total": 3}, ""),
        ({"errors": -1, "total": 3}, ""),
    ],
)
def test_a_runs_own_count_of_errors_past_the_share_fails_it(settings, counts, fails):
    settings.MAX_ERROR_FRACTION = 0.1
    said = errors_problem({"score": 0.5, **counts})
    assert fails in said if fails else said == ""


def test_unticking_secret_with_the_mask_keeps_the_stored_value(api, owner_client, project):
    payload = {
        "name": "h",
        "repo_url": "https://github.com/org/repo.git",
        "install_command": "true",
        "run_command": "true",
        "env_vars": [{"name": "TOKEN", "value": "tok-123", "secret": True}],
    }
    harness_id = api.post("/api/v1/harnesses", payload, format="json").json()["id"]
    unticked = api.patch(f"/api/v1/harnesses/{harness_id}", {"env_vars": [{"name": "TOKEN", "value": "********", "secret": False}]}, format="json")
    assert unticked.status_code == 200, unticked.json()
    assert HarnessEnvVar.objects.get(name="TOKEN").value == "tok-123"
    # The mask is never a value of its own: not for a new name either.
    invented = api.patch(f"/api/v1/harnesses/{harness_id}", {"env_vars": [{"name": "OTHER", "value": "********", "secret": False}]}, format="json")
    assert invented.status_code == 400 and "mask" in invented.content.decode()
    assert HarnessEnvVar.objects.get(name="TOKEN").value == "tok-123"


def test_unticking_secret_in_the_form_keeps_the_stored_value(project):
    from harnesses.forms import EnvVarForm

    harness = Harness.objects.create(project=project, name="h", repo_url="https://x.org/a/b", install_command="true", run_command="true")
    stored = HarnessEnvVar.objects.create(harness=harness, name="TOKEN", value="kept-secret", secret=True)
    form = EnvVarForm({"name": "TOKEN", "value": "********"}, instance=stored)  # the box un-ticked
    assert form.is_valid(), form.errors
    form.save()
    stored.refresh_from_db()
    assert (stored.value, stored.secret) == ("kept-secret", False)
    assert not EnvVarForm({"name": "NEW", "value": "********"}).is_valid()


def test_the_run_page_lists_results_tasks_and_shrugs_off_odd_ones(owner_client, a_harness):
    tasks = [
        {"task": "fix the bug", "check": "pytest -q", "verdict": "solved", "steps": 4, "reason": "check passed"},
        {"task": "<script>alert(1)</script>", "verdict": 'failed" onmouseover="x', "steps": "many"},
        "not an object",
        {"id": "django__django-11099", "verdict": "failed", "reason": "x" * 1000},
    ]
    run = Run.objects.create(
        project=a_harness.project,
        harness=a_harness,
        compute_type="cpu",
        price_cents=50,
        status="succeeded",
        score=0.25,
        results={"score": 0.25, "tasks": tasks},
    )
    page = owner_client.get(f"/runs/{run.pk}/").content.decode()
    page = page[page.index('id="tasks"') :].split("</section>")[0]  # the table, not the raw results.json
    assert page.count('<span class="verdict') == 3
    assert 'class="verdict solved">solved</span>' in page and '<code class="muted">pytest -q</code>' in page
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;" in page
    assert 'onmouseover="x' not in page
    assert "django__django-11099" in page and "x" * 301 not in page
    assert [r["steps"] for r in run.task_results] == [4, None, None]
    Run.objects.filter(pk=run.pk).update(results={"score": 1, "tasks": "all of them"})
    assert 'id="tasks"' not in owner_client.get(f"/runs/{run.pk}/").content.decode()


def test_the_edit_page_saves_through_the_same_rule_as_the_api(owner_client, project):
    # save_harness behind both: the mask keeps a stored secret (un-ticked too), and a mask for a new name saves nothing.
    harness = Harness.objects.create(project=project, name="h", repo_url="https://x.org/a/b", install_command="true", run_command="true")
    stored = HarnessEnvVar.objects.create(harness=harness, name="TOKEN", value="kept-secret", secret=True)
    rows = {
        "env-TOTAL_FORMS": "2",
        "env-INITIAL_FORMS": "1",
        "env-0-id": str(stored.pk),
        "env-0-name": "TOKEN",
        "env-0-value": "********",
        "env-0-secret": "",
        "env-1-name": "MODE",
        "env-1-value": "fast",
        "env-1-secret": "",
    }
    saved = owner_client.post(f"/harnesses/{harness.pk}/edit/", form_data(name="renamed", **rows))
    assert saved.status_code == 302
    assert dict(harness.env_vars.values_list("name", "value")) == {"TOKEN": "kept-secret", "MODE": "fast"}
    assert not harness.env_vars.get(name="TOKEN").secret
    refused = owner_client.post(f"/harnesses/{harness.pk}/edit/", form_data(name="again", **{**rows, "env-1-value": "********"}))
    assert refused.status_code == 200 and "mask of a stored secret" in refused.content.decode()
    harness.refresh_from_db()
    assert harness.name == "renamed" and harness.env_vars.get(name="MODE").value == "fast"


def test_a_mask_with_nothing_stored_is_refused_and_anything_else_passes_through():
    from belvedir.core.masks import MaskWithoutSecret, unmasked

    assert unmasked("********", "stored") == "stored"
    assert unmasked(" ******** ", "stored") == "stored"
    assert unmasked("new-value", "stored") == "new-value"
    with pytest.raises(MaskWithoutSecret, match="TOKEN: "):
        unmasked("********", None, "TOKEN")
