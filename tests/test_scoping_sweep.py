"""Every URL, generated from the URL conf, tried by an anonymous visitor, an outsider, a member and a removed member.

The owner has one object of every kind; the outsider has none. Any URL with
an id in it, dashboard or API, must then be "not found" for the outsider
(405 first where a view takes another method: then that method is tried).
A member reaches every route but the owner-only ones (billing, members,
secrets, deleting the project), which answer 403; a removed member is an
outsider again, and their keys for the project answer 401. And the owner
gets no 500 from any page it reaches with every query parameter the views
read set to a value that is not what the parameter takes, nor from any
dashboard form's address with every field the views read that way.
"""

import inspect
import re
from pathlib import Path
from urllib.parse import quote

import pytest
from django.core.files.base import ContentFile
from django.db import transaction
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, resolve
from django.utils import timezone

from agent_tasks.actions import import_task_set
from agent_tasks.jobs import create_job
from agent_tasks.models import Grade, Job, Regrade, TrialOutputs
from agent_tasks.outputs import Outputs
from belvedir.core.actions import create_account, invite_member, remove_member
from belvedir.core.models import ApiKey, Membership, ProjectSecret
from billing.models import Account, TopUp
from evals.datasets.versions import create_dataset
from evals.models import Deployment, Eval, Suite, SuiteRun
from finetunes.models import FineTunedModel
from harnesses.models import Harness, Run
from monitors.models import Alert, Monitor
from review.queues import create_queue
from traces.models import Evaluator, TaskGroup, TraceSession

pytestmark = pytest.mark.django_db

HELLO_TASK = Path(__file__).resolve().parent.parent / "examples" / "harbor-format" / "hello"
# The shipped driver repos are public, read-only and nobody's project (tests/test_driver_repos.py).
SKIP_PREFIXES = ("admin/", "static/", "api/schema", "api/docs", "drivers/", "docs/")
# Values for non-id URL parts; ids are filled with the owner's primary keys.
PLACEHOLDERS = {
    "path": "using/evals/",
    "fmt": "csv",
    "benchmark": "gsm8k",
    "token": "not-a-valid-token",
    "session_id": "owner-session",
    "slug": "swe-bench-lite",
    "what": "cancel",
    # A dataset row's place: the owner's dataset has one at 0.
    "position": "0",
    # A password reset link's user, in Django's base64 form.
    "uidb64": "MQ",
}
CONVERTER = re.compile(r"<(?:(\w+):)?(\w+)>")
REGEX_GROUP = re.compile(r"\(\?P<(\w+)>[^)]*\)")
ID_NAMES = {"pk", "run_id", "session_id"}
# Sign-in pages, the Stripe webhook and the schema are nobody's project.
NOT_PROJECT_ROUTES = ("signup/", "login/", "logout/", "billing/stripe/webhook", "invitations/", "password-reset/", "reset/", "verify-email/")
# Routes that name their objects in the query string: the owner's session, twice.
QUERIES = {"api/v1/session-diff": "?a=owner-session&b=owner-session", "traces/diff/": "?s=owner-session&s=owner-session"}
# (route prefix, methods): owner-only; an empty set means every method, a trailing $ this route alone.
OWNER_ONLY = [
    ("settings/balance/", set()),
    ("settings/secrets/", set()),
    ("settings/members/<int:pk>/", set()),
    ("settings/invitations/", set()),
    ("settings/project/", set()),
    ("settings/members/$", {"POST"}),  # inviting; listing is for everyone
    ("api/v1/balance", set()),
    ("api/v1/coupons/", set()),
    ("api/v1/^secrets", set()),
    ("api/v1/^invitations$$", set()),  # accept and decline are the invitee's
    ("api/v1/^invitations/(?P<pk>", set()),
    ("api/v1/^members/(?P<pk>", {"PATCH", "DELETE"}),  # but a member deletes their own: leaving
]


