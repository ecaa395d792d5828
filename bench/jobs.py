"""Agent task jobs: a trial's overhead over a bare `docker run`, and the wall time of a 10 × 2 × 5 job.

Part `overhead` (per runtime, --repeats each, alternated, in the same run on the same machine):
- bare: `docker run --rm --runtime R --network none IMAGE bash -c 'mkdir -p /tmp/v && echo 1 > /tmp/v/r && cat /tmp/v/r'`,
  the container started, a verifier-sized command run and the container removed, the image ready;
- trial: `run_trial(task, "nop")` on a shipped task (upper-names): its row, the host lease, the sandbox with its
  writable folders, the environment's files in, the agent's phase (nothing), every process killed, the verifier's
  folders emptied and its files in, the verifier run, the reward read, the sandbox removed, the row ended.
The figure is the median trial minus the median bare run (the issue's target: at most +1 s). The same again for
Harbor's hello task (examples/harbor-format/hello: FROM python:3.11-slim and a RUN line), whose image is built
from its recipe: the first trial's build is timed on its own, then each trial against a bare run of the built
image (the trial also copies the build's /app into its writable /app).

Part `job`: the ten shipped tasks × oracle and nop × 5 attempts (100 trials) through the job's own path (advance,
claim and charge, run, settle) with --workers queue workers in threads and a host of that many places, under the
engine's default runtime: its wall time, and the sum of its trials' own walls (what one worker would take). Then
the same job regraded by the same version through the regrade's own path (its grades sent, claimed, charged,
graded from the kept outputs in a sandbox each): its wall as a share of the job's (the issue's target: 10%).

Part `sealed`: what a sealed verifier costs over an in-place one, per trial: each of the ten shipped tasks (sealed,
each declaring its outputs) and the same task with `mode = "in_place"`, the oracle on each, alternated, --repeats
each, per runtime: the median trial of each and their difference (the issue's target: at most +1 s).

Usage: DEBUG=1 .venv/bin/python bench/jobs.py [--part overhead|job|sealed|all] [--repeats 10] [--workers 2]
It uses a throwaway PostgreSQL database (bench/throwaway.py) and the Docker engine and image of `make test`.
"""

import argparse
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from throwaway import throwaway_database  # noqa: E402

EXAMPLES = ROOT / "examples" / "tasks"


def bare(image: str, runtime: str) -> float:
    started = time.monotonic()
    script = "mkdir -p /tmp/v && echo 1 > /tmp/v/r && cat /tmp/v/r"
    subprocess.run(["docker", "run", "--rm", "--runtime", runtime, "--network", "none", image, "bash", "-c", script], check=True, capture_output=True)
    return time.monotonic() - started


