import subprocess
import textwrap
import time

from django.conf import settings
from django.utils import timezone

from billing.actions import post_entry
from billing.models import Account
from harnesses.models import Harness, Run


def make_repo(path, files: dict[str, str]) -> str:
    """A real git repo with one commit; returns its HEAD SHA."""
    path.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        (path / name).write_text(textwrap.dedent(content))
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", "-C", str(path)]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "harness"], check=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()


def fund(project, cents=10_000):
    post_entry(Account.for_project(project), kind="adjustment", amount_cents=cents, reference=f"fund:{project.pk}:{time.time_ns()}", memo="test")


def harness(project, owner, repo_path, *, run_command="python3 run.py", install_command="true", **extra) -> Harness:
    return Harness.objects.create(
        project=project,
        created_by=owner,
        name=extra.pop("name", "test harness"),
        repo_url=str(repo_path),
        install_command=install_command,
        run_command=run_command,
        **extra,
    )


def wait_for(predicate, timeout=60, interval=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(interval)
    raise AssertionError("condition not met in time")


def run_status(run) -> str:
    return Run.objects.values_list("status", flat=True).get(pk=run.pk)


def now():
    return timezone.now()


def remove_image(tag: str):
    """An image a test built, gone from the engine: the next run builds it again rather than finding it."""
    import docker

    client = docker.DockerClient(base_url=settings.SANDBOX_DOCKER_URL)
    try:
        client.images.remove(tag, force=True)
    except docker.errors.ImageNotFound:
        pass
    finally:
        client.close()
