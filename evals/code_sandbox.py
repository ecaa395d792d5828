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
  ptrace it or read its memory; its results are signed with a key only it
  and this process hold (see `CodeSandbox.mode` for why that matters under
  gVisor); a sample can only kill it. A runner that dies
  or wedges is replaced and the sample retried once on the fresh one: only a
  sample that breaks a fresh runner too fails (an honest sample is never
  failed by a hiccup); a runner that cannot start is a platform error;
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
import hmac
import itertools
import json
import secrets
import threading
import time
from contextlib import contextmanager

from belvedir.sandbox.docker import Sandbox
from belvedir.sandbox.errors import SandboxError, SandboxPlatformError, SandboxTimeout
from belvedir.sandbox.owners import Owner
from belvedir.sandbox.spec import Limits, SandboxSpec

FIRST_UID = 20000
MEMORY_MB = 512  # each slot's address-space limit
MAX_LINES_PER_SAMPLE = 10_000  # forged lines read past before giving up on the runner
RUNNER = r"""
import base64, ctypes, hmac, json, os, resource, select, shutil, signal, subprocess, sys, tempfile, time, traceback

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
    os.setsid()
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    resource.setrlimit(resource.RLIMIT_CPU, (timeout + 1, timeout + 1))


def execute(source, work, out_path, timeout):
    # In a child forked from this warm runner: no interpreter start per sample
    # (that start was most of an honest sample's cost). The child drops every
    # descriptor of the runner's (its stdin and stdout are the session: a
    # sample must not be able to write a result line) before running the program.
    status = 1
    try:
        out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.closerange(3, 65536)
        os.chdir(work)
        os.environ.clear()
        os.environ.update(env, HOME=work, TMPDIR=work)
        tempfile.tempdir = None
        sys.argv, sys.path[0] = [os.path.join(work, "program.py")], work
        confine(timeout)
        exec(compile(source, "program.py", "exec"), {"__name__": "__main__", "__file__": sys.argv[0], "__builtins__": __builtins__})
        status = 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            status = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(status & 0xFF)


def wait(pid, timeout):
    # The exit code, or None past the timeout.
    try:
        handle = os.pidfd_open(pid)
    except (AttributeError, OSError):
        handle = None
    if handle is not None:
        try:
            ready = select.select([handle], [], [], timeout)[0]
        finally:
            os.close(handle)
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) if ready else None
    deadline, pause = time.monotonic() + timeout, 0.0005
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(pause)
        pause = min(pause * 2, 0.02)
    return None


key = bytes.fromhex(sys.stdin.readline().strip())  # signs results; sent before any sample runs
fork = os.environ["BV_MODE"] == "fork"
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
    if fork:
        pid = os.fork()
        if pid == 0:
            # Its memory still holds a copy of the key: forking is only chosen
            # where the child cannot reach the runner's output (CodeSandbox.mode).
            execute(base64.b64decode(request["program"]), work, out_path, timeout)
        code = wait(pid, timeout)
        reap = lambda: os.waitpid(pid, 0)
    else:
        with open(out_path, "wb") as out:
            proc = subprocess.Popen([sys.executable, "program.py"], cwd=work, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    env=dict(env, HOME=work, TMPDIR=work), preexec_fn=lambda: confine(timeout))
        reap = proc.wait
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            code = None
    status = "exited" if code is not None else "timeout"
    sweep()
    if code is None:
        reap()
    try:
        with open(out_path, "rb") as f:
            f.seek(max(os.path.getsize(out_path) - 1500, 0))
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        tail = ""
    scrub()
    result = json.dumps({"status": status, "code": code, "tail": tail})
    mac = hmac.new(key, ("%d " % request["seq"] + result).encode(), "sha256").hexdigest()
    print("BV-RESULT " + mac + " " + result, flush=True)
"""


def code_sandbox_spec(owner: Owner, *, slots: int, memory_mb: int = MEMORY_MB, runtime: str = "auto") -> SandboxSpec:
    """The container a CodeSandbox of `slots` runners needs: no network, room for every slot."""
    # Room for every slot's address-space limit, plus the runners and tmpfs.
    limits = Limits.defaults(memory_mb=slots * memory_mb + 512, pids=slots * 64 + 32, tmp_mb=slots * 64, home_mb=16)
    return SandboxSpec(owner=owner, network="none", limits=limits, runtime=runtime)


