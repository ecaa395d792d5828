"""Every page of the navigation in Debian's Chromium, at 1440 and 390 px: nothing scrolls sideways on a phone, axe-core
finds no serious or critical violation, the current area is marked, and the phone's menu opens. Screenshots land in
var/screenshots/pages/ (kept by CI)."""

import os
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.test import Client
from playwright import sync_api as playwright_api

from belvedir.core.navigation import AREAS
from evals.models import Deployment, Eval

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM = "/usr/bin/chromium"
AXE = Path(__file__).resolve().parent / "js" / "node_modules" / "axe-core" / "axe.min.js"
SHOTS = Path(django_settings.VAR_DIR) / "screenshots" / "pages"
WIDTHS = {"desktop": (1440, 900), "phone": (390, 844)}


def pages():
    from django.urls import reverse

    for area in AREAS:
        for link in [area, *area.children[1:]]:
            yield area.label, reverse(link.url_name)


@pytest.fixture
def signed_in(live_server, owner, project):
    """A browser context per width, signed in as the owner, with a few things to show on the pages."""
    deployment = Deployment.objects.create(project=project, name="local", base_url="http://127.0.0.1:9/v1", model="smollm2")
    Eval.objects.create(
        project=project, deployment=deployment, benchmark="gsm8k", seed=1, status="failed", error_count=5, done_count=5, total=5, created_by=owner
    )
    Eval.objects.create(
        project=project, deployment=deployment, benchmark="gsm8k", seed=2, status="succeeded", score=0.4, done_count=5, total=5, created_by=owner
    )
    client = Client()
    client.force_login(owner)
    cookie = client.cookies[django_settings.SESSION_COOKIE_NAME].value
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-sync"])
        contexts = {}
        for name, (width, height) in WIDTHS.items():
            context = browser.new_context(viewport={"width": width, "height": height})
            context.add_cookies([{"name": django_settings.SESSION_COOKIE_NAME, "value": cookie, "url": live_server.url}])
            contexts[name] = context
        yield live_server.url, contexts
        browser.close()
    os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


def audit(page) -> list[str]:
    """axe-core's serious and critical violations on the page, each as "rule: first offending element"."""
    page.add_script_tag(path=str(AXE))
    found = page.evaluate("async () => (await axe.run(document, {resultTypes: ['violations']})).violations")
    return [f"{v['id']}: {v['nodes'][0]['html'][:120]}" for v in found if v["impact"] in ("serious", "critical")]


def test_every_page_of_the_navigation_fits_a_phone_passes_axe_and_marks_its_area(signed_in):
    base, contexts = signed_in
    SHOTS.mkdir(parents=True, exist_ok=True)
    problems = []
    for width, context in contexts.items():
        page = context.new_page()
        for area, path in pages():
            answer = page.goto(base + path)
            assert answer.status == 200, path
            name = f"{width}{path.replace('/', '_')}"
            page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
            sideways = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            if sideways > 0:
                problems.append(f"{width} {path}: scrolls {sideways} px sideways")
            problems += [f"{width} {path}: {v}" for v in audit(page)]
            current = page.locator('#main-nav a[aria-current="true"]').all_inner_texts()
            if current != [area]:
                problems.append(f"{width} {path}: marks {current}, not {area}")
        page.close()
    assert not problems, "\n".join(problems)


def test_the_phone_menu_opens_to_every_area(signed_in):
    base, contexts = signed_in
    page = contexts["phone"].new_page()
    page.goto(base + "/evals/")
    assert not page.locator("#main-nav").is_visible()
    page.get_by_role("button", name="Menu").click()
    assert page.get_by_role("button", name="Menu").get_attribute("aria-expanded") == "true"
    for area in AREAS:
        assert page.locator("#main-nav").get_by_role("link", name=area.label, exact=True).is_visible()
    page.locator("#main-nav").get_by_role("link", name="Jobs", exact=True).click()
    page.wait_for_url(f"{base}/jobs/")
    assert page.locator('#main-nav a[aria-current="true"]').all_inner_texts() == ["Jobs"]
