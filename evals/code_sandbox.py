"""Running untrusted completions (humaneval) fast without giving up isolation.

A fresh `docker run` per sample costs about ten times the test itself, and
even a `docker exec` per sample costs more than most tests (about 85 ms of
engine work on this machine kind). So one locked-down container (network
none, memory and pids limits, read-only root, no capabilities) serves a whole
eval, with one long-lived runner per concurrency slot, fed samples through
its stdin. Isolation between samples comes from the kernel:

- every slot has its own uid: a sample cannot signal, ptrace or read the
  files of a sample in another slot;
- the runner makes itself non-dumpable, so a sample of its own uid cannot
  ptrace it or read its memory; a sample can only kill it, which fails that
  sample alone and starts a fresh runner;
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
import json
import threading

from belvedir.sandbox.docker import Sandbox
from belvedir.sandbox.errors import SandboxError, SandboxPlatformError, SandboxTimeout
from belvedir.sandbox.spec import Limits, SandboxSpec

FIRST_UID = 20000
RUNNER = r"""
import base64, ctypes, json, os, resource, shutil, signal, subprocess, sys, tempfile, time

uid = os.getuid()
me = os.getpid()
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: samples cannot ptrace or read this runner
mem, nproc, fsize = (int(os.environ[k]) for k in ("BV_MEM", "BV_NPROC", "BV_FSIZE"))
env = {"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}


def sweep():
    # Every other process of this uid, escaped children included; bounded.
    for _ in range(100):
        alive = False
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == me:
                continue
            try:
                if os.stat("/proc/" + pid).st_uid != uid:
                    continue
                with open("/proc/%s/stat" % pid) as f:
                    if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                        continue
                os.kill(int(pid), signal.SIGKILL)
                alive = True
            except OSError:
                pass
        if not alive:
            return
        time.sleep(0.005)


def scrub():
    for place in ("/tmp", "/dev/shm"):
        try:
            entries = list(os.scandir(place))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
            except OSError:
                pass


def confine(timeout):
    def apply():
        os.setsid()
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
        resource.setrlimit(resource.RLIMIT_CPU, (timeout + 1, timeout + 1))
    return apply


sweep()
scrub()
print("BV-READY", flush=True)
for line in sys.stdin:
    request = json.loads(line)
    timeout = request["timeout"]
    work = tempfile.mkdtemp(prefix="bv-sample-")
    with open(os.path.join(work, "program.py"), "wb") as f:
        f.write(base64.b64decode(request["program"]))
    out_path = os.path.join(work, "output")
    with open(out_path, "wb") as out:
        proc = subprocess.Popen([sys.executable, "program.py"], cwd=work, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                env=dict(env, HOME=work, TMPDIR=work), preexec_fn=confine(timeout))
        try:
            code, status = proc.wait(timeout), "exited"
        except subprocess.TimeoutExpired:
            code, status = None, "timeout"
    sweep()
    proc.wait()
    try:
        with open(out_path, "rb") as f:
            f.seek(max(os.path.getsize(out_path) - 1500, 0))
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        tail = ""
    scrub()
    print("BV-RESULT " + json.dumps({"status": status, "code": code, "tail": tail}), flush=True)
"""


class CodeSandbox:
    def __init__(self, owner_id: str, docker_url: str, *, slots: int = 4, timeout: int = 10, memory_mb: int = 512):
        self.slots = slots
        self.timeout = timeout
        self.memory_mb = memory_mb
        # Room for every slot's address-space limit, plus the runners and tmpfs.
        limits = Limits.defaults(memory_mb=slots * memory_mb + 512, pids=slots * 64 + 32, tmp_mb=slots * 64, home_mb=16)
        self.sandbox = Sandbox(SandboxSpec(owner_kind="eval", owner_id=owner_id, network="none", limits=limits), docker_url)
        self._sessions: list = [None] * slots
        self._free = list(range(slots))
        self._lock = threading.Condition()

    def __enter__(self):
        self.sandbox.__enter__()
        return self

    def __exit__(self, *exc):
        for session in self._sessions:
            if session is not None:
                session.close()
        self.sandbox.__exit__(*exc)

    def run(self, program: str) -> tuple[bool, str]:
        """(passed, detail). Blocks for a free slot; safe to call from several threads."""
        with self._lock:
            while not self._free:
                self._lock.wait()
            slot = self._free.pop()
        try:
            return self._run(slot, program)
        finally:
            with self._lock:
                self._free.append(slot)
                self._lock.notify()

    def _session(self, slot: int):
        if self._sessions[slot] is None:
            env = {"BV_MEM": str(self.memory_mb * 1024 * 1024), "BV_NPROC": "32", "BV_FSIZE": str(8 * 1024 * 1024)}
            session = self.sandbox.open_session(["python3", "-c", RUNNER], env=env, user=str(FIRST_UID + slot), workdir="/tmp")
            if session.read_line(60) != b"BV-READY":
                session.close()
                raise SandboxPlatformError(f"The sample runner did not start: {session.stderr.text()[-300:]}")
            self._sessions[slot] = session
        return self._sessions[slot]

    def _run(self, slot: int, program: str) -> tuple[bool, str]:
        try:
            session = self._session(slot)
            session.send(json.dumps({"program": base64.b64encode(program.encode()).decode(), "timeout": self.timeout}).encode() + b"\n")
            line = session.read_line(self.timeout + 30)
        except SandboxTimeout:
            line = None
        except SandboxPlatformError:
            raise
        except SandboxError as exc:
            raise SandboxPlatformError(f"The sample runner failed: {exc.message}") from exc
        if line is None or not line.startswith(b"BV-RESULT "):
            # The runner is gone or wedged: a fresh one serves this slot's next sample.
            self._sessions[slot].close() if self._sessions[slot] else None
            self._sessions[slot] = None
            if not self._alive():
                raise SandboxPlatformError("The sandbox container stopped while scoring.")
            return False, "The sample killed or wedged its runner."
        outcome = json.loads(line.removeprefix(b"BV-RESULT "))
        if outcome["status"] == "timeout":
            return False, f"Timed out after {self.timeout} s."
        if outcome["code"] == 0:
            return True, ""
        return False, (outcome["tail"].strip().splitlines() or [f"exit code {outcome['code']}"])[-1][:500]

    def _alive(self) -> bool:
        try:
            return self.sandbox.exec(["true"], timeout=30).exit_code == 0
        except SandboxError:
            return False