def examples(project, owner):
    from agent_tasks.actions import import_task_set

    files = {f"tasks/{p.relative_to(EXAMPLES).as_posix()}": p.read_bytes() for p in sorted(EXAMPLES.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}
    return import_task_set(project, owner, "examples", files)[0]


def hello(project, owner):
    from agent_tasks.actions import import_task_set

    folder = ROOT / "examples" / "harbor-format" / "hello"
    files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    return import_task_set(project, owner, "hello", files, single_name="hello")[0].tasks.get()


def overhead(version, repeats: int):
    from django.conf import settings

    overhead_of(version.tasks.get(name="upper-names"), settings.SANDBOX_IMAGE, repeats)


def build_overhead(task, repeats: int):
    import docker
    from django.conf import settings

    from agent_tasks.environment import resolve
    from agent_tasks.trials import run_trial
    from belvedir.sandbox import images
    from belvedir.sandbox.backends.docker import DockerBackend

    recipe = resolve(task.files("environment")).recipe(task.build_timeout_sec)
    tag = images.tag_for(DockerBackend(settings.SANDBOX_DOCKER_URL), recipe)
    client = docker.from_env()
    try:
        client.images.remove(tag, force=True)
    except docker.errors.ImageNotFound:
        pass
    started = time.monotonic()
    first = run_trial(task, "nop")
    print(f"hello: the first trial, its image built ({len(recipe.steps)} steps), took {time.monotonic() - started:.2f} s; {first.status}")
    overhead_of(task, tag, repeats)


def overhead_of(task, image: str, repeats: int):
    from agent_tasks.trials import run_trial

    for runtime in ("runc", "runsc"):
        bare(image, runtime)  # warm: the first start of a runtime pays for its binaries
        run_trial(task, "nop", runtime_wanted=runtime)
        bares, trials = [], []
        for _ in range(repeats):
            bares.append(bare(image, runtime))
            started = time.monotonic()
            trial = run_trial(task, "nop", runtime_wanted=runtime)
            trials.append(time.monotonic() - started)
            assert trial.status == "succeeded" and trial.reward == 0.0, trial.error
        b, t = statistics.median(bares), statistics.median(trials)
        print(
            f"{task.name}, {runtime}: bare docker run median {b:.2f} s (min {min(bares):.2f}), trial median {t:.2f} s (min {min(trials):.2f}): "
            f"overhead {t - b:+.2f} s, {t / b:.2f}x the bare run ({repeats} each, alternated)"
        )


class Queue:
    """The queue of `module` (its async_task), drained by `workers` threads running `task` until `pending()` is empty."""

    def __init__(self, module, task, workers: int):
        self.sent: list[int] = []
        self.lock = threading.Condition()
        self.task, self.workers = task, workers
        module.async_task = self.send

    def send(self, name, pk, **kwargs):
        with self.lock:
            self.sent.append(pk)
            self.lock.notify_all()

    def drain(self, pending):
        from django.db import connection

        def worker():
            try:
                while True:
                    with self.lock:
                        while not self.sent:
                            if not pending():
                                return
                            self.lock.wait(0.5)
                        pk = self.sent.pop(0)
                    self.task(pk)
            finally:
                connection.close()

        threads = [threading.Thread(target=worker) for _ in range(self.workers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()


def job(version, project, owner, workers: int):
    from agent_tasks import jobs, regrades
    from agent_tasks.models import Grade, Trial
    from belvedir.sandbox.models import SandboxHost
    from billing.actions import grant_credit
    from billing.models import Account

    SandboxHost.objects.filter(name="bench").update(capacity=workers)
    grant_credit(Account.for_project(project), 100_000, "bench", owner)
    queue = Queue(jobs, jobs.run_job_trial, workers)
    started = time.monotonic()
    made = jobs.create_job(project, owner, version=version, agents=["oracle", "nop"], attempts=5, budget_cents=100_000)
    total = made.trials.count()
    queue.drain(lambda: Trial.objects.filter(job=made).exclude(status__in=Trial.ENDED).exists())
    wall = time.monotonic() - started
    made.refresh_from_db()
    trials = list(made.trials.all())
    own = sum((t.finished_at - t.started_at).total_seconds() for t in trials if t.started_at and t.finished_at)
    by_status = {status: sum(1 for t in trials if t.status == status) for status in {t.status for t in trials}}
    print(
        f"job: 10 tasks x oracle, nop x 5 attempts = {total} trials, {workers} workers and host places: wall {wall:.1f} s "
        f"({wall / total:.2f} s a trial); the trials' own walls add up to {own:.1f} s ({own / wall:.2f}x the job's wall); {by_status}; job {made.status}"
    )
    queue = Queue(regrades, regrades.run_grade, workers)
    started = time.monotonic()
    regrade = regrades.start(made, version, owner)
    queue.drain(lambda: Grade.objects.filter(regrade=regrade).exclude(status__in=Grade.ENDED).exists())
    regraded = time.monotonic() - started
    found = regrades.comparison(regrade)
    print(
        f"regrade of that job by the same version: {found['counts']['succeeded']} graded, {found['counts']['skipped']} skipped, "
        f"{found['counts']['errored']} errored, {len(found['moved'])} moved; wall {regraded:.1f} s = {regraded / wall:.1%} of the job's wall"
    )


def sealed(project, owner, repeats: int):
    """The oracle on each shipped task, sealed (as shipped) and in place (the same task, its mode changed), alternated."""
    from agent_tasks.actions import import_task_set
    from agent_tasks.trials import run_trial

    files = {f"tasks/{p.relative_to(EXAMPLES).as_posix()}": p.read_bytes() for p in sorted(EXAMPLES.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}
    in_place = {path: data.replace(b'mode = "sealed"', b'mode = "in_place"') if path.endswith("task.toml") else data for path, data in files.items()}
    versions = {"sealed": import_task_set(project, owner, "sealed", files)[0], "in_place": import_task_set(project, owner, "in-place", in_place)[0]}
    for runtime in ("runc", "runsc"):
        times = {"sealed": [], "in_place": []}
        for name in sorted(versions["sealed"].tasks.values_list("name", flat=True)):
            tasks = {mode: version.tasks.get(name=name) for mode, version in versions.items()}
            run_trial(tasks["in_place"], "oracle", runtime_wanted=runtime)  # warm: the runtime's binaries, the page cache
            for _ in range(repeats):
                for mode in ("sealed", "in_place"):
                    started = time.monotonic()
                    trial = run_trial(tasks[mode], "oracle", runtime_wanted=runtime)
                    times[mode].append(time.monotonic() - started)
                    assert (trial.status, trial.reward, trial.verifier_mode) == ("succeeded", 1.0, mode), (name, mode, trial.error)
        s, i = statistics.median(times["sealed"]), statistics.median(times["in_place"])
        print(
            f"sealed against in place, {runtime}: the oracle on the ten shipped tasks, {repeats} each, alternated: median trial sealed {s:.2f} s, "
            f"in place {i:.2f} s: sealed costs {s - i:+.2f} s a trial ({s / i:.2f}x)"
        )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--part", choices=["overhead", "job", "sealed", "all"], default="all")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    with throwaway_database("belvedir_bench_jobs"):
        from django.conf import settings

        from belvedir.core.actions import create_account
        from belvedir.sandbox.models import SandboxHost

        SandboxHost.objects.update(enabled=False)
        SandboxHost.objects.create(name="bench", url=settings.SANDBOX_DOCKER_URL, capacity=args.workers)

        owner = create_account(username="bench", password="bench-password-1")
        project = owner.memberships.get().project
        version = examples(project, owner)
        if args.part in ("overhead", "all"):
            overhead(version, args.repeats)
            build_overhead(hello(project, owner), args.repeats)
        if args.part in ("sealed", "all"):
            sealed(project, owner, max(1, args.repeats // 3))
        if args.part in ("job", "all"):
            job(version, project, owner, args.workers)


if __name__ == "__main__":
    main()
