import contextlib
import graphlib
import os
import time

import pytest
from django.conf import settings
from django.test import Client

from belvedir.core.actions import create_account
from belvedir.core.models import ApiKey
from belvedir.sandbox.backends import docker_engine, fake
from belvedir.sandbox.backends.docker import DockerBackend
from belvedir.sandbox.errors import DockerUnavailable

from .concurrency import start_thread

# Live-server request threads would otherwise keep their connections for
# CONN_MAX_AGE seconds, and the test database could not be dropped at the end.
settings.DATABASES["default"]["CONN_MAX_AGE"] = 0
# Tests may put sandbox hosts on the fake backend (the contract suite does);
# the fast tier (scripts/test.sh --fast) puts every host there that names no
# backend, the migrated `local` host included: set before the test database is made.
settings.SANDBOX_ALLOW_FAKE_BACKEND = True
settings.SANDBOX_DEFAULT_BACKEND = os.environ.get("BELVEDIR_TEST_SANDBOX_BACKEND", settings.SANDBOX_DEFAULT_BACKEND)
# pytest-xdist workers each have a test database of their own, so two of them
# number their runs and evals alike: their sandboxes get an instance label of
# their own too, or a worker's `eval:1` would take the other's container name
# and its reaper the other's containers.
if worker := os.environ.get("PYTEST_XDIST_WORKER"):
    settings.SANDBOX_INSTANCE = f"{settings.SANDBOX_INSTANCE}-{worker}"


# A test using one of these starts a server or the platform's own processes: marked `processes`, out of the fast tier.
PROCESS_FIXTURES = {"live_server", "subprocess_env", "egress_proxy"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.processes)


