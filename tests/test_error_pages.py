"""Every error answers a page of the product: the navigation, what went wrong in words, and a next step. An object of
another of your projects offers to switch to it; one of a project you are not in is not found, naming nothing."""

import pytest
from django.test import Client
from django.utils import timezone
from django.utils.html import escape

from belvedir.core.error_views import server_error
from evals.models import Deployment, Eval
from traces.models import TraceSession

pytestmark = pytest.mark.django_db

NAV = '<a class="brand" href="/">Belvedir</a>'


def eval_in(project, owner) -> Eval:
    deployment = Deployment.objects.create(project=project, name="d", base_url="http://127.0.0.1:9/v1", model="m")
    return Eval.objects.create(project=project, deployment=deployment, benchmark="gsm8k", seed=1, created_by=owner)


def test_a_missing_object_answers_the_products_404_with_the_navigation_and_a_way_back(owner_client, project):
    answer = owner_client.get("/evals/999999/")
    page = answer.content.decode()
    assert answer.status_code == 404 and answer["Content-Type"].startswith("text/html")
    assert NAV in page and "Nothing here" in page and "No eval matches that address in" in page
    assert f"Back to {escape(project.name)}" in page and 'href="/evals/"' in page  # the navigation, with a way back
    # An address that names no page at all: the same page, without the resolver's list of patterns.
    unknown = owner_client.get("/no-such-page/")
    assert unknown.status_code == 404 and NAV in unknown.content.decode() and "tried" not in unknown.content.decode()


def test_an_object_of_another_of_your_projects_offers_to_switch_to_it_and_opens_it(member_client, member, project):
    own = member.memberships.exclude(project=project).get().project  # their own, beside the owner's they work in
    ev = eval_in(own, member)
    answer = member_client.get(f"/evals/{ev.pk}/")
    page = answer.content.decode()
    assert answer.status_code == 404
    assert f"This eval belongs to your project {escape(own.name)}." in page and f"Switch to {escape(own.name)} and open it" in page
    assert f'name="project" value="{own.pk}"' in page and f'name="next" value="/evals/{ev.pk}/"' in page
    switched = member_client.post("/projects/switch/", {"project": own.pk, "next": f"/evals/{ev.pk}/"})
    assert (switched.status_code, switched["Location"]) == (302, f"/evals/{ev.pk}/")
    assert member_client.get(f"/evals/{ev.pk}/").status_code == 200


def test_switching_never_sends_a_person_off_the_site(member_client, member, project):
    own = member.memberships.exclude(project=project).get().project
    answer = member_client.post("/projects/switch/", {"project": own.pk, "next": "https://evil.example/steal"})
    assert (answer.status_code, answer["Location"]) == (302, "/")


def test_an_object_of_a_project_you_are_not_in_is_not_found_and_names_nothing(owner_client, outsider):
    theirs = outsider.memberships.get().project
    ev = eval_in(theirs, outsider)
    page = owner_client.get(f"/evals/{ev.pk}/").content.decode()
    assert "Nothing here" in page and escape(theirs.name) not in page and "Switch to" not in page


def test_a_diff_with_one_session_ticked_says_what_to_choose_on_a_page_of_the_product(owner_client, project):
    now = timezone.now()
    TraceSession.objects.create(project=project, session_id="only", first_span_at=now, last_span_at=now)
    answer = owner_client.get("/traces/diff/?s=only")
    page = answer.content.decode()
    assert answer.status_code == 400 and NAV in page
    assert "A diff needs two sessions; 1 was chosen. Tick two on the sessions list, then Compare." in page
    assert 'href="/traces/">Choose again</a>' in page
    assert "none were chosen" in owner_client.get("/traces/diff/").content.decode()


def test_a_form_without_its_security_token_is_refused_on_the_products_403(owner, project):
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    answer = client.post("/projects/switch/", {"project": project.pk})
    page = answer.content.decode()
    assert answer.status_code == 403 and NAV in page and "without the page&#x27;s security token" in page
    assert "reload the page and send it again" in page


def test_the_500_page_needs_no_database_and_keeps_the_navigation(rf, django_assert_num_queries):
    with django_assert_num_queries(0):
        answer = server_error(rf.get("/evals/"))
    page = answer.content.decode()
    assert answer.status_code == 500 and '<a href="/evals/">Evaluations</a>' in page
    assert "Something went wrong on our side" in page and "Back to the dashboard" in page


def test_a_view_that_raises_answers_the_500_page(owner, monkeypatch):
    from workspace import views

    def broken(project):
        raise RuntimeError("the overview broke")

    monkeypatch.setattr(views, "overview", broken)
    client = Client(raise_request_exception=False)
    client.force_login(owner)
    answer = client.get("/")
    assert answer.status_code == 500 and "Something went wrong on our side" in answer.content.decode()
