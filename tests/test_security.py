"""Security properties across the platform: CSRF, rate limits, secrets never leaked, staff-only actions."""

import logging

import pytest
from django.core.cache import cache
from django.test import Client

from belvedir.core.models import ApiKey, ProjectSecret

from .otlp_builders import body, span
from .pages import shown

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_counters(held_rate_window):
    cache.clear()


def test_login_is_rate_limited_per_username_and_address(owner, settings):
    settings.LOGIN_ATTEMPTS_PER_MINUTE = 3
    client = Client()
    codes = [client.post("/login/", {"username": "alice", "password": "wrong"}).status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    # Even the right password waits out the window: guessing cannot continue.
    blocked = client.post("/login/", {"username": "alice", "password": "pw-alice-123"})
    assert blocked.status_code == 429 and "Too many login attempts" in blocked.content.decode()


def test_staff_login_in_the_admin_is_rate_limited_like_login(owner, settings):
    owner.is_staff = owner.is_superuser = True
    owner.save()
    settings.LOGIN_ATTEMPTS_PER_MINUTE = 3
    client = Client()
    codes = [client.post("/admin/login/", {"username": "alice", "password": "wrong"}).status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    blocked = client.post("/admin/login/", {"username": "alice", "password": "pw-alice-123", "next": "/admin/"})
    assert blocked.status_code == 429 and "Too many login attempts" in blocked.content.decode()
    assert client.get("/admin/").status_code == 302  # still not logged in
    # One budget for both doors: the dashboard's login is spent too.
    assert client.post("/login/", {"username": "alice", "password": "pw-alice-123"}).status_code == 429


def test_the_admin_logs_staff_in_within_the_limit(owner, settings):
    owner.is_staff = owner.is_superuser = True
    owner.save()
    settings.LOGIN_ATTEMPTS_PER_MINUTE = 3
    client = Client()
    assert client.post("/admin/login/", {"username": "alice", "password": "wrong"}).status_code == 200
    response = client.post("/admin/login/", {"username": "alice", "password": "pw-alice-123", "next": "/admin/"})
    assert response.status_code == 302 and response["Location"] == "/admin/"
    assert client.get("/admin/").status_code == 200


def test_nobody_can_lock_a_chosen_user_out(owner, settings):
    settings.LOGIN_ATTEMPTS_PER_MINUTE = 3
    attacker = Client(REMOTE_ADDR="203.0.113.9")
    assert [attacker.post("/login/", {"username": "alice", "password": "guess"}).status_code for _ in range(5)][-1] == 429
    alice = Client(REMOTE_ADDR="198.51.100.7")
    response = alice.post("/login/", {"username": "alice", "password": "pw-alice-123"})
    assert response.status_code == 302, "the owner is locked out by someone else's failures"


@pytest.mark.django_db(transaction=True)
def test_parallel_attempts_never_overshoot_the_limit(settings):
    from belvedir.core.throttle import allow_attempt

    from .concurrency import run_concurrently

    settings.REDIS_URL = ""  # the database counter (Redis INCR is atomic by itself)
    allowed = run_concurrently(lambda i: allow_attempt("race", "same-user", 10), 24)
    assert allowed.count(True) == 10, allowed


def test_login_is_rate_limited_per_address(owner, settings):
    settings.LOGIN_ATTEMPTS_PER_MINUTE = 2
    client = Client()
    codes = [client.post("/login/", {"username": f"user{i}", "password": "x"}).status_code for i in range(11)]
    assert codes[-1] == 429 and codes[0] == 200


def test_ingest_is_rate_limited_per_key_with_retry_after(api, settings, owner, project):
    settings.INGEST_REQUESTS_PER_MINUTE = 3
    codes = [api.generic("POST", "/api/v1/traces", body([span("x")]), content_type="application/json") for _ in range(4)]
    assert [c.status_code for c in codes] == [200, 200, 200, 429]
    assert 0 < int(codes[-1]["Retry-After"]) <= 61
    # Another key of the same project has its own budget.
    other = ApiKey.issue(project=project, user=owner, name="other")[1]
    response = Client().post("/api/v1/traces", body([span("y")]), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {other}")
    assert response.status_code == 200


def test_every_dashboard_form_refuses_a_post_without_csrf(owner):
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    posts = [
        "/settings/api-keys/",
        "/settings/secrets/",
        "/settings/balance/redeem/",
        "/settings/balance/topup/",
        "/harnesses/new/",
        "/evals/new/benchmark/",
        "/evals/new/dataset/",
        "/evals/deployments/",
        "/evals/datasets/",
        "/models/",
        "/logout/",
    ]
    for url in posts:
        assert client.post(url, {}).status_code == 403, url


def test_login_and_signup_refuse_posts_without_csrf(owner):
    client = Client(enforce_csrf_checks=True)
    assert client.post("/login/", {"username": "alice", "password": "pw-alice-123"}).status_code == 403
    assert client.post("/signup/", {}).status_code == 403


def test_staff_only_admin_actions_are_refused_to_users(owner_client, project):
    from billing.models import Account

    account = Account.for_project(project)
    response = owner_client.post(
        "/admin/billing/account/", {"action": "grant_credit_action", "_selected_action": [account.pk], "apply": "1", "amount": "1000", "memo": "x"}
    )
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    assert Account.balance_for(project) == 0


def test_keys_are_stored_only_as_hashes(owner, project):
    from django.db import connection

    raw = ApiKey.issue(project=project, user=owner, name="k")[1]
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM core_apikey")
        assert raw not in repr(cursor.fetchall())


def test_a_planted_secret_never_reaches_pages_api_or_logs(owner_client, api, project, caplog):
    from evals.models import Deployment
    from harnesses.models import Harness, HarnessEnvVar

    planted = "PLANTED-secret-7f3a9c"
    caplog.set_level(logging.DEBUG)
    harness = Harness.objects.create(project=project, name="h", repo_url="https://x.org/a/b", install_command="true", run_command="true")
    HarnessEnvVar.objects.create(harness=harness, name="TOKEN", value=planted, secret=True)
    deployment = Deployment.objects.create(project=project, name="d", base_url="https://api.example.com/v1", model="m", api_key=planted)
    assert owner_client.post("/settings/secrets/", {"name": "HF_TOKEN", "value": planted}).status_code == 302
    assert ProjectSecret.objects.get(project=project, name="HF_TOKEN").value == planted  # planted indeed
    seen = [
        shown(owner_client.get(f"/harnesses/{harness.pk}/")),
        shown(owner_client.get(f"/harnesses/{harness.pk}/edit/")),
        shown(owner_client.get("/evals/deployments/")),
        shown(owner_client.get("/settings/secrets/")),
        shown(api.get(f"/api/v1/harnesses/{harness.pk}")),
        shown(api.get("/api/v1/harnesses")),
        shown(api.get(f"/api/v1/deployments/{deployment.pk}")),
        shown(api.get("/api/v1/deployments")),
    ]
    assert "h" in seen[0] and "TOKEN" in seen[0]  # the harness page itself, with the variable's name
    for content in seen:
        assert planted not in content
    assert planted not in caplog.text


def test_a_nul_character_in_an_address_answers_400_not_500(api, owner_client):
    """PostgreSQL text cannot hold NUL: a session's search or id with one raised deep in the view (500)."""
    assert api.generic("POST", "/api/v1/traces", body([span("agent", session_id="s-1")]), content_type="application/json").status_code == 200
    message = "The address contains a NUL character (%00), which nothing here can hold: remove it."
    for path, params in (
        ("/api/v1/sessions/s-1/steps", {"q": "Oslo\x00"}),  # the search that answered 500
        ("/api/v1/sessions/s\x00/steps", {}),
        ("/api/v1/sessions", {"outcome\x00": "x"}),  # a parameter's name
    ):
        response = api.get(path, params)
        assert (response.status_code, response.json()) == (400, {"detail": message}), path
    for path in ("/traces/sessions/s-1/?q=a%00b", "/traces/sessions/s%00/", "/evals/?status=%00"):
        response = owner_client.get(path)
        assert (response.status_code, response.content.decode()) == (400, message), path
    # The same addresses without the NUL are served as ever.
    assert api.get("/api/v1/sessions/s-1/steps", {"q": "Oslo"}).status_code == 200
    assert owner_client.get("/traces/sessions/s-1/?q=a%2500b").status_code == 200  # "%00" as text: no NUL in it


def test_a_huge_page_limit_gets_the_most_a_page_holds_and_next_goes_on(api, project, monkeypatch):
    """`?limit=10**23` overflowed PostgreSQL's bigint LIMIT (500); a large one read a whole table into one answer."""
    from belvedir.core.pagination import Pagination
    from harnesses.models import Harness

    for name in ("a", "b", "c"):
        Harness.objects.create(project=project, name=name, repo_url="https://x.org/a/b", install_command="true", run_command="true")
    monkeypatch.setattr(Pagination, "max_limit", 2)
    first = api.get("/api/v1/harnesses", {"limit": "1" + "0" * 23})
    assert first.status_code == 200 and first.json()["count"] == 3 and len(first.json()["results"]) == 2
    rest = api.get(first.json()["next"]).json()
    assert len(rest["results"]) == 1 and rest["next"] is None
    names = {h["name"] for h in first.json()["results"] + rest["results"]}
    assert names == {"a", "b", "c"}
    assert api.get("/api/v1/harnesses", {"offset": "1" + "0" * 23}).json()["results"] == []
