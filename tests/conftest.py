import pytest
from django.conf import settings
from django.test import Client

from belvedir.core.actions import create_account
from belvedir.core.models import ApiKey

from .concurrency import start_thread

# Live-server request threads would otherwise keep their connections for
# CONN_MAX_AGE seconds, and the test database could not be dropped at the end.
settings.DATABASES["default"]["CONN_MAX_AGE"] = 0


@pytest.fixture(autouse=True)
def _fast_hasher(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


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
def outsider_client(outsider):
    client = Client()
    client.force_login(outsider)
    return client


@pytest.fixture
def docker_url():
    return settings.SANDBOX_DOCKER_URL


@pytest.fixture
def subprocess_env(settings):
    """Environment for a `manage.py` subprocess that works on this test's database
    (which it sees only with `django_db(transaction=True)`: no open transaction)."""
    import os

    db = settings.DATABASES["default"]
    return {
        **os.environ,
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        # The same installation as this process (it is named after the database URL it was started with).
        "BELVEDIR_INSTANCE": settings.SANDBOX_INSTANCE,
    }


@pytest.fixture(autouse=True)
def _no_sandbox_left_behind(request):
    """After every Docker test, no container with Belvedir's labels remains."""
    yield
    if request.node.get_closest_marker("docker"):
        from belvedir.sandbox.docker import managed_containers

        assert managed_containers(settings.SANDBOX_DOCKER_URL) == []


@pytest.fixture
def worker(monkeypatch):
    """Stand in for the django-q2 worker: queued runs and evals execute in threads, in-process."""
    from evals import actions as eval_actions
    from evals.tasks import run_eval
    from harnesses import actions as harness_actions
    from harnesses.execution import execute_run

    threads = []

    def start(target, *args):
        threads.append(start_thread(target, *args))

    monkeypatch.setattr(eval_actions, "enqueue", lambda ev: start(run_eval, ev.pk))
    monkeypatch.setattr(harness_actions, "async_task", lambda name, pk, **kw: start(execute_run, pk))
    yield
    for thread in threads:
        thread.join(60)
