"""The navigation reaches every area and the pages within it, marks where you are, and folds into a menu on a phone:
no page is reachable only from a sentence of links."""

import re

import pytest

from belvedir.core.navigation import AREAS

pytestmark = pytest.mark.django_db


def marked(page: str, nav: str) -> list[str]:
    """The labels of the links marked current in the navigation named `nav` ("main-nav" or a subnav's label)."""
    block = re.search(rf'<nav (?:id="{nav}"|class="subnav" aria-label="{nav}")[^>]*>(.*?)</nav>', page, re.S)
    return re.findall(r'aria-current="(?:true|page)">([^<]+)</a>', block.group(1)) if block else []


def every_page():
    for area in AREAS:
        yield area, None
        for child in area.children:
            yield area, child


@pytest.mark.parametrize(("area", "child"), list(every_page()), ids=lambda link: getattr(link, "label", ""))
def test_every_page_of_the_navigation_answers_with_its_area_and_page_marked(owner_client, area, child):
    from django.urls import reverse

    url = reverse((child or area).url_name)
    answer = owner_client.get(url)
    assert answer.status_code == 200, url
    page = answer.content.decode()
    assert marked(page, "main-nav") == [area.label]
    for other in AREAS:
        assert f'href="{reverse(other.url_name)}"' in page  # every area, from every page
    if area.children:
        expected = child.label if child else area.children[0].label
        assert marked(page, area.label) == [expected]
        assert all(f'href="{reverse(c.url_name)}"' in page for c in area.children)


def test_a_page_deep_in_an_area_marks_its_area_and_its_section(owner_client, project):
    from evals.models import Deployment

    Deployment.objects.create(project=project, name="d", base_url="http://127.0.0.1:9/v1", model="m")
    page = owner_client.get("/evals/suites/").content.decode()
    assert marked(page, "main-nav") == ["Evaluations"] and marked(page, "Evaluations") == ["Suites"]
    page = owner_client.get("/trials/1/").content.decode()  # not found, yet still in Jobs
    assert marked(page, "main-nav") == ["Jobs"]


def test_a_member_is_not_shown_the_owners_pages(member_client):
    page = member_client.get("/settings/").content.decode()
    assert marked(page, "Settings") == ["Overview"] and '">Members</a>' in page and '">API keys</a>' in page
    assert ">Balance</a>" not in page and ">Secrets</a>" not in page


def test_the_phone_menu_is_a_button_that_names_what_it_opens(owner_client):
    page = owner_client.get("/").content.decode()
    assert '<button type="button" class="menu-toggle secondary" aria-expanded="false" aria-controls="main-nav">Menu</button>' in page
    assert 'src="/static/js/phone.js"' in page
