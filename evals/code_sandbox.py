"""Running untrusted completions (humaneval) fast without giving up isolation.

A fresh `docker run` per sample costs about ten times the test itself, and
even a `docker exec` per sample costs more than most tests (about 85 ms of
engine work on this machine kind). So one locked-down container (network
none, memory and pids limits, read-only root, no capabilities) serves a whole
eval, with one long-lived runner per concurrency slot, fed samples through
its stdin; where the runtime wants it, one such container per slot (the
sandbox's `concurrency_per_sandbox`, `code_sandbox_layout`, `CodeSandboxes`).
Isolation between samples comes from the kernel:

- every slot has its own uid: a sample cannot signal, ptrace or read the
  files of a sample in another slot;
- the runner makes itself non-dumpable, so a sample of its own uid cannot
  ptrace it or read its memory, and forks each sample from itself (no
  interpreter start per sample). Outcomes do not travel on the runner's
  stdout: under gVisor a sample may open its same-uid runner's descriptors
  and write there. They go to a reporter under the platform's own uid,
  which takes an outcome only from the pid registered as the slot's runner,
  as the kernel stamps it on each datagram (`in_sandbox/reporter.py`). A
  sample holds no secret to steal, and its own words count for nothing;
- a sample can only kill its runner. A runner that dies or wedges is
  replaced (once everything of its uid is swept) and the sample retried
  once on the fresh one: only a sample that breaks a fresh runner too fails
  (an honest sample is never failed by a hiccup); a runner that cannot
  start is a platform error;
- each sample runs in its own session and private 0700 temp directory under
  rlimits: address space (a 10 GB allocation fails alone), processes per uid
  (a fork bomb stops at its own limit), file size (a disk or output flood is
  cut off), CPU seconds, open files; and a hard wall-clock timeout;
- after each sample the runner kills every other process of its uid
  (children that escaped the session too) and deletes every file its uid owns
  in the writable places, so nothing carries over to the slot's next sample.

A platform failure (the container gone, Docker down) raises
SandboxPlatformError, which the engine counts in error_count, never as a
failed sample.
"""

import base64
import itertools
import json
import math
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path

from django.conf import settings

from belvedir.sandbox.backend import Sandbox, Session, concurrency_per_sandbox
from belvedir.sandbox.egress import KEEPER_USER
from belvedir.sandbox.errors import SandboxError, SandboxPlatformError, SandboxTimeout
from belvedir.sandbox.owners import Owner
from belvedir.sandbox.spec import Limits, SandboxSpec

FIRST_UID = 20000
MEMORY_MB = 512  # each slot's address-space limit
SCRIPTS = Path(__file__).parent / "in_sandbox"
REPORTER_SOCKET = "/tmp/bv-reporter/socket"
START_SECONDS = 60  # for a runner or the reporter to come up, on a loaded host


def code_sandbox_spec(owner: Owner, *, slots: int, memory_mb: int = MEMORY_MB, runtime: str = "auto", part: int = 0) -> SandboxSpec:
    """The container a CodeSandbox of `slots` runners needs: no network, room and a CPU for every slot."""
    # Room for every slot's address-space limit, plus the runners and tmpfs.
    # A core per slot: with one core for all of them (the harness default),
    # gVisor's own work for 4 concurrent samples queued behind one core.
    limits = Limits.defaults(
        memory_mb=slots * memory_mb + 512, pids=slots * 64 + 32, tmp_mb=slots * 64, home_mb=16, cpus=slots * settings.HUMANEVAL_CPUS_PER_SLOT
    )
    return SandboxSpec(owner=owner, network="none", limits=limits, runtime=runtime, part=part)


def code_sandbox_layout(owner: Owner, *, slots: int, runtime: str, memory_mb: int = MEMORY_MB) -> list[SandboxSpec]:
    """The sandboxes a scorer of `slots` needs under `runtime` (resolved): as many slots in each as the runtime
    runs well side by side (`concurrency_per_sandbox`: all of them, or one each).

    All are the owner's, so its lease and the reaper cover every one of them.
    """
    per = concurrency_per_sandbox(runtime, slots)
    return [code_sandbox_spec(owner, slots=per, memory_mb=memory_mb, runtime=runtime, part=part) for part in range(math.ceil(slots / per))]