@pytest.fixture(autouse=True)
def _fast_hasher(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _trace_batches_stored_inline(settings):
    """Ingest stores each accepted batch inside its request, so a test reads spans right after posting.

    Tests of the asynchronous path (and the real-client tests, which start
    `manage.py process_trace_batches` beside their server) turn this off.
    """
    settings.TRACE_INGEST_INLINE = True


@pytest.fixture
def held_rate_window(time_machine):
    """The clock held in the middle of the rate limits' current window: a test that counts attempts against a limit
    per minute would otherwise see its count start again when its attempts straddle a minute (seen: 11 logins
    on a loaded machine, the last one allowed)."""
    from belvedir.core import throttle

    time_machine.move_to((time.time() // throttle.WINDOW_SECONDS + 0.5) * throttle.WINDOW_SECONDS, tick=False)


@pytest.fixture
def loopback_deployments(settings):
    """Deployments and judges on loopback allowed, as `make run` allows them: the fake model servers listen on 127.0.0.1.

    Off otherwise (the production default, pinned in pytest.ini), so a test
    that does not ask for it sees the refusal.
    """
    settings.EVAL_ALLOW_PRIVATE_URLS = True


@pytest.fixture
def owner(db):
    return create_account(username="alice", password="pw-alice-123", email="alice@example.com")


@pytest.fixture
def outsider(db):
    return create_account(username="mallory", password="pw-mallory-123")


@pytest.fixture
def project(owner):
    return owner.memberships.get().project


@pytest.fixture
def member(project):
    """A second user working in the owner's project with the role member (and their own project besides)."""
    from belvedir.core.models import Membership

    user = create_account(username="bob", password="pw-bob-123", email="bob@example.com")
    Membership.objects.create(project=project, user=user, role=Membership.Role.MEMBER)
    return user


@pytest.fixture
def member_client(member, project):
    client = Client()
    client.force_login(member)
    session = client.session
    session["project_id"] = project.pk
    session.save()
    return client


@pytest.fixture
def member_api(member, project):
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {ApiKey.issue(project=project, user=member, name='member')[1]}")
    return client


@pytest.fixture
def outsider_project(outsider):
    return outsider.memberships.get().project


@pytest.fixture
def api_key(owner, project):
    return ApiKey.issue(project=project, user=owner, name="test")[1]


@pytest.fixture
def api(api_key):
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key}")
    return client


@pytest.fixture
def outsider_api(outsider, outsider_project):
    from rest_framework.test import APIClient

    client = APIClient()
    raw = ApiKey.issue(project=outsider_project, user=outsider, name="outsider")[1]
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


@pytest.fixture
def owner_client(owner):
    client = Client()
    client.force_login(owner)
    return client


@pytest.fixture
def staff_client(owner):
    owner.is_staff = owner.is_superuser = True
    owner.save()
    client = Client()
    client.force_login(owner)
    return client


@pytest.fixture
def outsider_client(outsider):
    client = Client()
    client.force_login(outsider)
    return client


@pytest.fixture
def docker_url():
    return settings.SANDBOX_DOCKER_URL


@pytest.fixture
def docker_backend(docker_url):
    return DockerBackend(docker_url)


@pytest.fixture
def subprocess_env(settings):
    """Environment for a `manage.py` subprocess that works on this test's database."""
    from .servers import subprocess_environ

    return subprocess_environ()


APPEND_ONLY_TABLES = {"billing_ledgerentry"}


def _referenced_tables_first() -> list[str]:
    from django.apps import apps

    graph = graphlib.TopologicalSorter()
    for model in apps.get_models(include_auto_created=True):
        table = model._meta.db_table
        graph.add(table)
        for field in model._meta.concrete_fields:
            target = field.related_model
            if target is not None and target._meta.db_table != table:
                graph.add(table, target._meta.db_table)
    return list(graph.static_order())


@pytest.fixture(scope="session", autouse=True)
def _transactional_tests_empty_tables_with_delete():
    """After each transactional test, the tables are emptied with DELETE instead of TRUNCATE.

    TRUNCATE gives each of the ~50 tables new files, synced at commit: about
    1 s per flush on the test machine, against 0.05 s to DELETE the few rows
    a test leaves, for each of ~180 transactional tests. Every foreign key
    here is deferrable, so the order does not matter. Sequences are not reset
    either way; a flush that asks for it (reset_sequences) still truncates.
    The ledger refuses DELETE in the database (billing 0006), so its table is
    truncated, which is no row change: nothing references a ledger entry.

    Referenced tables are emptied before the tables that reference them. A
    process the test started may still be writing (the egress proxy records
    a grant's counts up to half a second late): emptied children first, its
    new destination row could commit between the two DELETEs and fail the
    flush at COMMIT on the grant it references. Parents first, its foreign
    key check waits on the deleted grant and fails in that process instead.
    """
    from django.db.backends.postgresql.operations import DatabaseOperations

    truncate = DatabaseOperations.sql_flush
    order = {table: place for place, table in enumerate(_referenced_tables_first())}

    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if reset_sequences or allow_cascade or not tables:
            return truncate(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        tables = sorted(tables, key=lambda table: order.get(table, len(order)))
        empty = [f"TRUNCATE {self.quote_name(t)}" if t in APPEND_ONLY_TABLES else f"DELETE FROM {self.quote_name(t)}" for t in tables]
        return ["SET CONSTRAINTS ALL DEFERRED", *empty]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(DatabaseOperations, "sql_flush", sql_flush)
        yield


@pytest.fixture(scope="session", autouse=True)
def _no_sandbox_left_from_an_earlier_session():
    """A session stopped mid-test (Ctrl-C, a killed CI job) leaves its stopped sandboxes; a new one owns none yet.

    Without this, one leftover container failed the teardown check below for
    every Docker test of the next session. Running ones are left: they may be
    another session's, on the same engine and database name.
    """
    try:
        for container in docker_engine.managed_containers(settings.SANDBOX_DOCKER_URL):
            if not container.running:
                docker_engine.remove_container(settings.SANDBOX_DOCKER_URL, container.name)
    except DockerUnavailable:
        pass  # no engine: the Docker tests say so themselves


@pytest.fixture(autouse=True)
def _no_sandbox_left_behind(request):
    """After every test, no sandbox of the fake backend remains, and after every test on Docker no container with Belvedir's labels."""
    yield
    left = fake.leftovers()
    fake.reset()  # one test's leftovers fail that test alone
    assert left == []
    on_docker = request.node.get_closest_marker("sandbox") and settings.SANDBOX_DEFAULT_BACKEND == "docker"
    if request.node.get_closest_marker("docker") or on_docker:
        assert docker_engine.managed_containers(settings.SANDBOX_DOCKER_URL) == []


@pytest.fixture
def worker(monkeypatch):
    """Stand in for the django-q2 worker: queued runs, evals, job trials and grades execute in threads, in-process."""
    from agent_tasks import jobs, regrades
    from evals import queue as eval_queue
    from evals.tasks import run_eval
    from harnesses import actions as harness_actions
    from harnesses.execution import execute_run

    threads = []

    def start(target, *args):
        threads.append(start_thread(target, *args))

    monkeypatch.setattr(eval_queue, "enqueue", lambda ev: start(run_eval, ev.pk))
    monkeypatch.setattr(harness_actions, "async_task", lambda name, pk, **kw: start(execute_run, pk))
    monkeypatch.setattr(jobs, "async_task", lambda name, pk, **kw: start(jobs.run_job_trial, pk))
    monkeypatch.setattr(regrades, "async_task", lambda name, pk, **kw: start(regrades.run_grade, pk))
    yield
    for thread in threads:
        thread.join(60)


# Besides the public internet, the test proxy allows this address: the
# "outside" servers tests run live here. The rest of loopback stays denied.
OUTSIDE_ADDRESS = "127.0.0.2"


@contextlib.contextmanager
def egress_proxy_process(socket_dir, base_url: str, **env):
    """A real egress proxy (`manage.py egress_proxy`) on the test database, its socket in socket_dir; yields its Popen.

    `env` sets the proxy's settings (BELVEDIR_* variables) over the test's own environment.
    """
    import subprocess
    import sys
    import threading
    from pathlib import Path

    from .servers import subprocess_environ

    env = {
        **subprocess_environ(),
        "BELVEDIR_EGRESS_SOCKET_DIR": str(socket_dir),
        "BELVEDIR_BASE_URL": base_url,
        "BELVEDIR_EGRESS_ALLOW_NETWORKS": f"{OUTSIDE_ADDRESS}/32",
        **env,
    }
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen([sys.executable, "manage.py", "egress_proxy"], cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = proc.stdout.readline()
        while line and "Egress proxy listening" not in line:
            line = proc.stdout.readline()
        assert proc.poll() is None, f"the egress proxy did not start: {line}"
        # Keep reading its output so it never blocks on a full pipe.
        threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
        yield proc
    finally:
        proc.terminate()
        proc.wait(15)


@pytest.fixture(scope="session")
def egress_proxy(live_server, django_db_setup, django_db_blocker, tmp_path_factory):
    """The real egress proxy for the whole session; its platform origin is the live server,
    so sandboxes reach FRACTAL_BASE_URL through it exactly as in production.
    """
    socket_dir = tmp_path_factory.mktemp("egress")
    # The tests' uploads (16 MB) fit a plain request's limit; the limit itself has its own proxy in test_egress.py.
    with egress_proxy_process(socket_dir, live_server.url, BELVEDIR_EGRESS_MAX_REQUEST_MB="32"):
        yield socket_dir


@pytest.fixture
def egress(settings, egress_proxy, live_server):
    """Harness sandboxes on the `egress` network through the session's proxy."""
    settings.HARNESS_SANDBOX_NETWORK = "egress"
    settings.EGRESS_SOCKET_DIR = egress_proxy
    settings.BELVEDIR_BASE_URL = live_server.url
    return egress_proxy