class CodeSandbox:
    """Runners in an open sandbox (one made from `code_sandbox_spec` with as many slots).

    The sandbox is the caller's to open and close: an eval's comes from
    `belvedir.sandbox.launch.workload`, which also holds its lease.
    """

    def __init__(self, sandbox: Sandbox, *, slots: int = 4, timeout: int = 10, memory_mb: int = MEMORY_MB):
        self.slots = slots
        self.timeout = timeout
        self.memory_mb = memory_mb
        self.sandbox = sandbox
        self._sessions: list = [None] * slots
        self._keys: list[bytes] = [b""] * slots
        self._seq = itertools.count(1)
        self._free = list(range(slots))
        self._lock = threading.Condition()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for session in self._sessions:
            if session is not None:
                session.close()

    @classmethod
    @contextmanager
    def standalone(cls, name: str, engine, *, slots: int = 4, timeout: int = 10, memory_mb: int = MEMORY_MB, runtime: str = "auto"):
        """Its own container on `engine`, with no lease: for benches and tests that bring an engine."""
        # Not an "eval" owner: the reaper would take it for an ended eval's container.
        spec = code_sandbox_spec(Owner("standalone", name), slots=slots, memory_mb=memory_mb, runtime=runtime)
        with Sandbox(spec, engine) as box, cls(box, slots=slots, timeout=timeout, memory_mb=memory_mb) as code:
            yield code

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
        # Two tries: a runner started while the slot's last sample is still
        # being swept (under gVisor, on a loaded host) may not come up.
        for attempt in range(2):
            if self._sessions[slot] is not None:
                break
            env = {"BV_MEM": str(self.memory_mb * 1024 * 1024), "BV_NPROC": "32", "BV_FSIZE": str(8 * 1024 * 1024), "BV_MODE": self.mode}
            session = self.sandbox.open_session(["python3", "-c", RUNNER], env=env, user=str(FIRST_UID + slot), workdir="/tmp")
            self._keys[slot] = secrets.token_bytes(32)
            try:
                session.send(self._keys[slot].hex().encode() + b"\n")
                ready = session.read_line(60)
            except (SandboxTimeout, SandboxPlatformError):
                ready = None
            if ready == b"BV-READY":
                self._sessions[slot] = session
                break
            session.close()
            if attempt:
                # No sample has run on it yet: whatever stopped it is the platform's.
                raise SandboxPlatformError(f"The sample runner did not start: {session.stderr.text()[-300:]}")
        return self._sessions[slot]

    @property
    def mode(self) -> str:
        """How the runner starts a sample: forked from itself where the kernel keeps a sample out of it, else a fresh exec.

        Under runc a sample cannot open the non-dumpable runner's /proc/PID/fd,
        so a forked child (fast: no interpreter start) with the runner's
        descriptors closed has no way to its output. gVisor lets a same-uid
        process open them: there a sample could write lines as the runner, so
        each result is signed with a key the runner got before any sample ran,
        and samples are exec'd, so none holds a copy of the runner's memory.
        """
        return "fork" if self.sandbox.runtime == "runc" else "exec"

    def _run(self, slot: int, program: str) -> tuple[bool, str]:
        """A runner that dies or wedges gets one fresh runner for the same sample.

        Breaking a fresh runner again is the sample's own doing (it fails); the
        container gone or a runner that cannot start is the platform's (an error).
        """
        for _ in range(2):
            answer = self._attempt(slot, program)
            if answer is not None:
                line, forged = answer
                return (False, "The sample wrote lines as its runner (a forged result).") if forged else self._outcome(line)
            self._discard(slot)
            if not self._alive():
                raise SandboxPlatformError("The sandbox container stopped while scoring.")
        return False, "The sample killed or wedged its runner, twice on a fresh one."

    def _attempt(self, slot: int, program: str) -> tuple[bytes, bool] | None:
        """(the runner's signed result line, whether anything else was written as the runner);
        None when the runner died or wedged on this sample."""
        session, seq = self._session(slot), next(self._seq)
        deadline = time.monotonic() + self.timeout + 30
        forged = False
        try:
            session.send(json.dumps({"program": base64.b64encode(program.encode()).decode(), "timeout": self.timeout, "seq": seq}).encode() + b"\n")
            for _ in range(MAX_LINES_PER_SAMPLE):
                line = session.read_line(max(deadline - time.monotonic(), 0.001))
                if line is None:
                    return None
                if self._signed(slot, seq, line):
                    return line, forged
                forged = True
        except (SandboxTimeout, SandboxPlatformError):
            return None  # the send failed (the runner is gone) or no answer came
        except SandboxError as exc:
            raise SandboxPlatformError(f"The sample runner failed: {exc.message}") from exc
        return None

    def _signed(self, slot: int, seq: int, line: bytes) -> bool:
        parts = line.split(b" ", 2)
        if len(parts) != 3 or parts[0] != b"BV-RESULT":
            return False
        expected = hmac.new(self._keys[slot], f"{seq} ".encode() + parts[2], "sha256").hexdigest().encode()
        return hmac.compare_digest(parts[1], expected)

    def _discard(self, slot: int):
        if self._sessions[slot] is not None:
            self._sessions[slot].close()
        self._sessions[slot] = None

    def _outcome(self, line: bytes) -> tuple[bool, str]:
        outcome = json.loads(line.split(b" ", 2)[2])
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