class CodeSandbox:
    """Runners in an open sandbox (one made from `code_sandbox_spec` with as many slots).

    The sandbox is the caller's to open and close: an eval's comes from
    `belvedir.sandbox.launch.layout`, which also holds its lease (benches
    open theirs without one: bench/standalone_sandboxes.py).
    """

    def __init__(self, sandbox: Sandbox, *, slots: int = 4, timeout: int = 10, memory_mb: int = MEMORY_MB):
        self.slots = slots
        self.timeout = timeout
        self.sandbox = sandbox
        self._runner_script = (SCRIPTS / "runner.py").read_text()
        self._env = {"BV_MEM": str(memory_mb * 1024 * 1024), "BV_NPROC": "32", "BV_FSIZE": str(8 * 1024 * 1024), "BV_REPORTER": REPORTER_SOCKET}
        self._reporter: Session | None = None
        self._runners: list[Session | None] = [None] * slots
        self._used = [False] * slots  # a slot whose uid has run anything is swept before its next runner
        # What the reporter said about each slot, and when a runner's process ended.
        self._inbox = [queue.Queue() for _ in range(slots)]
        self._seq = itertools.count(1)
        self._free = list(range(slots))
        self._lock = threading.Condition()

    def __enter__(self):
        self._start_reporter()
        return self

    def __exit__(self, *exc):
        for session in [*self._runners, self._reporter]:
            if session is not None:
                session.close()

    def run(self, program: str, *, proof: str | None = None) -> tuple[bool, str]:
        """(passed, detail). Blocks for a free slot; safe to call from several threads.

        Passed is an exit 0; with `proof`, an exit 0 whose output ends with that
        line, which a benchmark's harness writes only once its checks passed
        (mbpp: a completion's os._exit(0) or printed "OK" is no pass).
        """
        with self._lock:
            while not self._free:
                self._lock.wait()
            slot = self._free.pop()
        try:
            return self._run(slot, program, proof)
        finally:
            with self._lock:
                self._free.append(slot)
                self._lock.notify()

    # -- the reporter: the only process whose word counts ------------------

    def _start_reporter(self):
        script = (SCRIPTS / "reporter.py").read_text()
        self._reporter = self.sandbox.open_session(["python3", "-c", script, REPORTER_SOCKET, str(FIRST_UID)], user=KEEPER_USER, workdir="/tmp")
        try:
            ready = self._reporter.read_line(START_SECONDS)
        except SandboxTimeout:
            ready = None
        if ready != b"BV-READY":
            raise SandboxPlatformError(f"The sample reporter did not start: {self._reporter.stderr.text()[-300:]}")
        threading.Thread(target=self._dispatch, args=(self._reporter,), daemon=True).start()

    def _dispatch(self, reporter: Session):
        """Route the reporter's lines to their slots; its end (the container gone) to every slot."""
        while (line := reporter.read_line(None)) is not None:
            word, slot, *rest = line.split(b" ", 3)
            if word == b"BV-RESULT":
                self._inbox[int(slot)].put(("result", int(rest[0]), rest[1]))
            elif word in (b"BV-EXPECTING", b"BV-RUNNER"):
                self._inbox[int(slot)].put((word.decode(), None, None))
        for inbox in self._inbox:
            inbox.put(("gone", None, None))

    def _watch(self, slot: int, runner: Session):
        """Tell the slot when this runner's process ends (its stdout closes); what it prints means nothing."""
        while runner.read_line(None) is not None:
            pass
        self._inbox[slot].put(("ended", runner, None))

    def _next(self, slot: int, deadline: float, wanted) -> tuple | None:
        """The slot's next event that `wanted` accepts, or that ends the wait; None past the deadline."""
        runner = self._runners[slot]
        while (left := deadline - time.monotonic()) > 0:
            try:
                event = self._inbox[slot].get(timeout=left)
            except queue.Empty:
                return None
            kind, value, _ = event
            if kind == "gone" or (kind == "ended" and value is runner) or wanted(event):
                return event
        return None

    # -- runners -----------------------------------------------------------

    def _session(self, slot: int) -> Session:
        # Two tries: on a loaded host a runner may not come up in time; only a
        # second failure is called the platform's.
        for attempt in range(2):
            if self._runners[slot] is not None:
                break
            failure = self._start_runner(slot)
            if failure is not None and attempt:
                # No sample has run on it yet: whatever stopped it is the platform's.
                raise SandboxPlatformError(f"The sample runner did not start: {failure[-300:]}")
        return self._runners[slot]

    def _start_runner(self, slot: int) -> str | None:
        """A fresh runner for the slot, registered with the reporter as the slot's only voice.
        None once it is; else what it wrote on stderr."""
        uid = str(FIRST_UID + slot)
        if self._used[slot]:
            # Nothing of the slot's uid may outlive its last runner: a leftover
            # could otherwise say hello first and be taken for the new one.
            swept = self.sandbox.exec(["python3", "-c", self._runner_script, "sweep"], user=uid, workdir="/tmp", timeout=START_SECONDS, env=self._env)
            if swept.exit_code != 0:
                return f"sweeping its uid failed: {swept.output[-300:]}"
        self._used[slot] = True
        deadline = time.monotonic() + START_SECONDS
        self._reporter.send(b"expect %d\n" % slot)
        self._expect(slot, deadline, "BV-EXPECTING")
        runner = self.sandbox.open_session(["python3", "-c", self._runner_script], env=self._env, user=uid, workdir="/tmp")
        self._runners[slot] = runner
        threading.Thread(target=self._watch, args=(slot, runner), daemon=True).start()
        if self._expect(slot, deadline, "BV-RUNNER", runner_may_end=True):
            return None
        self._discard(slot)
        return runner.stderr.text() or "no word from it"

    def _expect(self, slot: int, deadline: float, word: str, *, runner_may_end: bool = False) -> bool:
        event = self._next(slot, deadline, lambda e: e[0] == word)
        if event is not None and event[0] == word:
            return True
        if event is not None and event[0] == "gone":
            raise SandboxPlatformError("The sandbox container stopped while scoring.")
        if runner_may_end:
            return False
        raise SandboxPlatformError("The sample reporter stopped answering.")

    def _run(self, slot: int, program: str, proof: str | None) -> tuple[bool, str]:
        """A runner that dies or wedges gets one fresh runner for the same sample.

        Breaking a fresh runner again is the sample's own doing (it fails); the
        container gone or a runner that cannot start is the platform's (an error).
        """
        for _ in range(2):
            outcome = self._attempt(slot, program)
            if outcome is not None:
                return self._outcome(outcome, proof)
            self._discard(slot)
            if not self._alive():
                raise SandboxPlatformError("The sandbox container stopped while scoring.")
        return False, "The sample killed or wedged its runner, twice on a fresh one."

    def _attempt(self, slot: int, program: str) -> dict | None:
        """The reporter's word on the sample; None when its runner died or wedged on it."""
        runner, seq = self._session(slot), next(self._seq)
        request = {"program": base64.b64encode(program.encode()).decode(), "timeout": self.timeout, "seq": seq}
        try:
            runner.send(json.dumps(request).encode() + b"\n")
        except SandboxPlatformError:
            return None  # the runner is gone
        except SandboxError as exc:
            raise SandboxPlatformError(f"The sample runner failed: {exc.message}") from exc
        event = self._next(slot, time.monotonic() + self.timeout + 30, lambda e: e[0] == "result" and e[1] == seq)
        if event is None or event[0] != "result":
            if event is not None and event[0] == "gone":
                self._inbox[slot].put(event)  # for whoever asks next: the container is gone
            return None
        return json.loads(event[2])

    def _discard(self, slot: int):
        if self._runners[slot] is not None:
            self._runners[slot].close()
        self._runners[slot] = None

    def _outcome(self, outcome: dict, proof: str | None) -> tuple[bool, str]:
        if outcome["status"] == "timeout":
            return False, f"Timed out after {self.timeout} s."
        lines = outcome["tail"].strip().splitlines()
        if outcome["code"] == 0 and (proof is None or lines[-1:] == [proof]):
            return True, ""
        if outcome["code"] == 0:
            return False, f"It exited 0 before its checks passed; its last line: {(lines or [''])[-1][:400]!r}"
        return False, (lines or [f"exit code {outcome['code']}"])[-1][:500]

    def _alive(self) -> bool:
        try:
            return self.sandbox.exec(["true"], timeout=30).exit_code == 0
        except SandboxError:
            return False


