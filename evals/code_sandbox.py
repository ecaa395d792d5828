"""Running untrusted completions (humaneval) fast without giving up isolation.

A fresh `docker run` per sample costs about ten times the test itself, so
one locked-down container (network none, memory and pids limits, read-only
root, no capabilities) serves a whole eval, and isolation between samples
comes from the kernel inside it: every sample runs

- under its own uid (one per concurrency slot, so two live samples never
  share one): it cannot signal, ptrace or read the files of another sample;
- in its own session and a private 0700 temp directory, removed before the
  slot's next sample starts;
- under rlimits: address space (a 10 GB allocation fails alone), processes
  per uid (a fork bomb stops at its own limit), file size (a disk or output
  flood is cut off), CPU seconds, open files;
- with a hard wall-clock timeout, after which everything that uid still
  runs is SIGKILLed (`kill(-1)`), children that escaped the session included.

A platform failure (the container gone, Docker down) raises
SandboxPlatformError, which the engine counts in error_count, never as a
failed sample.
"""

import base64
import json
import threading

from belvedir.sandbox.docker import Sandbox
from belvedir.sandbox.errors import SandboxError, SandboxPlatformError
from belvedir.sandbox.spec import Limits, SandboxSpec

FIRST_UID = 20000
WRAPPER = r"""
import base64, glob, json, os, resource, shutil, signal, subprocess, sys, tempfile
uid = os.getuid()
# Whatever a previous sample of this slot left running (it may have killed its
# own runner before the final kill) goes first, so it cannot touch this one.
for pid in os.listdir("/proc"):
    if pid.isdigit() and int(pid) != os.getpid():
        try:
            if os.stat(f"/proc/{pid}").st_uid == uid:
                os.kill(int(pid), signal.SIGKILL)
        except OSError:
            pass
for old in glob.glob("/tmp/bv-sample-*"):
    try:
        if os.stat(old).st_uid == uid:
            shutil.rmtree(old, ignore_errors=True)
    except OSError:
        pass  # another slot's directory, removed meanwhile
work = tempfile.mkdtemp(prefix="bv-sample-")
with open(os.path.join(work, "program.py"), "wb") as f:
    f.write(base64.b64decode(os.environ["BV_PROGRAM"]))
mem, nproc, fsize, timeout = (int(os.environ[k]) for k in ("BV_MEM", "BV_NPROC", "BV_FSIZE", "BV_TIMEOUT"))

def confine():
    os.setsid()
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    resource.setrlimit(resource.RLIMIT_CPU, (timeout + 1, timeout + 1))

out = open(os.path.join(work, "output"), "wb")
env = {"PATH": "/usr/bin:/bin", "HOME": work, "TMPDIR": work, "PYTHONDONTWRITEBYTECODE": "1"}
proc = subprocess.Popen([sys.executable, "program.py"], cwd=work, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env, preexec_fn=confine)
try:
    code = proc.wait(timeout)
    status = "exited"
except subprocess.TimeoutExpired:
    code, status = None, "timeout"
out.close()
with open(os.path.join(work, "output"), "rb") as f:
    f.seek(max(os.path.getsize(f.name) - 1500, 0))
    tail = f.read().decode("utf-8", "replace")
print("BV-RESULT " + json.dumps({"status": status, "code": code, "tail": tail}), flush=True)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
os.kill(-1, signal.SIGKILL)  # everything this uid still runs, this process last
"""


class CodeSandbox:
    def __init__(self, owner_id: str, docker_url: str, *, slots: int = 4, timeout: int = 10, memory_mb: int = 512):
        self.slots = slots
        self.timeout = timeout
        self.memory_mb = memory_mb
        # Room for every slot's address-space limit, plus the interpreter and tmpfs.
        limits = Limits.defaults(memory_mb=slots * memory_mb + 512, pids=slots * 64 + 32, tmp_mb=slots * 64, home_mb=16)
        self.sandbox = Sandbox(SandboxSpec(owner_kind="eval", owner_id=owner_id, network="none", limits=limits), docker_url)
        self._free = list(range(slots))
        self._lock = threading.Condition()

    def __enter__(self):
        self.sandbox.__enter__()
        return self

    def __exit__(self, *exc):
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

    def _alive(self) -> bool:
        try:
            return self.sandbox.exec(["true"], timeout=30).exit_code == 0
        except SandboxError:
            return False

    def _run(self, slot: int, program: str) -> tuple[bool, str]:
        env = {
            "BV_PROGRAM": base64.b64encode(program.encode()).decode(),
            "BV_MEM": str(self.memory_mb * 1024 * 1024),
            "BV_NPROC": "32",
            "BV_FSIZE": str(8 * 1024 * 1024),
            "BV_TIMEOUT": str(self.timeout),
        }
        try:
            result = self.sandbox.exec(
                ["python3", "-c", WRAPPER], env=env, workdir="/tmp", user=f"{FIRST_UID + slot}", timeout=self.timeout + 30, tail_bytes=8192
            )
        except SandboxPlatformError:
            raise
        except SandboxError as exc:
            raise SandboxPlatformError(f"The sample runner failed: {exc.message}") from exc
        line = next((ln for ln in reversed(result.output.splitlines()) if ln.startswith("BV-RESULT ")), None)
        if line is None:
            if self._alive():
                # Its own uid may signal its runner: a sample that kills it fails, alone.
                return False, "The sample killed or crashed its runner."
            raise SandboxPlatformError(f"The sample runner gave no result (exit {result.exit_code}): {result.output[-300:]}")
        outcome = json.loads(line.removeprefix("BV-RESULT "))
        if outcome["status"] == "timeout":
            return False, f"Timed out after {self.timeout} s."
        if outcome["code"] == 0:
            return True, ""
        return False, (outcome["tail"].strip().splitlines() or [f"exit code {outcome['code']}"])[-1][:500]
