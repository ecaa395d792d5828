import re

import pytest
from django.contrib import admin
from django.test import Client

from .pages import shown

pytestmark = pytest.mark.django_db


def test_every_model_admin_lists_searches_and_filters(staff_client, api_key):
    for model, model_admin in admin.site._registry.items():
        url = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        assert staff_client.get(url).status_code == 200, url
        if model_admin.search_fields:
            assert staff_client.get(url, {"q": "x"}).status_code == 200, url
        if model._meta.app_label not in {"auth", "django_q"}:
            assert model_admin.list_filter or model_admin.search_fields, f"{url} has neither filters nor search"


def test_non_staff_cannot_reach_admin(owner_client):
    response = owner_client.get("/admin/core/apikey/")
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


def test_admin_creates_a_key_and_shows_it_once(staff_client, owner, project):
    from belvedir.core.models import ApiKey, hash_key

    response = staff_client.post(
        "/admin/core/apikey/add/",
        {"project": project.pk, "user": owner.pk, "name": "from admin", "scope": "full"},
        follow=True,
    )
    raw = re.search(r"bv_live_[\w-]+", response.content.decode()).group(0)
    key = ApiKey.objects.get(name="from admin")
    assert key.key_hash == hash_key(raw)  # the key shown is the one that works
    assert Client(HTTP_AUTHORIZATION=f"Bearer {raw}").get("/api/v1/me").status_code == 200
    # Shown once: neither the list nor the key's own page has it again.
    for url in ["/admin/core/apikey/", f"/admin/core/apikey/{key.pk}/change/"]:
        page = staff_client.get(url).content.decode()
        assert key.prefix in page and raw not in page, url


def test_secrets_never_show_in_admin(staff_client, project):
    from evals.models import Deployment
    from harnesses.models import Harness, HarnessEnvVar

    deployment = Deployment.objects.create(project=project, name="d", base_url="https://x.example/v1", model="m", api_key="sk-admin-hidden-123")
    harness = Harness.objects.create(project=project, name="h", repo_url="https://x.org/a/b", install_command="true", run_command="true")
    HarnessEnvVar.objects.create(harness=harness, name="TOKEN", value="env-admin-hidden-456", secret=True)
    assert "sk-admin-hidden-123" not in shown(staff_client.get(f"/admin/evals/deployment/{deployment.pk}/change/"))
    harness_page = shown(staff_client.get(f"/admin/harnesses/harness/{harness.pk}/change/"))
    assert "TOKEN" in harness_page and "env-admin-hidden-456" not in harness_page


def test_admin_env_vars_follow_the_dashboard_rules(owner, project):
    from django.test import RequestFactory

    from harnesses.admin import EnvVarInline
    from harnesses.models import Harness, HarnessEnvVar

    owner.is_staff = owner.is_superuser = True
    harness = Harness.objects.create(project=project, name="h", repo_url="https://x.org/a/b", install_command="true", run_command="true")
    secret = HarnessEnvVar.objects.create(harness=harness, name="TOKEN", value="kept-secret", secret=True)
    request = RequestFactory().get("/admin/")
    request.user = owner
    FormSet = EnvVarInline(Harness, admin.site).get_formset(request, harness)

    def submit(*rows):
        data = {"env-TOTAL_FORMS": str(len(rows)), "env-INITIAL_FORMS": "1"}
        for i, row in enumerate(rows):
            data.update({f"env-{i}-{k}": v for k, v in row.items()})
        return FormSet(data, instance=harness, prefix="env")

    keep = {
        "id": str(secret.pk),
        "harness": str(harness.pk),
        "name": "TOKEN",
        "value": FormSet(instance=harness, prefix="env").forms[0].initial["value"],
        "secret": "on",
    }
    assert keep["value"] != "kept-secret"  # masked in the form
    bad_name = submit(keep, {"name": "1-not-a-name", "value": "x"})
    assert not bad_name.is_valid() and "name" in bad_name.forms[1].errors
    twice = submit(keep, {"name": "TOKEN", "value": "again"})
    assert not twice.is_valid() and "name" in str(twice.non_form_errors())
    fine = submit(keep, {"name": "MODE", "value": "fast"})
    assert fine.is_valid(), fine.errors
    fine.save()
    assert dict(HarnessEnvVar.objects.values_list("name", "value")) == {"TOKEN": "kept-secret", "MODE": "fast"}


def test_spans_are_found_by_trace_id_or_session_id_across_projects(staff_client, api, outsider_api):
    from traces.models import Span

    from .otlp_builders import body, new_id, span

    trace = new_id(32)
    for client, name in ((api, "mine"), (outsider_api, "theirs")):
        spans = [span(name, session_id="shared-session", trace_id=trace if name == "mine" else None), span(name + "-other", session_id="elsewhere")]
        assert client.generic("POST", "/api/v1/traces", body(spans), content_type="application/json").status_code == 200

    def found(term):
        response = staff_client.get("/admin/traces/span/", {"q": term})
        assert response.status_code == 200
        return sorted(span.name for span in response.context["cl"].result_list)

    assert found("shared-session") == ["mine", "theirs"]
    assert found(trace.upper()) == ["mine"]
    assert found("no-such-session") == []
    assert Span.objects.count() == 4


