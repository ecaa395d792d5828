"""In Chromium: a person reruns an eval on the same rows against another deployment and reads the comparison."""

import os
from contextlib import contextmanager

import pytest
from playwright import sync_api as playwright_api

from .eval_pairs import PairedEvals, questions
from .test_e2e_browser import CHROMIUM, shot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("loopback_deployments")]


@contextmanager
def signed_in_page(live_server, client, owner):
    # Playwright's sync API runs an event loop in this thread: evals run in this
    # thread (uvloop) must finish before it starts.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    client.force_login(owner)
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        context = browser.new_context()
        context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}])
        yield context.new_page()
        browser.close()
    os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


def test_a_person_compares_two_deployments_on_the_same_rows(live_server, client, project, owner, worker):
    asked = questions()
    with PairedEvals(project, owner) as pairs:
        baseline = pairs.run("baseline", wrong=asked[:4])
        pairs.deployment("candidate", wrong=asked[2:16])
        with signed_in_page(live_server, client, owner) as page:
            see_the_comparison(page, live_server, baseline, asked)


def see_the_comparison(page, live_server, baseline, asked):
    page.set_default_timeout(30_000)
    page.goto(f"{live_server.url}/evals/{baseline.pk}/")
    assert "95% CI" in page.inner_text("#progress")
    page.select_option("#same-rows select", label="candidate")
    page.click("text=Run again on these rows against another deployment")
    page.wait_for_selector("#progress:has-text('Succeeded')", timeout=60_000)
    assert f"on the rows of eval #{baseline.pk}" in page.inner_text("body")
    page.goto(f"{live_server.url}/evals/{baseline.pk}/")
    page.click("text=against this one")
    page.wait_for_selector("#verdict")
    shot(page, "11-paired-comparison")
    verdict = page.inner_text("#verdict")
    assert "B is worse" in verdict and "right→wrong 12" in verdict and "wrong→right 2" in verdict
    assert "McNemar exact p" in verdict
    flipped = page.inner_text("#flipped")
    assert flipped.count("right → wrong") == 12 and flipped.count("wrong → right") == 2
    assert " ".join(asked[5].split())[:50] in " ".join(flipped.split()) and "#### -1" in flipped

    # Before the next eval: how many rows would tell a 5-point gap apart?
    page.goto(f"{live_server.url}/evals/new/benchmark/")
    page.fill("#id_gap", "5")
    page.click("text=Rows needed")
    page.wait_for_selector("#rows-needed")
    assert "about 1570 rows per eval" in page.inner_text("#rows-needed")
    assert page.url.endswith("/evals/new/benchmark/")  # answered in place, by htmx
