"""End to end in Debian's Chromium, driven by Playwright, as a person uses the dashboard.

Screenshots of every page land in artefacts/screenshots/. The django-q2 worker
is stood in for by threads running the same task functions in-process.
"""

import os
import re
from pathlib import Path

import pytest
from playwright import sync_api as playwright_api

from .conftest import OUTSIDE_ADDRESS
from .harness_fixtures import make_repo

CHROMIUM = "/usr/bin/chromium"
SHOTS = Path(__file__).resolve().parent.parent / "artefacts" / "screenshots"
pytestmark = [pytest.mark.docker, pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("loopback_deployments")]

HARNESS_RUN = """
import json, os, time, urllib.request
for step in range(4):
    print(f"step {step} of 4", flush=True)
    time.sleep(1.5)
span = {"traceId": "ef" * 16, "spanId": "12" * 8, "name": "agent.workflow", "kind": 1,
        "startTimeUnixNano": str(time.time_ns() - 10**9), "endTimeUnixNano": str(time.time_ns()),
        "attributes": [{"key": "session.id", "value": {"stringValue": os.environ["FRACTAL_RUN_ID"]}},
                       {"key": "traceloop.span.kind", "value": {"stringValue": "workflow"}}]}
request = urllib.request.Request(os.environ["FRACTAL_BASE_URL"] + "/api/v1/traces",
    data=json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode(),
    headers={"Authorization": "Bearer " + os.environ["FRACTAL_API_KEY"], "Content-Type": "application/json"})
urllib.request.urlopen(request, timeout=10)
json.dump({"score": 0.875, "model": "tuned-e2e"}, open("results.json", "w"))
print("done", flush=True)
"""


@pytest.fixture
def browser():
    # Playwright's sync API runs an event loop in this thread; the ORM calls
    # made by the test itself are ordinary synchronous ones.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with playwright_api.sync_playwright() as p:
        instance = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
        )
        yield instance
        instance.close()
    os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


def shot(page, name):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def test_a_person_uses_the_platform(browser, live_server, settings, tmp_path, worker, egress):
    import importlib

    from django.apps import apps
    from django.core.files.uploadedfile import SimpleUploadedFile

    from belvedir.sandbox.models import SandboxHost
    from billing.models import Coupon
    from evals.benchmarks import gsm8k
    from finetunes.models import FineTunedModel

    from .fakes.openai_server import FakeOpenAI
    from .test_models import make_zip

    settings.HARNESS_ALLOW_LOCAL_REPOS = True
    # The harness reaches the platform (traces) through the egress proxy, as in production.
    settings.MEDIA_ROOT = tmp_path / "media"
    SandboxHost.objects.get_or_create(name="local", defaults={"url": settings.SANDBOX_DOCKER_URL})
    # Transactional tests flush the catalog the data migration seeded: seed it again, the same way.
    importlib.import_module("harnesses.migrations.0006_presets_use_shipped_drivers").seed(apps, None)
    Coupon.objects.create(code="WELCOME25", amount_cents=2500)
    make_repo(tmp_path / "harness", {"run.py": HARNESS_RUN})

    page = browser.new_page()
    page.set_default_timeout(30_000)
    base = live_server.url

    # Sign up.
    page.goto(f"{base}/signup/")
    page.fill("#id_username", "erin")
    page.fill("#id_password1", "a-long-pass-42")
    page.fill("#id_password2", "a-long-pass-42")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")
    assert "erin's project" in page.content().replace("&#x27;", "'")
    shot(page, "01-dashboard")

    # Redeem a coupon: the result shows inline and the balance updates.
    page.goto(f"{base}/settings/balance/")
    page.fill("#id_code", " welcome25 ")
    page.click("button:has-text('Redeem')")
    page.wait_for_selector("#redeem-result .flash")
    assert "Coupon applied: $25.00 added." in page.inner_text("#redeem-result"), page.inner_text("#redeem-result")
    assert page.inner_text("#balance") == "$25.00"
    shot(page, "02-balance")

    # Create a harness from a preset: the card prefills the form in place.
    page.goto(f"{base}/harnesses/new/")
    page.click("text=Terminal-Bench")
    page.wait_for_function("document.querySelector('#id_repo_url').value.includes('terminal-bench')")
    shot(page, "03-new-harness-prefilled")
    page.fill("#id_name", "my terminal bench")
    page.fill("#id_repo_url", str(tmp_path / "harness"))
    page.fill("#id_install_command", "true")
    page.fill("#id_run_command", "python3 run.py")
    page.fill("#id_env-0-value", "sk-ant-test")
    page.click("text=Create harness")
    page.wait_for_selector("text=Run ($0.50)")
    shot(page, "04-harness")

    # Start a run and watch the log tail update live until the score appears.
    page.click("text=Run ($0.50)")
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    run_url = page.url
    page.wait_for_selector("#log:has-text('step 1 of 4')")
    shot(page, "05-run-live")
    page.wait_for_selector("text=0.875", timeout=120_000)
    assert "Succeeded" in page.content()
    shot(page, "06-run-done")

    # Its traces session.
    page.click("text=Traces of this run")
    page.wait_for_selector("text=agent.workflow")
    shot(page, "07-traces-session")

    # A gsm8k eval of 20 rows against the fake deployment, progress shown live.
    answers = {row["input"]: row["reference"] for row in gsm8k.rows()}
    with FakeOpenAI(answer=lambda q: f"#### {answers.get(q, 0)}", latency=0.3) as fake:
        page.goto(f"{base}/evals/deployments/")
        page.fill("#id_name", "fake-gpt")
        page.fill("#id_base_url", fake.url)
        page.fill("#id_model", "fake-model")
        page.fill("#id_max_in_flight", "2")
        page.click("text=Add deployment")
        page.click("text=Test connection")
        page.wait_for_selector("text=Answered")
        page.goto(f"{base}/evals/new/benchmark/")
        page.select_option("#id_deployment", label="fake-gpt")
        page.fill("#id_sample_limit", "20")
        page.click("text=Start eval")
        page.wait_for_selector("progress")
        shot(page, "08-eval-progress")
        page.wait_for_selector("#progress:has-text('20/20')", timeout=120_000)
        page.wait_for_selector("#progress:has-text('Succeeded')")
        card = page.inner_text("#score-card")
        assert "1.000" in card and "95% CI 0.839–1.000" in card and "20 of 20" in card
        shot(page, "09-eval-done")

    # A model's benchmarks panel shows the run whose results named it.
    from belvedir.core.models import Project

    project = Project.objects.get(name="erin's project")
    model = FineTunedModel(project=project, name="tuned-e2e", base_model="org/base")
    model.adapter.save("a.zip", SimpleUploadedFile("a.zip", make_zip()), save=False)
    model.save()
    page.goto(f"{base}/models/{model.pk}/")
    page.wait_for_selector("svg")
    assert "0.875" in page.content()
    shot(page, "10-model-benchmarks")
    page.goto(run_url)
    assert "$0.50" in page.content()