def staff_with(*perms):
    """A staff member holding exactly these permissions ('app.codename')."""
    from django.contrib.auth.models import Permission

    from belvedir.core.actions import create_account

    user = create_account(username=f"staff-{len(perms)}-{abs(hash(perms)) % 10**6}", password="pw-staffer-123")
    user.is_staff = True
    user.save()
    for perm in perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
    client = Client()
    client.force_login(user)
    return client


def run_action(client, model_url, action, pks, **extra):
    return client.post(model_url, {"action": action, "_selected_action": [str(pk) for pk in pks], "index": "0", **extra})


def test_grant_credit_needs_its_own_permission(project):
    from billing.models import Account

    account = Account.for_project(project)
    form = {"apply": "1", "amount": "1000", "memo": "free money"}
    viewer = staff_with("billing.view_account")
    assert viewer.get("/admin/billing/account/").status_code == 200
    run_action(viewer, "/admin/billing/account/", "grant_credit_action", [account.pk], **form)
    assert Account.balance_for(project) == 0
    granter = staff_with("billing.view_account", "billing.grant_credit")
    run_action(granter, "/admin/billing/account/", "grant_credit_action", [account.pk], **form)
    assert Account.balance_for(project) == 100_000


def test_refund_revoke_and_drain_need_their_permissions(owner, project, tmp_path):
    from belvedir.core.models import ApiKey
    from belvedir.sandbox.models import SandboxHost
    from billing import workloads
    from billing.models import Account, LedgerEntry
    from harnesses.actions import RUNS
    from harnesses.models import Run

    from .harness_fixtures import fund, harness

    fund(project, 500)
    run = Run.objects.create(project=project, harness=harness(project, owner, tmp_path), price_cents=50, created_by=owner, status="failed")
    workloads.charge(RUNS, run, run.price_cents, memo="run")
    key, _ = ApiKey.issue(project=project, user=owner, name="k")
    host = SandboxHost.objects.create(name="gpu-1", url="unix:///nowhere.sock")
    viewer = staff_with("harnesses.view_run", "core.view_apikey", "sandbox.view_sandboxhost", "sandbox.change_sandboxhost")

    run_action(viewer, "/admin/harnesses/run/", "refund_runs", [run.pk])
    run_action(viewer, "/admin/core/apikey/", "revoke", [key.pk])
    run_action(viewer, "/admin/sandbox/sandboxhost/", "drain", [host.pk])
    # Nor through the change form: draining is read-only without its permission.
    viewer.post(
        f"/admin/sandbox/sandboxhost/{host.pk}/change/",
        {
            "name": "gpu-1",
            "kind": host.kind,
            "url": host.url,
            "capacity": host.capacity,
            "gpu_count": host.gpu_count,
            "enabled": "on",
            "draining": "on",
        },
    )
    key.refresh_from_db()
    host.refresh_from_db()
    assert not LedgerEntry.objects.filter(kind="refund").exists()
    assert key.revoked_at is None
    assert host.draining is False

    allowed = staff_with(
        "harnesses.view_run", "harnesses.refund_run", "core.view_apikey", "core.revoke_apikey", "sandbox.view_sandboxhost", "sandbox.drain_sandboxhost"
    )
    run_action(allowed, "/admin/harnesses/run/", "refund_runs", [run.pk])
    run_action(allowed, "/admin/core/apikey/", "revoke", [key.pk])
    run_action(allowed, "/admin/sandbox/sandboxhost/", "drain", [host.pk])
    key.refresh_from_db()
    host.refresh_from_db()
    assert Account.balance_for(project) == 500
    assert key.revoked_at is not None
    assert host.draining is True


def test_a_runs_secret_env_never_renders_in_admin(staff_client, owner, project, tmp_path):
    from harnesses.models import Run

    from .harness_fixtures import harness

    run = Run.objects.create(
        project=project,
        harness=harness(project, owner, tmp_path),
        price_cents=50,
        created_by=owner,
        secret_env={"HF_TOKEN": "hf_admin_hidden_789", "ADAPTER_URL": "https://x/adapter?sig=signed-admin-hidden"},
    )
    for url in (f"/admin/harnesses/run/{run.pk}/change/", "/admin/harnesses/run/", f"/admin/harnesses/run/?q={run.pk}"):
        response = staff_client.get(url)
        assert response.status_code == 200, url
        assert b"hf_admin_hidden_789" not in response.content and b"signed-admin-hidden" not in response.content, url


def test_admin_deletes_a_project_the_way_the_dashboard_does(staff_client, api, owner, project, tmp_path):
    from belvedir.core.models import Project
    from harnesses.models import Run
    from traces.models import Span

    from .harness_fixtures import harness
    from .otlp_builders import body, span

    assert (
        api.generic("POST", "/api/v1/traces", body([span("kept until the project goes", session_id="s")]), content_type="application/json").status_code == 200
    )
    run = Run.objects.create(project=project, harness=harness(project, owner, tmp_path), price_cents=50, created_by=owner, status="running")
    url = f"/admin/core/project/{project.pk}/delete/"
    response = staff_client.post(url, {"post": "yes"})
    assert response.status_code == 403 and Project.objects.filter(pk=project.pk).exists()

    Run.objects.filter(pk=run.pk).update(status="succeeded")
    assert staff_client.post(url, {"post": "yes"}).status_code == 302
    # Spans have no foreign key in the database: deleting the project took them.
    assert not Project.objects.filter(pk=project.pk).exists() and not Span.objects.filter(project_id=project.pk).exists()
