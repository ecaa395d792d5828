"""Platform overhead of a harness run over a bare `docker run`, per runtime and network.

For each runtime (runc, runsc) and each harness network (none, egress),
measures, 20 times each, in the same run on the same machine:
- bare: `docker run --rm --runtime R --network none IMAGE date +%s.%N`, from
  just before the command to the timestamp it prints;
- platform: from pressing Run (`start_run`: charge, queue) through the worker
  (claim, host lease, clone, per-run key, sandbox launch, checkout copied in,
  install) to the first line of the run command (`date +%s.%N`), minus the
  clone and the install, which belong to the harness, not the platform;
- and where a run's time goes, median per phase, from the run's own stamps:
  pressed -> claimed (the worker's claim; the queue's hop is not in this bench,
  which calls the worker's function directly), claimed -> sandbox up (clone,
  run key, lease, container started, checkout copied in), the install command,
  the run command to its first line, first line -> final (the rest of the
  command, results.json read, the ledger), final -> worker done (the sandbox
  removed, the lease given back); and pressed -> worker done against a bare
  `docker run --rm` to its exit.

Usage: .venv/bin/python bench/run_overhead.py [--runs 20]
It uses a throwaway SQLite database under a temporary directory, and starts
its own egress proxy on it for the egress rows.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def p95(values):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="bv-bench-")
    os.environ.update(BELVEDIR_VAR_DIR=workdir, BELVEDIR_ALLOW_LOCAL_REPOS="1", DJANGO_SETTINGS_MODULE="belvedir.settings", LOG_LEVEL="WARNING")
    os.environ.pop("DATABASE_URL", None)
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from belvedir.core.actions import create_account
    from belvedir.sandbox.models import SandboxHost
    from billing.actions import grant_credit
    from billing.models import Account
    from harnesses.models import Harness

    user = create_account(username="bench", password=None)
    project = user.memberships.get().project
    grant_credit(Account.for_project(project), 100_000, "bench", user)
    repo_dir = Path(workdir) / "repo"
    repo_dir.mkdir()
    (repo_dir / "README").write_text("bench\n")
    git = ["git", "-c", "user.email=b@example.com", "-c", "user.name=b", "-C", str(repo_dir)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "bench"], check=True)
    harness = Harness.objects.create(project=project, name="bench", repo_url=str(repo_dir), install_command="true", run_command="date +%s.%N", created_by=user)

    proxy = subprocess.Popen(
        [sys.executable, "manage.py", "egress_proxy"],
        cwd=ROOT,
        env={**os.environ, "BELVEDIR_EGRESS_SOCKET_DIR": f"{workdir}/egress"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    settings.EGRESS_SOCKET_DIR = Path(f"{workdir}/egress")
    try:
        print(f"machine: {os.cpu_count()} CPUs, image {settings.SANDBOX_IMAGE}, {args.runs} runs each")
        for runtime in ("runc", "runsc"):
            SandboxHost.objects.update(runtime=runtime)
            bare, bare_total = bare_runs(runtime, settings.SANDBOX_IMAGE, args.runs)
            print(
                f"{runtime}: bare docker run     median {statistics.median(bare) * 1000:7.0f} ms   p95 {p95(bare) * 1000:7.0f} ms"
                f"   (to its exit, --rm: median {statistics.median(bare_total) * 1000:.0f} ms)"
            )
            for network in ("none", "egress"):
                settings.HARNESS_SANDBOX_NETWORK = network
                platform, phases = platform_runs(harness, user, repo_dir, args.runs)
                overhead = statistics.median(platform) - statistics.median(bare)
                print(
                    f"{runtime}: platform, {network:6s}   median {statistics.median(platform) * 1000:7.0f} ms   p95 {p95(platform) * 1000:7.0f} ms"
                    f"   overhead {overhead * 1000:5.0f} ms (target < 500 ms)   ratio {statistics.median(platform) / statistics.median(bare):.2f}x"
                )
                done = statistics.median(phases["pressed -> worker done, less clone"])
                print(
                    "    median ms: "
                    + ", ".join(f"{name} {statistics.median(values) * 1000:.0f}" for name, values in phases.items())
                    + f"; over a bare docker run --rm to its exit: +{(done - statistics.median(bare_total)) * 1000:.0f} ms"
                )
    finally:
        proxy.terminate()
        proxy.wait(10)


def bare_runs(runtime, image, runs):
    """Seconds to the command's first line, and to `docker run --rm`'s exit (the container removed)."""
    times, totals = [], []
    for _ in range(runs):
        started = time.time()
        out = subprocess.run(
            ["docker", "run", "--rm", "--runtime", runtime, "--network", "none", image, "date", "+%s.%N"], capture_output=True, text=True, check=True
        ).stdout
        totals.append(time.time() - started)
        times.append(float(out.split()[0]) - started)
    return times, totals


def platform_runs(harness, user, repo_dir, runs):
    from harnesses import repo
    from harnesses.actions import start_run
    from harnesses.execution import execute_run
    from harnesses.models import Run

    times, phases = [], {}
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as scratch:
            t = time.time()
            repo.clone(str(repo_dir), "", scratch + "/c", 60)
            clone_time = time.time() - t
        pressed = time.time()
        run = start_run(harness, user)
        execute_run(run.pk)
        done = time.time()
        run = Run.objects.get(pk=run.pk)
        assert run.status == "succeeded", (run.status, run.status_message, run.log_tail)
        first_line = float(next(line for line in run.log_tail.splitlines() if line[:1].isdigit()))
        install = (run.run_started_at - run.install_started_at).total_seconds()
        times.append(first_line - pressed - install - clone_time)
        stamps = [pressed, run.launched_at.timestamp(), run.install_started_at.timestamp(), run.run_started_at.timestamp(), first_line]
        stamps += [run.finished_at.timestamp(), done]
        names = ["pressed -> claimed", "claimed -> sandbox up", "install", "run to its first line", "first line -> final", "final -> worker done"]
        for name, start, end in zip(names, stamps, stamps[1:], strict=False):
            phases.setdefault(name, []).append(end - start)
        phases.setdefault("clone", []).append(clone_time)
        phases.setdefault("pressed -> worker done, less clone", []).append(done - pressed - clone_time)
    return times, phases


if __name__ == "__main__":
    main()
