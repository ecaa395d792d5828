"""HumanEval scoring in real containers: canonical solutions pass, hostile completions fail alone."""

import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from belvedir.sandbox.models import SandboxHost
from evals.actions import create_eval
from evals.benchmarks import humaneval
from evals.code_sandbox import CodeSandbox
from evals.models import Deployment, Sample
from evals.tasks import run_eval

from .fakes.openai_server import FakeOpenAI

pytestmark = pytest.mark.docker

CANONICAL = {row["input"]: row["reference"] for row in humaneval.rows()}

HOSTILE = {
    "fork bomb": "import os\nwhile True:\n    os.fork()\n",
    "10 GB": "x = bytearray(10 * 1024 ** 3)\n",
    "sleeps forever": "import time\ntime.sleep(10 ** 6)\n",
    "escapes its session and sleeps": "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(10 ** 6)\ntime.sleep(10 ** 6)\n",
    "fills the disk": "f = open('big', 'wb')\nwhile True:\n    f.write(b'0' * (1 << 20))\n",
    "prints without end": "while True:\n    print('x' * 1000)\n",
    "tries the network": "import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=2)\n",
    "reads other samples": (
        "import glob, os\nmine = os.getcwd()\n"
        "others = [p for p in glob.glob('/tmp/bv-sample-*') if not mine.startswith(p)]\n"
        "assert others, 'no other sample to read'\n"
        "for p in others:\n    open(os.path.join(p, 'program.py')).read()\n"
    ),
    "kills other samples": (
        "import os, signal\nfor pid in os.listdir('/proc'):\n    if pid.isdigit() and int(pid) != os.getpid():\n"
        "        try:\n            os.kill(int(pid), signal.SIGKILL)\n        except OSError:\n            pass\nraise SystemExit(1)\n"
    ),
}
# Honest samples that run alongside: each must get exactly its own result.
HONEST = {f"pass {i}": ("import time\ntime.sleep(1.5)\nassert sum(range(10)) == 45\n", True) for i in range(6)} | {
    f"fail {i}": ("import time\ntime.sleep(1.5)\nassert 1 == 2\n", False) for i in range(4)
}


def test_hostile_completions_fail_alone(docker_url):
    programs = {**{k: v for k, v in HOSTILE.items()}, **{k: v for k, (v, _) in HONEST.items()}}
    with CodeSandbox("hostile", docker_url, slots=4, timeout=4) as sandbox:
        # Honest samples interleaved with hostile ones, several at once.
        order = [name for pair in zip(list(HONEST), list(HOSTILE)) for name in pair] + list(HONEST)[len(HOSTILE):] + list(HOSTILE)[len(HONEST):]
        with ThreadPoolExecutor(4) as pool:
            results = dict(zip(order, pool.map(lambda name: sandbox.run(programs[name]), order)))
        for name, (_, should_pass) in HONEST.items():
            assert results[name][0] is should_pass, (name, results[name])
        for name in HOSTILE:
            assert results[name][0] is False, (name, results[name])
        assert "Timed out" in results["sleeps forever"][1]
        assert "Timed out" in results["escapes its session and sleeps"][1]
        assert "MemoryError" in results["10 GB"][1]
        if "no other sample" not in results["reads other samples"][1]:
            assert "PermissionError" in results["reads other samples"][1]
        # The sandbox is still healthy afterwards, and nothing of the hostile ones
        # lingers: each slot's uid runs its runner and nothing else.
        assert sandbox.run("assert True\n") == (True, "")
        uids = [int(u) for u in sandbox.sandbox.exec("ps -eo uid=", timeout=30).output.split()]
        per_uid = {uid: uids.count(uid) for uid in uids if uid >= 20000}
        assert per_uid and max(per_uid.values()) == 1, per_uid


KILLER_THAT_COUNTS = (
    "import os, signal\nrunning = 0\n"
    "for pid in os.listdir('/proc'):\n"
    "    if pid.isdigit() and os.stat(f'/proc/{pid}').st_uid != os.getuid():  # its own runner stays, to report\n"
    "        try:\n            running += b'program.py' in open(f'/proc/{pid}/cmdline', 'rb').read()\n        except OSError:\n            pass\n"
    "        try:\n            os.kill(int(pid), signal.SIGKILL)\n        except OSError:\n            pass\n"
    "raise SystemExit(f'saw {running} other samples running')\n"
)


def test_a_sample_that_kills_others_while_they_run_fails_alone(docker_url):
    import time

    honest = "import time\ntime.sleep(4)\nassert sum(range(10)) == 45\n"
    with CodeSandbox("killer", docker_url, slots=4, timeout=15) as sandbox:
        with ThreadPoolExecutor(4) as pool:
            running = [pool.submit(sandbox.run, honest) for _ in range(3)]
            time.sleep(1.5)  # the honest samples are mid-run now
            killer = pool.submit(sandbox.run, KILLER_THAT_COUNTS).result()
            results = [future.result() for future in running]
    # The killer really ran alongside the honest ones (it saw them)...
    assert killer[0] is False and int(re.search(r"saw (\d+) other samples running", killer[1])[1]) >= 3, killer
    # ...and could not touch them: each passed.
    assert results == [(True, "")] * 3, results


@pytest.mark.django_db(transaction=True)
def test_all_164_canonical_solutions_pass_through_an_eval(project, owner, settings):
    SandboxHost.objects.get_or_create(name="local", defaults={"docker_url": settings.SANDBOX_DOCKER_URL, "capacity": 4})
    with FakeOpenAI(answer=lambda prompt: CANONICAL[prompt]) as fake:
        deployment = Deployment.objects.create(project=project, name="oracle", base_url=fake.url, model="oracle")
        ev = create_eval(project, owner, deployment=deployment, benchmark="humaneval")
        run_eval(ev.pk)
    ev.refresh_from_db()
    assert (ev.status, ev.total, ev.done_count, ev.error_count, ev.score) == ("succeeded", 164, 164, 0, 1.0)


@pytest.mark.django_db(transaction=True)
def test_wrong_completions_fail_and_a_dead_sandbox_counts_as_errors(project, owner, settings):
    SandboxHost.objects.get_or_create(name="local", defaults={"docker_url": settings.SANDBOX_DOCKER_URL, "capacity": 4})
    with FakeOpenAI(answer=lambda prompt: "```python\n    return None\n```") as fake:
        deployment = Deployment.objects.create(project=project, name="wrong", base_url=fake.url, model="wrong")
        ev = create_eval(project, owner, deployment=deployment, benchmark="humaneval", sample_limit=8)
        run_eval(ev.pk)
    ev.refresh_from_db()
    assert (ev.done_count, ev.error_count, ev.score) == (8, 0, 0.0)
    assert Sample.objects.filter(eval=ev).exclude(extracted="").count() == 8  # each says why it failed

    SandboxHost.objects.update(docker_url="unix:///tmp/no-docker-here.sock")
    with FakeOpenAI(answer=lambda prompt: CANONICAL[prompt]) as fake:
        deployment = Deployment.objects.create(project=project, name="oracle2", base_url=fake.url, model="oracle")
        broken = create_eval(project, owner, deployment=deployment, benchmark="humaneval", sample_limit=3)
        run_eval(broken.pk)
    broken.refresh_from_db()
    assert broken.status == "failed" and "sandbox could not start" in broken.status_message
