import pytest
from django.contrib import admin

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
    response = staff_client.post(
        "/admin/core/apikey/add/",
        {"project": project.pk, "user": owner.pk, "name": "from admin", "scope": "full"},
        follow=True,
    )
    assert b"bv_live_" in response.content


def test_secrets_never_show_in_admin(staff_client, project):
    from evals.models import Deployment
    from harnesses.models import Harness, HarnessEnvVar

    deployment = Deployment.objects.create(project=project, name="d", base_url="https://x.example/v1", model="m", api_key="sk-admin-hidden-123")
    harness = Harness.objects.create(project=project, name="h", repo_url="https://x.org/a/b", install_command="true", run_command="true")
    HarnessEnvVar.objects.create(harness=harness, name="TOKEN", value="env-admin-hidden-456", secret=True)
    assert b"sk-admin-hidden-123" not in staff_client.get(f"/admin/evals/deployment/{deployment.pk}/change/").content
    assert b"env-admin-hidden-456" not in staff_client.get(f"/admin/harnesses/harness/{harness.pk}/change/").content


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

    keep = {"id": str(secret.pk), "harness": str(harness.pk), "name": "TOKEN", "value": FormSet(instance=harness, prefix="env").forms[0].initial["value"], "secret": "on"}
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
