"""One slot's sample runner. Runs inside the sandbox under the slot's own uid; never imported.

Sent with `python3 -c` and fed one JSON request per line on stdin. Each
sample is forked from this warm process (no interpreter start per sample,
which was most of an honest sample's cost), confined, waited for, and
everything of this uid it left behind is killed and deleted. The outcome
goes to the reporter over its unix socket, where the kernel stamps this
process's pid on it: nothing a sample writes anywhere can pass for it.
"""

import base64
import ctypes
import json
import os
import resource
import shutil
import signal
import socket
import sys
import tempfile
import time
import traceback

uid = os.getuid()
me = os.getpid()
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: samples cannot ptrace or read this runner
mem, nproc, fsize = (int(os.environ[k]) for k in ("BV_MEM", "BV_NPROC", "BV_FSIZE"))
env = {"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}


def others(live):
    # This uid's other processes in a state `live` accepts.
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != me:
            try:
                if os.stat("/proc/" + pid).st_uid == uid:
                    with open(f"/proc/{pid}/stat") as f:
                        if live(f.read().rsplit(")", 1)[1].split()[0]):
                            found.append(pid)
            except OSError:
                pass  # gone meanwhile
    return found


def sweep():
    """Kill every other process of this uid, escaped children included; bounded.

    Killed one by one, a fork bomb refills its places as fast as they free.
    So first everything of this uid is stopped (kill -1: every process this
    one may signal, in one call) until nothing of it still runs, then killed.
    """
    for sig, live in ((signal.SIGSTOP, lambda state: state not in "TtZX"), (signal.SIGKILL, lambda state: state not in "ZX")):
        for _ in range(500):
            try:
                os.kill(-1, sig)
            except ProcessLookupError:
                return  # nothing else of this uid at all
            if not others(live):
                break
            time.sleep(0.002)


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
    # In the forked child. It drops every descriptor of the runner's (its
    # stdin, and the reporter socket) before the program runs.
    status = 1
    try:
        out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        null = os.open("/dev/null", os.O_RDONLY)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})  # the sample's own children behave as usual
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
    # The exit code, or None past the timeout. Woken by the child's SIGCHLD
    # (blocked, so it queues): gVisor has no pidfd_open, and polling added
    # up to a pause's length to every sample.
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        signal.sigtimedwait([signal.SIGCHLD], left)


def tail(path):
    try:
        with open(path, "rb") as f:
            f.seek(max(os.path.getsize(path) - 1500, 0))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


if sys.argv[1:] == ["sweep"]:
    sweep()  # the host's, before a slot's next runner starts
    sys.exit(0)
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
reporter = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
reporter.connect(os.environ["BV_REPORTER"])
sweep()
scrub()
reporter.send(b"hello")  # the reporter takes this process, by its pid, as the slot's runner
for line in sys.stdin:
    request = json.loads(line)
    timeout = request["timeout"]
    work = tempfile.mkdtemp(prefix="bv-sample-")
    program = base64.b64decode(request["program"])
    with open(os.path.join(work, "program.py"), "wb") as f:
        f.write(program)
    out_path = os.path.join(work, "output")
    pid = os.fork()
    if pid == 0:
        execute(program, work, out_path, timeout)
    code = wait(pid, timeout)
    sweep()
    if code is None:
        os.waitpid(pid, 0)  # killed by the sweep
    outcome = {"status": "exited" if code is not None else "timeout", "code": code, "tail": tail(out_path)}
    scrub()
    reporter.send(b"result %d %s" % (request["seq"], json.dumps(outcome).encode()))