def login(page, base, username, password):
    page.goto(f"{base}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")


def test_a_team_forms_across_two_browsers(browser, live_server):
    from belvedir.core.actions import create_account
    from belvedir.core.models import ApiKey, Membership

    alice = create_account(username="alice", password="a-long-pass-42", email="alice@example.com")
    carol = create_account(username="carol", password="c-long-pass-42", email="carol@example.com")
    base = live_server.url

    # Alice invites Carol by email from Settings → Members.
    owner = browser.new_context().new_page()
    owner.set_default_timeout(30_000)
    login(owner, base, "alice", "a-long-pass-42")
    owner.goto(f"{base}/settings/members/")
    owner.fill("#id_who", "carol@example.com")
    owner.click("button:has-text('Invite')")
    link = owner.inner_text("#invitation-link")
    assert "/invitations/" in link
    shot(owner, "20-members-invited")

    # Carol, in her own browser context, accepts: the project becomes her current one.
    invitee = browser.new_context().new_page()
    invitee.set_default_timeout(30_000)
    login(invitee, base, "carol", "c-long-pass-42")
    invitee.goto(link)
    assert "Join alice's project?" in invitee.inner_text("h1")
    shot(invitee, "21-invitation")
    invitee.click("button:has-text('Accept')")
    invitee.wait_for_url(f"{base}/")
    assert invitee.inner_text("main h1") == "alice's project"
    assert Membership.objects.get(user=carol, project__name="alice's project").role == "member"

    # She switches to her own project from the header, and back; the home page follows.
    invitee.select_option("#project-switcher select", label="carol's project")
    invitee.click("#project-switcher button")
    invitee.wait_for_function("document.querySelector('main h1').innerText === \"carol's project\"")
    assert "Get started" in invitee.inner_text("#checklist")
    invitee.select_option("#project-switcher select", label="alice's project")
    invitee.click("#project-switcher button")
    invitee.wait_for_function("document.querySelector('main h1').innerText === \"alice's project\"")
    for section in ("Balance", "Traces today", "Spend per day (30 days)", "Running evaluations", "Latest runs", "Latest scores"):
        assert section in invitee.inner_text("main")
    shot(invitee, "22-home-after-switch")

    # Owner-only pages stay closed to her; the link cannot be used twice.
    invitee.goto(f"{base}/settings/balance/")
    assert "Owners only" in invitee.inner_text("main h1")
    invitee.goto(link)
    assert "can no longer be used" in invitee.inner_text("main")
    assert ApiKey.objects.filter(user=alice).count() == 0


REFERENCE_TASKS = """Write hi into hello.txt :: test "$(cat hello.txt)" = hi
Put 42 into answer.txt :: grep -qx 42 answer.txt
Say whether the sky is green"""


def scripted_agent(body):
    """A model that solves the first task, botches the second, and gives up on the third."""
    import json

    task = next(m["content"] for m in body["messages"] if m["role"] == "user")
    acted = any(m["role"] == "tool" for m in body["messages"])
    commands = {"Write hi": "echo hi > hello.txt", "Put 42": "echo 41 > answer.txt"}
    command = next((c for prefix, c in commands.items() if task.startswith(prefix)), None)
    if command and not acted:
        call = {"id": "call_1", "type": "function", "function": {"name": "shell", "arguments": json.dumps({"command": command})}}
        return {"role": "assistant", "content": None, "tool_calls": [call]}
    return {"role": "assistant", "content": "Done.\nRESULT: " + ("success" if command else "failure")}