class CodeSandboxes:
    """Several CodeSandboxes scoring as one (see `code_sandbox_layout`): `run` takes the one with the most free slots.

    A part that fails with a platform error (its container gone: under
    gVisor a sandbox out of memory stops whole) takes no more samples; the
    others go on. Only when none is left are samples errors.
    """

    def __init__(self, parts: list[CodeSandbox]):
        self.parts = parts
        self._free = [part.slots for part in parts]
        self._dead: set[int] = set()
        self._lock = threading.Condition()

    @classmethod
    @contextmanager
    def opened(cls, boxes: list[Sandbox], *, slots: int, timeout: int, memory_mb: int = MEMORY_MB):
        """Runners in each of `boxes` (open, laid out by `code_sandbox_layout` for `slots`), started side by side.

        The sandboxes are the caller's to close (an eval's come from
        `launch.layout`); if any part's runners cannot start, the parts
        started are closed again.
        """
        per = concurrency_per_sandbox(boxes[0].runtime, slots)
        with ExitStack() as stack:
            with ThreadPoolExecutor(len(boxes)) as pool:
                futures = [pool.submit(lambda box: CodeSandbox(box, slots=per, timeout=timeout, memory_mb=memory_mb).__enter__(), box) for box in boxes]
            for future in futures:
                if future.exception() is None:
                    stack.callback(future.result().__exit__)
            failed = [future.exception() for future in futures if future.exception() is not None]
            if failed:
                raise failed[0]
            yield cls([future.result() for future in futures])

    @property
    def runtime(self) -> str:
        return self.parts[0].sandbox.runtime

    def run(self, program: str, *, proof: str | None = None) -> tuple[bool, str]:
        """(passed, detail), as `CodeSandbox.run`; blocks while every slot of every live part is busy."""
        with self._lock:
            while True:
                live = [i for i in range(len(self.parts)) if i not in self._dead]
                if not live:
                    raise SandboxPlatformError("Every scoring sandbox of this eval stopped.")
                index = max(live, key=self._free.__getitem__)
                if self._free[index]:
                    break
                self._lock.wait()
            self._free[index] -= 1
        try:
            return self.parts[index].run(program, proof=proof)
        except SandboxPlatformError:
            with self._lock:
                self._dead.add(index)
            raise
        finally:
            with self._lock:
                self._free[index] += 1
                self._lock.notify_all()
