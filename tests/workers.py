"""Worker machines for tests and benches: real `manage.py qcluster` processes, one process group per machine.

A machine runs the cluster of each queue it is given (`belvedir`: paid runs,
the default cluster; `evals`: `Q_CLUSTER_NAME=evals`), as
docs/running/production.md runs them. Killing the group with SIGKILL is what a
machine that loses its power does: every cluster process and worker dies at
once, with whatever tasks they had taken from Redis.
"""

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RUNS, EVALS = "belvedir", "evals"


class WorkerMachine:
    def __init__(self, name: str, env: dict, log_dir: Path, queues=(RUNS, EVALS)):
        self.name = name
        # INFO: wait_ready() reads the clusters' "running." lines.
        self.env = {**env, "LOG_LEVEL": "INFO"}
        self.queues = queues
        self.log = log_dir / f"worker-{name}.log"
        self.process: subprocess.Popen | None = None

    def start(self) -> "WorkerMachine":
        qcluster = f"{shlex.quote(sys.executable)} manage.py qcluster"
        commands = [qcluster if queue == RUNS else f"Q_CLUSTER_NAME={queue} {qcluster}" for queue in self.queues]
        with open(self.log, "ab") as log:
            # SIGTERM goes to the clusters' main processes only, as django-q2
            # expects: each then stops its own pusher and workers in order.
            script = "trap 'kill -TERM $(jobs -p); wait' TERM; " + " & ".join(commands) + " & wait"
            self.process = subprocess.Popen(
                ["bash", "-c", script],
                cwd=REPO,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    def wait_ready(self, timeout: float = 120):
        """Until every cluster of this machine says it is running."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.alive(), f"worker {self.name} exited:\n{self.output()}"
            if self.output().count(" running.") >= len(self.queues):
                return
            time.sleep(0.3)
        raise AssertionError(f"worker {self.name} did not start in {timeout} s:\n{self.output()}")

    def alive(self) -> bool:
        """Whether any process of this machine still lives (zombies waiting for a parent's wait() do not)."""
        self.process.poll()  # reaps the shell once it has exited
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                # "pid (comm) state ppid pgrp …": comm may hold spaces, so split after its ")".
                state, _, pgrp = stat.read_text().rsplit(")", 1)[1].split()[:3]
            except (OSError, ValueError):
                continue  # gone meanwhile
            if int(pgrp) == self.process.pid and state != "Z":
                return True
        return False

    def kill(self):
        """SIGKILL to the whole machine: no cluster or worker gets to clean up."""
        os.killpg(self.process.pid, signal.SIGKILL)
        assert self._wait_gone(30), f"worker {self.name} survived SIGKILL"

    def stop(self, timeout: float = 60):
        """SIGTERM, as a service manager stops a worker (clusters finish their tasks), then SIGKILL past `timeout`."""
        if self.process is None or not self.alive():
            return
        self.process.send_signal(signal.SIGTERM)
        if not self._wait_gone(timeout):
            self.kill()

    def _wait_gone(self, timeout) -> bool:
        deadline = time.monotonic() + timeout
        while self.alive():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True

    def output(self, tail: int = 6000) -> str:
        return self.log.read_text(errors="replace")[-tail:] if self.log.exists() else ""