def routes(patterns, prefix=""):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from routes(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            yield prefix + str(pattern.pattern)


def value_for(converter: str, name: str, object_id: int) -> str:
    if converter == "int" or name in {"pk", "run_id", "other"}:
        return str(object_id)
    if name not in PLACEHOLDERS:
        raise AssertionError(f"no placeholder for <{name}>")
    return PLACEHOLDERS[name]


def owner_only(route: str, method: str) -> bool:
    return any(
        (route == prefix[:-1] if prefix.endswith("$") else route.startswith(prefix)) and (not methods or method in methods) for prefix, methods in OWNER_ONLY
    )


def plain(route: str) -> str:
    """A route that names no object, with its placeholders filled."""
    path = REGEX_GROUP.sub(lambda m: PLACEHOLDERS[m.group(1)], route).replace("^", "").replace("$", "").replace("\\.", ".")
    return "/" + CONVERTER.sub(lambda m: PLACEHOLDERS[m.group(2)], path)


def fill(route: str, object_id: int) -> str | None:
    """The route with the object's id (and placeholders) in it; None when it names no object."""
    if "(?P<format>" in route:
        return None  # DRF's format-suffix twin of another route
    if "(?P<" in route:  # a router's regex route
        names = REGEX_GROUP.findall(route)
        if not set(names) & ID_NAMES:
            return None
        path = REGEX_GROUP.sub(lambda m: value_for("", m.group(1), object_id), route).replace("^", "").replace("$", "").replace("\\.", ".")
        return "/" + path
    names = CONVERTER.findall(route)
    if not any(c == "int" or n in ID_NAMES for c, n in names):
        return None
    path = route
    for converter, name in names:
        path = path.replace(f"<{converter + ':' if converter else ''}{name}>", value_for(converter, name, object_id), 1)
    return "/" + path


def same_next_id_in_every_table() -> int:
    """Points every table's id sequence at one value past all of them, and returns it.

    The owner's objects, one per kind and each the first of its table made
    after this, then share one id, so every route filled with it names the
    owner's object of its own kind: one request per route where one per
    route and object (19 ids, a kind each) was mostly spent on ids of the
    wrong kind, which prove nothing.
    """
    from django.apps import apps
    from django.db import connection

    tables = [m._meta.db_table for m in apps.get_models() if m._meta.pk.get_internal_type() in {"AutoField", "BigAutoField"} and m._meta.managed]
    with connection.cursor() as cursor:
        sequences = []
        for table in tables:
            cursor.execute("SELECT pg_get_serial_sequence(%s, 'id')", [connection.ops.quote_name(table)])
            if (sequence := cursor.fetchone()[0]) is not None:
                sequences.append(sequence)
        # last_value is not rolled back with the test's transaction: past every one, no id is taken.
        cursor.execute(" UNION ALL ".join(f"SELECT last_value FROM {s}" for s in sequences))
        start = max(value for (value,) in cursor.fetchall()) + 1
        for sequence in sequences:
            cursor.execute("SELECT setval(%s, %s, false)", [sequence, start])
    return start


@pytest.fixture
def owners_objects(project, owner, settings, tmp_path):
    # Asked for last by every test: the users, projects and keys of the other fixtures are made
    # first, so none of them takes the id the owner's objects share.
    colleague = create_account(username="colleague", password=None)
    invitee = create_account(username="invitee", password=None)
    start = same_next_id_in_every_table()
    harness = Harness.objects.create(project=project, name="h", repo_url="https://x.org/a/b", install_command="true", run_command="true")
    run = Run.objects.create(project=project, harness=harness, compute_type="cpu", price_cents=50)
    deployment = Deployment.objects.create(project=project, name="d", base_url="https://api.example.com/v1", model="m")
    dataset = create_dataset(project, owner, "ds", b'{"input": "a", "expected": "b"}\n')
    ev = Eval.objects.create(project=project, deployment=deployment, benchmark="gsm8k", seed=1)
    key = ApiKey.issue(project=project, user=owner, name="k")[0]
    secret = ProjectSecret.objects.create(project=project, name="HF_TOKEN", value="x")
    topup = TopUp.objects.create(account=Account.for_project(project), amount_cents=1000)
    TraceSession.objects.create(project=project, session_id="owner-session", first_span_at=run.created_at, last_span_at=run.created_at)
    group = TaskGroup.objects.create(project=project, key="workflow:x", name="x")
    evaluator = Evaluator.objects.create(project=project, name="e", scorer={"name": "contains", "options": {"expected": "x"}})
    suite = Suite.objects.create(project=project, name="mine", entries=[{"benchmark": "gsm8k", "sample_limit": 5, "mode": "generative", "options": {}}])
    suite_run = SuiteRun.objects.create(project=project, suite_name="mine", entries=suite.entries)
    suite_run.deployments.add(deployment)
    Eval.objects.create(project=project, deployment=deployment, benchmark="gsm8k", seed=1, suite_run=suite_run, status="succeeded")
    settings.MEDIA_ROOT = tmp_path / "media"
    model = FineTunedModel(project=project, name="m", base_model="org/base")
    model.adapter.save("a.zip", ContentFile(b"PK"), save=False)
    model.save()
    membership = Membership.objects.create(project=project, user=colleague)
    invitation = invite_member(project, owner, invitee.username)[0]
    hello = {p.relative_to(HELLO_TASK).as_posix(): p.read_bytes() for p in HELLO_TASK.rglob("*") if p.is_file()}
    version = import_task_set(project, owner, "tasks", hello)[0]
    job = create_job(project, owner, version=version, agents=["nop"], budget_cents=100)
    trial = job.trials.get()
    TrialOutputs.objects.create(trial=trial, archive=Outputs().archive(), digest="0" * 64, size=0, file_count=0)
    create_job(project, owner, version=version, agents=["nop"], budget_cents=100, purpose=Job.Purpose.AUDIT)
    regrade = Regrade.objects.create(job=job, version=version, created_by=owner)
    Grade.objects.create(regrade=regrade, trial=trial, task=trial.task)
    monitor = Monitor.objects.create(project=project, name="m", suite_name="mine", deployment=deployment, cron="0 3 * * *", next_run_at=timezone.now())
    alert = Alert.objects.create(project=project, monitor=monitor, kind="regressed", title="m: regressed", message="Worse on gsm8k.")
    queue = create_queue(project, owner, {"name": "q", "scores": [{"name": "ok", "kind": "boolean"}]})
    objects = [
        harness,
        run,
        deployment,
        dataset,
        ev,
        key,
        secret,
        topup,
        model,
        membership,
        invitation,
        group,
        suite,
        suite_run,
        evaluator,
        version.task_set,
        job,
        trial,
        regrade,
        monitor,
        alert,
        queue,
    ]
    assert {o.pk for o in objects} == {start}, {type(o).__name__: o.pk for o in objects}
    return {start}


def test_the_sweep_covers_every_object_route():
    object_routes = [r for r in routes(get_resolver().url_patterns) if not r.startswith(SKIP_PREFIXES) and fill(r, 1)]
    assert len(object_routes) >= 30, object_routes


def test_an_outsider_gets_404_on_every_object_url(outsider_client, outsider_api, outsider_project, owners_objects):
    # Every route is filled with the id the owner's objects share (owners_objects). The
    # outsider's own objects are made before them; an id of theirs would reach their
    # object rightly, so it is left out (and the sweep then fails for trying too few).
    outsiders = {outsider_project.pk, *outsider_project.api_keys.values_list("pk", flat=True), *outsider_project.memberships.values_list("pk", flat=True)}
    checked = []
    for route in routes(get_resolver().url_patterns):
        if route.startswith(SKIP_PREFIXES):
            continue
        for object_id in sorted(owners_objects - outsiders):
            url = fill(route, object_id)
            if url is None:
                continue
            client = outsider_api if url.startswith("/api/") else outsider_client
            response = client.get(url)
            if response.status_code == 405:
                response = client.post(url)
            if response.status_code == 405:
                response = client.patch(url) if url.startswith("/api/") else response
            if response.status_code == 405:
                response = client.delete(url) if url.startswith("/api/") else response
            allowed = {404, 403} if "/adapter/" in url else {404}  # a bad signature is refused before any lookup
            assert response.status_code in allowed, (url, response.status_code)
            checked.append(url)
    assert len(checked) >= 30  # every object route at least once


def project_routes():
    for route in routes(get_resolver().url_patterns):
        if not route.startswith(SKIP_PREFIXES + NOT_PROJECT_ROUTES) and "(?P<format>" not in route:
            yield route


def test_a_member_works_on_every_route_but_the_owner_only_ones(member_client, member_api, owners_objects):
    reached, refused, tried = set(), [], set()
    for route in project_routes():
        urls = [fill(route, i) for i in sorted(owners_objects)] if fill(route, 1) else [plain(route) + QUERIES.get(route, "")]
        for url in urls:
            client = member_api if url.startswith("/api/") else member_client
            method, response = "GET", client.get(url)
            # Other methods would change the owner's objects: tried only where they must be refused.
            for other in ["POST", "PATCH", "DELETE"] if url.startswith("/api/") else ["POST"]:
                if response.status_code == 405 and owner_only(route, other):
                    method, response = other, getattr(client, other.lower())(url)
            if response.status_code == 405:
                continue  # a GET route shows the member reaches it
            tried.add(route)
            if owner_only(route, method):
                if response.status_code != 403:
                    refused.append((url, method, response.status_code))
            elif response.status_code < 400 or (response.status_code == 403 and "/adapter/" in url):
                reached.add(route)
    assert refused == []
    unreached = {r for r in tried if not owner_only(r, "GET")} - reached
    assert unreached == set()
    assert len(tried) >= 40


def test_a_removed_member_gets_404_in_pages_and_401_from_the_api(member_client, member_api, project, member, owners_objects):
    remove_member(project, member)
    for route in project_routes():
        for object_id in sorted(owners_objects):
            url = fill(route, object_id) or plain(route)
            if url.startswith("/api/"):
                response = member_api.get(url)
                assert response.status_code == 401, (url, response.status_code)
                continue
            response = member_client.get(url)
            if response.status_code == 405:
                response = member_client.post(url)
            if fill(route, object_id):
                assert response.status_code in ({404, 403} if "/adapter/" in url else {404}), (url, response.status_code)


# Open to an anonymous visitor, and why. Every other route answers them with
# the login page (dashboard, admin) or 401/403/404/405, whatever the method.
PUBLIC = {
    "signup/": "the way in",
    "login/": "the way in",
    "admin/login/": "the way in",
    "logout/": "logs nobody out",
    "admin/logout/": "logs nobody out",
    "billing/stripe/webhook": "Stripe's door, refused without a valid signature",
    "drivers/<slug:name>.git/<path:rest>": "the shipped driver repos: public and read-only",
    "api/schema/": "describes the API, holds no data",
    "api/docs/": "describes the API, holds no data",
    "docs/": "the documentation site: what the repository's docs/ says",
    "docs/<path:path>": "the documentation site: what the repository's docs/ says",
    "verify-email/<str:token>/": "a mailed link: its signed token names the account and address",
    "password-reset/": "the way back in: says the same whether an address is known",
    "password-reset/sent/": "the way back in",
    "reset/<uidb64>/<token>/": "the way back in: Django's signed reset link",
    "reset/done/": "the way back in",
}
ANONYMOUS_VALUES = {**PLACEHOLDERS, "name": "reference-agent", "rest": "info/refs", "app_label": "core", "url": "core/apikey/"}
OBJECT_ID_NAMES = {"pk", "run_id", "other", "id", "object_id"}
ADMIN_MODEL = re.compile(r"^admin/(\w+)/(\w+)/")


def anonymous_url(route: str, object_id, values: dict) -> str:
    def value(name, converter=""):
        return str(object_id) if converter == "int" or name in OBJECT_ID_NAMES else values[name]

    path = REGEX_GROUP.sub(lambda m: value(m.group(1)), route)
    path = CONVERTER.sub(lambda m: value(m.group(2), m.group(1) or ""), path)
    return "/" + path.replace("^", "").replace("$", "").replace("\\.", ".")


def names_an_object(route: str) -> bool:
    return any(c == "int" or n in OBJECT_ID_NAMES for c, n in CONVERTER.findall(route)) or bool(set(REGEX_GROUP.findall(route)) & OBJECT_ID_NAMES)


def existing_ids(route: str, owners_objects) -> list:
    """Ids of objects that exist: the model's own for an admin page, else each of the owner's objects."""
    if match := ADMIN_MODEL.match(route):
        from django.apps import apps

        # A model with no row yet (django-q's, say) is still tried: the admin refuses before any lookup.
        model = apps.get_model(*match.groups())
        return [model.objects.order_by("pk").values_list("pk", flat=True).first() or 1]
    return sorted(owners_objects)


def test_an_anonymous_visitor_gets_nothing_from_any_route_or_method(owner, owners_objects):
    from django.contrib.contenttypes.models import ContentType

    from billing.models import CouponBatch

    CouponBatch.objects.create(name="b", count=1, amount_cents=100)  # so the admin's batch CSV has one to name
    # The admin's view-on-site link names a content type and an object of it.
    values = {**ANONYMOUS_VALUES, "content_type_id": str(ContentType.objects.get_for_model(Harness).pk)}
    anonymous = Client(raise_request_exception=False)  # a 500 is listed with the rest
    answered, wrong = set(), []
    for route in routes(get_resolver().url_patterns):
        if "(?P<format>" in route:
            continue  # DRF's format-suffix twin of another route
        ids = existing_ids(route, owners_objects) if names_an_object(route) else [None]
        for object_id in ids:
            url = anonymous_url(route, object_id, values)
            for method in ["get", "post", "put", "patch", "delete"]:
                response = getattr(anonymous, method)(url)
                code = response.status_code
                if route in PUBLIC:
                    ok = code < 500
                elif code in {301, 302}:
                    ok = response["Location"].split("?")[0] in {"/login/", "/admin/login/"}
                else:
                    ok = code in {401, 403, 404, 405}
                if not ok:
                    wrong.append((method.upper(), url, code))
            answered.add(route)
    assert wrong == []
    assert len(answered) >= 300  # every route: the dashboard's, the API's and every admin page


# Every query parameter and posted field a view reads, found in the apps' sources, so a new one is swept too.
READ_PARAMETER = re.compile(r"""(?:GET|query_params|params)\.get(?:list)?\(["'](\w+)["']""")
READ_FIELD = re.compile(r"""POST(?:\.get(?:list)?\(|\[)["'](\w+)["']""")
APPS = ("belvedir", "harnesses", "evals", "billing", "traces", "finetunes")
# Not what any field takes: a word, a number past every integer column, an impossible time (Django's parsers
# raise on a well-formed one). Each value costs a pass over every page (~2 s): these found the 500s that a
# one-at-a-time probe (every parameter alone, nine values, 31,239 requests, 9 minutes) found.
# "²" and "٣" are digits to isdigit() (and isdecimal()), which int() refuses or reads as another number.
HOSTILE_VALUES = ["abc", "1" + "0" * 23, "2026-13-45T25:00:00", "²", "٣", "0x1f"]


def names_read(pattern: re.Pattern) -> set[str]:
    root = Path(__file__).resolve().parent.parent
    return {name for app in APPS for path in (root / app).rglob("*.py") for name in pattern.findall(path.read_text())}


def test_no_query_parameter_value_makes_a_page_the_owner_reaches_answer_500(owner_client, api, owners_objects):
    names = names_read(READ_PARAMETER)
    assert {"limit", "since", "before", "q", "after", "page_size"} <= names  # the scan finds them
    reached, failed = 0, []
    for route in project_routes():
        urls = [fill(route, i) for i in sorted(owners_objects)] if fill(route, 1) else [plain(route) + QUERIES.get(route, "")]
        for url in urls:
            client = api if url.startswith("/api/") else owner_client
            if client.get(url).status_code >= 400:
                continue  # another kind's id, or a route for other methods
            reached += 1
            for value in HOSTILE_VALUES:
                # Every parameter at once: one request per value keeps the sweep to seconds.
                query = "&".join(f"{name}={quote(value)}" for name in sorted(names) if f"{name}=" not in url)
                try:
                    with transaction.atomic():  # a database error then spoils this request alone
                        code = client.get(f"{url}{'&' if '?' in url else '?'}{query}").status_code
                except Exception as exc:  # the test client raises what the view raised
                    code = f"{type(exc).__name__}: {exc}"
                if code == 500 or isinstance(code, str):
                    failed.append((url, value[:20], code))
    assert failed == []
    assert reached >= 60


def test_no_posted_field_value_makes_a_dashboard_form_the_owner_reaches_answer_500(owner_client, owners_objects):
    names = names_read(READ_FIELD)
    assert {"row_index", "score", "max_cost", "next", "repeats"} <= names  # the scan finds them
    posted, failed = 0, []
    for route in project_routes():
        if route.startswith("api/"):
            continue  # the API's bodies go through serializers, and test_schema_fuzz.py
        urls = [fill(route, i) for i in sorted(owners_objects)] if fill(route, 1) else [plain(route) + QUERIES.get(route, "")]
        for url in urls:
            view = inspect.unwrap(resolve(url.split("?")[0]).func)
            if not READ_FIELD.search(inspect.getsource(view)):
                continue  # its fields go through a form, which says what is wrong with them
            for value in HOSTILE_VALUES + ["nan", "inf", "-1"]:  # and what a budget or a grade must not be
                try:
                    with transaction.atomic():
                        code = owner_client.post(url, dict.fromkeys(names, value)).status_code
                        transaction.set_rollback(True)  # each post meets the owner's objects as they were
                except Exception as exc:  # the test client raises what the view raised
                    code = f"{type(exc).__name__}: {exc}"
                posted += code != 404
                if code == 500 or isinstance(code, str):
                    failed.append((url, value[:20], code))
    assert failed == []
    assert posted >= 30
