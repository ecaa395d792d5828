"""Every page of the navigation, and one of each result page (eval, comparison, job, trial, harness, run, transcript,
diff), in Debian's Chromium at 1440 and 390 px: nothing scrolls sideways on a phone, axe-core finds no serious or
critical violation, the current area is marked, and the phone's menu opens. Screenshots land in var/screenshots/pages/
(kept by CI)."""

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
    """axe-core's serious and critical violations on the page, each as "rule: first offending element", and every id
    used twice (a list's filter and a form on one page both had `id_name`: a label, a script or a test then finds the
    wrong field)."""
    page.add_script_tag(path=str(AXE))
    found = page.evaluate("async () => (await axe.run(document, {resultTypes: ['violations']})).violations")
    twice = page.evaluate(
        "() => { const seen = new Set(); return [...document.querySelectorAll('[id]')].map(e => e.id).filter(id => seen.has(id) || !seen.add(id)); }"
    )
    return [f"{v['id']}: {v['nodes'][0]['html'][:120]}" for v in found if v["impact"] in ("serious", "critical")] + [f"id used twice: {i}" for i in twice]


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


def detail_pages(project, owner, api) -> list[str]:
    """One of each result page, holding what stretches a phone: long unbroken outputs, wide tables, a transcript and
    a step-by-step diff."""
    from agent_tasks.models import Job, Trial
    from belvedir.core.actions import create_account
    from belvedir.core.models import Membership
    from evals.models import Sample
    from harnesses.models import Harness, Run
    from review import handout
    from review.fill import add_items
    from review.queues import create_queue
    from traces.models import TraceSession

    from .test_agent_job_rules import task_set
    from .test_monitors import decided_monitor, live_monitor
    from .test_trajectory import agent_session, post

    deployment = Deployment.objects.get(project=project, name="local")
    a, b = Eval.objects.filter(project=project).order_by("pk")
    # Served by two stacks, one naming itself at unbroken length: the eval page's "Served by" and the comparison's warning.
    for ev, right, server in ((a, 0.0, "vllm/0.6.3-" + "v" * 80), (b, 1.0, "sglang/0.4.1")):
        ev.status, ev.score = "succeeded", right * 0.5
        ev.serving_stack = {"server": [server], "models": "748b91de18a8fb34", "system_fingerprints": ["fp_" + "f" * 60], "peak_in_flight": 64}
        ev.save()
        Sample.objects.bulk_create(
            Sample(eval=ev, row_index=i, input="Natalia sold clips to " + "forty-eight friends " * 20, output="x" * 400, reference="72", score=right * (i % 2))
            for i in range(5)
        )
    version = task_set(project, owner, ["wide"])
    job = Job.objects.create(project=project, version=version, agents=["nop"], budget_cents=100, status="finished", created_by=owner)
    trial = Trial.objects.create(
        job=job, task=version.tasks.get(), agent="nop", deployment=deployment, status="succeeded", reward=1.0, agent_output="y" * 3000, verifier_output="ok"
    )
    harness = Harness.objects.create(
        project=project, name="wide", repo_url="https://example.com/" + "r" * 120 + ".git", install_command="true", run_command="true"
    )
    run = Run.objects.create(project=project, harness=harness, status="succeeded", score=0.5, compute_type="cpu", price_cents=1, status_message="z" * 300)
    post(api, agent_session("phone-a"))
    post(api, agent_session("phone-b", result="Rain, " + "9" * 200))
    assert TraceSession.objects.filter(session_id__in=["phone-a", "phone-b"]).count() == 2
    monitor = decided_monitor(project, owner)
    live = live_monitor(project, owner)
    # A review queue of those samples, the trial and the session, labelled twice over (agreement tables), with the
    # "add to review queue" form on the eval, trial and session pages above.
    queue = create_queue(
        project,
        owner,
        {
            "name": "phone review",
            "overlap": 2,
            "scores": [
                {"name": "ok", "kind": "boolean"},
                {"name": "tone", "kind": "categorical", "labels": ["warm", "flat"]},
                {"name": "note", "kind": "text"},
            ],
        },
    )
    add_items(queue, "sample", list(Sample.objects.filter(eval=a).values_list("pk", flat=True)))
    add_items(queue, "trial", [trial.pk])
    add_items(queue, "session", ["phone-b"])
    colleague = create_account(username="colleague", password=None)
    Membership.objects.create(project=project, user=colleague, role=Membership.Role.REVIEWER)
    for person in (owner, colleague):
        for _ in range(5):
            handout.submit(queue, handout.next_item(queue, person), person, {"ok": person == owner, "tone": "warm"})
    return [
        "/review/",
        f"/review/{queue.pk}/",
        f"/review/{queue.pk}/label/",
        f"/monitors/{monitor.pk}/",
        f"/monitors/{live.pk}/",
        f"/evals/{a.pk}/",
        f"/evals/{b.pk}/compare/{a.pk}/",
        f"/jobs/{job.pk}/",
        f"/trials/{trial.pk}/",
        f"/harnesses/{harness.pk}/",
        f"/runs/{run.pk}/",
        "/traces/sessions/phone-b/",
        "/traces/diff/?s=phone-a&s=phone-b",
    ]


def test_result_pages_fit_a_phone_and_pass_axe(signed_in, project, owner, api):
    base, contexts = signed_in
    SHOTS.mkdir(parents=True, exist_ok=True)
    paths = detail_pages(project, owner, api)
    problems = []
    for width, context in contexts.items():
        page = context.new_page()
        for path in paths:
            answer = page.goto(base + path)
            assert answer.status == 200, path
            page.screenshot(path=str(SHOTS / f"{width}{path.replace('/', '_').replace('?', '_')}.png"), full_page=True)
            sideways = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            if sideways > 0:
                problems.append(f"{width} {path}: scrolls {sideways} px sideways")
            problems += [f"{width} {path}: {v}" for v in audit(page)]
        page.close()
    assert not problems, "\n".join(problems)