def test_a_person_runs_the_reference_agent_from_the_catalog(browser, live_server, settings, worker, egress):
    import importlib

    from django.apps import apps

    from belvedir.core.actions import create_account
    from belvedir.sandbox.models import SandboxHost

    from .fakes.openai_server import FakeOpenAI
    from .harness_fixtures import fund

    settings.PRESET_REPO_ORG = ""  # the default egress network reaches the fake model on the allowed outside address
    SandboxHost.objects.get_or_create(name="local", defaults={"url": settings.SANDBOX_DOCKER_URL})
    importlib.import_module("harnesses.migrations.0006_presets_use_shipped_drivers").seed(apps, None)
    user = create_account(username="rita", password="a-long-pass-42")
    fund(user.memberships.get().project)

    page = browser.new_page()
    page.set_default_timeout(30_000)
    base = live_server.url
    page.goto(f"{base}/login/")
    page.fill("#id_username", "rita")
    page.fill("#id_password", "a-long-pass-42")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")

    with FakeOpenAI(reply=scripted_agent, latency=0.7, host=OUTSIDE_ADDRESS) as fake:
        page.goto(f"{base}/harnesses/new/")
        page.click("text=Tasks (reference agent)")
        page.wait_for_function("document.querySelector('#id_repo_url').value.endsWith('/drivers/reference-agent.git')")
        assert page.input_value("#id_repo_url") == f"{base}/drivers/reference-agent.git"
        page.fill("#id_tasks", REFERENCE_TASKS)
        assert [page.input_value(f"#id_env-{i}-name") for i in range(3)] == ["LLM_BASE_URL", "LLM_MODEL", "LLM_API_KEY"]
        page.fill("#id_env-0-value", fake.url)
        page.uncheck("#id_env-0-secret")
        page.fill("#id_env-1-value", "scripted-model")
        page.uncheck("#id_env-1-secret")
        page.fill("#id_env-2-value", "sk-browser-secret")
        shot(page, "11-reference-agent-form")
        page.click("text=Create harness")
        page.wait_for_selector("text=Run ($0.50)")
        page.click("text=Run ($0.50)")
        page.wait_for_url(re.compile(r".*/runs/\d+/$"))
        page.wait_for_selector("#log:has-text('[1/3] Write hi')", timeout=120_000)
        shot(page, "12-reference-agent-live")
        page.wait_for_selector("text=0.3333333333333333", timeout=120_000)
    assert "Succeeded" in page.content() and "scripted-model" in page.content()
    rows = page.locator("#tasks tr").all_inner_texts()
    assert len(rows) == 4 and "solved" in rows[1] and "failed" in rows[2] and "failed" in rows[3], rows
    assert "sk-browser-secret" not in page.content()
    shot(page, "13-reference-agent-done")


def test_a_person_reads_a_trajectory_and_sets_two_side_by_side(browser, live_server, api):
    from .otlp_builders import body
    from .test_trajectory import agent_session, llm_span

    def post(spans):
        assert api.generic("POST", "/api/v1/traces", body(spans), content_type="application/json").status_code == 200

    post(agent_session("run-a"))
    rerun = agent_session("run-b", result="Rain, 8")
    post(rerun + [llm_span("run-b", 1_700_000_000 + 4 + i, answer=f"More {i}", call_arguments=None) for i in range(60)])
    base = live_server.url
    page = browser.new_context().new_page()
    page.set_default_timeout(15_000)
    login(page, base, "alice", "pw-alice-123")

    # The trajectory: steps in order, a step's span details a click away, load more without leaving the page.
    page.goto(f"{base}/traces/sessions/run-b/")
    assert page.locator("article.step").count() == 50
    assert "Tool call get_weather" in page.inner_text("#step-1")
    page.click("#step-3 .span-details summary")
    assert "RateLimitError" in page.inner_text("#step-3 .span-details")
    page.click("#load-more a")
    page.wait_for_selector("#step-64")
    assert page.locator("article.step").count() == 64 and page.url == f"{base}/traces/sessions/run-b/"
    shot(page, "30-trajectory")
    page.check("#errors")
    page.click(".step-filters button")
    assert page.locator("article.step").count() == 1 and "Error: rate limited" in page.inner_text("#steps")

    # Two runs side by side, picked from the session list: the tool's changed result is the first divergence.
    page.goto(f"{base}/traces/")
    page.check("input[value='run-a']")
    page.check("input[value='run-b']")
    page.click("text=Compare the two ticked sessions")
    page.wait_for_selector("#diff-totals")
    first = page.locator("tr.first-divergence")
    assert "result" in first.inner_text() and "Rain, 8" in first.inner_text()
    assert "They diverge at row 2." in page.inner_text("#first-divergence")
    assert page.locator("tr.only_a").count() + page.locator("tr.only_b").count() == 60
    shot(page, "31-trajectory-diff")
