"""In Chromium, keyboard only: a reviewer labels a queue's items blind, goes back to see the judge's verdict and a
colleague's label once they have labelled, skips one, and the page fits a phone."""

import pytest

from belvedir.core.models import Membership
from review import handout
from review.models import Item, Label

from .test_e2e_browser import shot
from .test_e2e_comparison import signed_in_page
from .test_review import logged_in, reviewer, sample_queue

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
RUBRIC = [
    {"name": "correct", "kind": "boolean"},
    {"name": "helpful", "kind": "numeric", "min": 1, "max": 5},
    {"name": "tone", "kind": "categorical", "labels": ["warm", "flat", "rude"]},
]


def test_a_reviewer_labels_blind_with_the_keyboard_alone(live_server, project, owner):
    queue, samples = sample_queue(project, owner, 3, overlap=2)
    queue.rubrics.update(scores=RUBRIC)
    Item.objects.filter(queue=queue).update(judge_value=1.0)  # the judge said "correct" to every one
    first = Item.objects.filter(queue=queue).order_by("pk").first()
    handout.submit(queue, handout.next_item(queue, owner), owner, {"correct": False, "helpful": 2, "tone": "rude"})
    rita = reviewer(project, "rita")
    assert Membership.objects.get(user=rita, project=project).role == "reviewer"

    with signed_in_page(live_server, logged_in(rita, project), rita) as page:
        page.set_default_timeout(30_000)
        page.goto(f"{live_server.url}/review/{queue.pk}/label/")
        # Blind: neither the judge's verdict nor alice's label before rita labels.
        assert page.is_visible("#blind-note") and page.locator("#judge-verdict").count() == 0 and page.locator(".other-label").count() == 0
        assert "q0" in page.inner_text("#review-item")
        shot(page, "review-blind")
        page.keyboard.press("1")  # correct: true (focus moves on to helpful)
        page.keyboard.press("4")  # helpful: 4
        page.keyboard.press("2")  # tone: flat
        page.keyboard.press("Enter")
        page.wait_for_selector("text=Label saved.")
        assert "q1" in page.inner_text("#review-item")
        assert Label.objects.get(item=first, reviewer=rita).values == {"correct": True, "helpful": 4.0, "tone": "flat"}

        # Back to what she labelled: now the verdict and alice's label show, and her answer is filled in.
        page.keyboard.press("p")
        page.wait_for_selector("#judge-verdict")
        assert "alice" in page.inner_text(".other-label") and page.is_checked("input[name='score-tone'][value='flat']")
        page.keyboard.press("n")
        page.wait_for_selector("#blind-note")
        assert "q1" in page.inner_text("#review-item")
        page.keyboard.press("s")  # skip q1: it is not handed to her again
        page.wait_for_selector("#review-item:has-text('q2')")
        assert Label.objects.get(item__queue=queue, reviewer=rita, skipped=True).item.object_id == samples[1].pk

        # The review page on a phone: item and rubric stacked, nothing wider than the screen.
        page.set_viewport_size({"width": 390, "height": 844})
        page.reload()
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        shot(page, "review-phone")
