"""In Chromium: a person makes an evaluator, traffic arrives and goes quiet, and its scores show on its page, on a session
and as a filter of the session list."""

from datetime import timedelta

import pytest
from django.utils import timezone

from traces.segmentation import process_quiet_sessions

from .test_e2e_browser import shot
from .test_e2e_comparison import signed_in_page
from .test_evaluators import exchange, inline_queue, post  # noqa: F401  (inline_queue: a fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_person_makes_an_evaluator_and_reads_its_scores(live_server, client, api, owner, settings, inline_queue):
    with signed_in_page(live_server, client, owner) as page:
        page.set_default_timeout(30_000)
        page.goto(f"{live_server.url}/traces/evaluators/")
        page.fill("#id_name", "cites an order number")
        page.select_option("#id_kind", "code")
        page.select_option("#id_check", "regex")
        page.fill("#id_pattern", r"order #\d+")
        page.click("text=Create evaluator")
        page.wait_for_selector("#evaluator-summary")
        assert "0 scored" in page.inner_text("#evaluator-summary")
        evaluator_url = page.url

    # Traffic after it was made: three sessions, one of which never names its order.
    now = timezone.now().timestamp()
    for i, answer in enumerate(["Refunded order #12.", "Refunded order #13.", "Refunded it."]):
        post(api, [exchange(f"support-{i}", f"Refund order {i}", answer, now + i)])
    settings.TRACE_QUIET_SECONDS = 0
    assert process_quiet_sessions(now=timezone.now() + timedelta(seconds=1)) == 3

    with signed_in_page(live_server, client, owner) as page:
        page.set_default_timeout(30_000)
        page.goto(evaluator_url)
        summary = page.inner_text("#evaluator-summary")
        assert "3 scored" in summary and "mean 0.667" in summary
        assert page.locator("#over-time svg circle").count() == 1 and page.locator("#scores tbody tr").count() == 3
        shot(page, "50-evaluator")
        page.click("#scores >> text=support-2")
        page.wait_for_selector("#evaluator-scores")
        assert "cites an order number" in page.inner_text("#evaluator-scores") and "0" in page.inner_text("#evaluator-scores strong")
        shot(page, "51-session-scores")
        page.goto(f"{live_server.url}/traces/")
        page.select_option("#evaluator", label="cites an order number")
        page.select_option("#score", "fail")
        page.click("text=Filter")
        page.wait_for_url("**score=fail**")
        listed = page.inner_text("#compare-sessions tbody")
        assert "support-2" in listed and "support-0" not in listed and "support-1" not in listed
