"""The Docker sandbox: one container, and the sessions talked to through its execs.

With docker_engine.py, the only modules that import `docker`.

A sandbox is one locked-down container whose main process is an init
(`tini`, via `init=True`) parked on `sleep infinity`; work runs in it with
`exec`. That split is deliberate:

- secrets go in as the exec's environment, which Docker keeps in memory,
  never in the container config it writes to disk;
- the writable places (home, /tmp) are tmpfs mounts, counted against the
  memory limit, so a disk-filling sandbox cannot fill the host's disk, and
  they stay readable after a command exits (results.json) until the
  container is removed;
- the same container can run several steps (install, run) or many short
  samples without paying for a fresh `docker run` each time.

`DockerSandbox` is a context manager: on exit it kills and removes its
container whatever happened, and on entry it removes a stale one of the same name.
"""

import io
import json
import logging
import queue
import shlex
import tarfile
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Self

import docker
import requests
from docker import errors as docker_errors
from docker.types import DeviceRequest, LogConfig, Mount, Ulimit

from .. import egress
from ..backend import ExecResult, Sandbox, Session, is_gvisor, resolve_runtime
from ..engine import Engine, as_engine
from ..errors import (
    BuildInProgress,
    ImageBuildFailed,
    ImageMissing,
    LaunchFailed,
    SandboxDied,
    SandboxError,
    SandboxFileMissing,
    SandboxFileRefused,
    SandboxFileTooLarge,
    SandboxOutOfMemory,
    SandboxPlatformError,
    SandboxTimeout,
    SandboxUserError,
)
from ..images import BUILD_CAPABILITIES, LABEL_SEED, SEED_DIR
from ..output import TailBuffer
from ..spec import HOME, LABEL_SANDBOX, SYSTEM_PATH, Folder, SandboxSpec
from .docker_engine import API_TIMEOUT, ENGINE_ERRORS, connect, engine_cpus, engine_errors, engine_runtimes, explain, remove_volumes

logger = logging.getLogger(__name__)

# How often a long command checks that its container still runs.
LIVENESS_SECONDS = 1.0
# SIGKILL to every process of a user, again while any is left: a fork bomb dies within a few rounds.
KILL_ROUNDS = 500
# Rounds in a row that must find none: a child being forked as kill(-1) runs (under gVisor, seen) is neither
# signalled nor listed yet, and shows up a moment later.
CLEAN_ROUNDS = 20
# How long the killer may take to get started: a fork bomb at its limit frees a place now and then, which an exec
# takes when it comes at the right moment.
KILLER_SECONDS = 30
# How long a started killer may take to finish its rounds: under gVisor, against a fork bomb, tens of seconds; past this
# it is taken as stuck (the sandbox kept making processes) rather than waited on without end.
KILLER_RUN_SECONDS = 120
# How long a sandbox's removal is waited for, past one engine call's timeout (API_TIMEOUT): see _remove_container.
REMOVE_SECONDS = 300
# How much of what a stopped sandbox's init said last goes into the reason given for its end.
LAST_WORDS_LINES = 3
LAST_WORDS_CHARS = 400
# The engine's exit code for an exec it could not start.
EXEC_FAILED = 126
# Ending every process of a user is one exec as that user (no capability is at hand to do it as another: Docker
# gives an exec none in a container whose user is not root, and the keep-alive's user must not be root). A shell
# whose every step is a builtin (kill, read, case, a glob), so it forks nothing: what the workload left may hold
# every place its process limit allows (a fork bomb) or kill every process of its user in a loop (the red team's
# keepers), and a killer that forks, or starts slowly (Python), loses either race. Each round sends kill(-1), which
# signals every process the user may signal but its sender, at once; then reads /proc by real uid (a process that
# made itself undumpable has its /proc folder owned by root, not its status line), zombies aside, a status that cannot
# be read counted as left, until CLEAN_ROUNDS rounds in a row find none. kill -1's own answer cannot tell: it
# succeeds whenever any other process exists, the keeper's included. The exec is started again when it was killed
# (137) or could not start (126: a fork bomb holds every place).
KILLER = f"""
me=$$; uid=$1; clean=0; round=0
while [ $round -lt {KILL_ROUNDS} ]; do
    round=$((round + 1))
    kill -9 -1 2>/dev/null
    left=0
    for proc in /proc/[0-9]*; do
        [ "${{proc#/proc/}}" = "$me" ] && continue
        owner=; state=; seen=
        {{ while read -r key value rest; do
            case $key in State:) state=$value ;; Uid:) owner=$value; break ;; esac
        done < "$proc/status" && seen=1; }} 2>/dev/null
        if [ -z "$seen" ]; then [ -e "$proc" ] && left=$((left + 1)); continue; fi
        [ "$owner" = "$uid" ] && [ "$state" != Z ] && [ "$state" != X ] && left=$((left + 1))
    done
    if [ $left -eq 0 ]; then clean=$((clean + 1)); else clean=0; fi
    [ $clean -ge {CLEAN_ROUNDS} ] && exit 0
done
exit 9
"""
# runsc's own exit code for an exec it could not see to the end.
SIGKILLED = 137
RUNSC_EXEC_FAILED = 128
# Within this of its memory limit a sandbox is full: an exec's runtime process cannot start in it (see _memory_exhausted).
MEMORY_FULL_MARGIN = 8 << 20


class DockerSandbox(Sandbox):
    def __init__(self, spec: SandboxSpec, engine: Engine | str):
        self.spec = spec
        self.engine = as_engine(engine)
        self.client: docker.DockerClient | None = None
        self.container = None
        self._oom_kills = 0
        self._killed = False  # by the platform: a timeout, a cancel
        self._started_at = 0
        self.runtime = "runc"
        self._forwarder: DockerSession | None = None
        self._seeded: tuple[str, ...] = ()

    # -- lifecycle ---------------------------------------------------------

    def __enter__(self) -> Self:
        self.client = connect(self.engine)
        try:
            if not self.spec.build_seconds:
                self._remove_stale()
            self.runtime = self._runtime()
            self.container = self._create()
            self._started_at = int(time.time()) - 1  # the engine's events are read from here on
            self.container.start()
            if self.spec.network == egress.NETWORK:
                self._start_egress()
            if self._seeded:
                self._seed()
        except SandboxError:
            self.__exit__(None, None, None)
            raise
        except ENGINE_ERRORS as exc:
            self.__exit__(None, None, None)
            raise LaunchFailed(f"Could not start the sandbox: {explain(exc)}") from exc
        return self

    def __exit__(self, exc_type, exc, tb):
        if self.client is None:
            return
        if self._forwarder is not None:
            self._forwarder.close()
        try:
            if self.container is not None:
                self._remove_container()
            remove_volumes(self.client, self.spec.name)
        except docker_errors.NotFound:
            pass
        except ENGINE_ERRORS:
            # The reaper removes labelled containers (and their volumes) we could not remove here.
            logger.warning("could not remove sandbox %s", self.spec.name, exc_info=True)
        finally:
            self.client.close()
            self.client = None

    def _remove_container(self):
        """Removed, waiting for the engine past one call's timeout while it is still at it.

        A gVisor sandbox holding a fork bomb at its process limit took over API_TIMEOUT to tear down on a loaded
        machine (ptrace ends each process in turn): the call timed out and the container stayed until the
        reaper's next pass. A timed-out call, and the 409 of a removal already under way, are asked again.
        """
        deadline = time.monotonic() + REMOVE_SECONDS
        while True:
            try:
                self.container.remove(force=True)
                return
            except docker_errors.NotFound:
                return
            except (requests.exceptions.ReadTimeout, docker_errors.APIError) as exc:
                busy = isinstance(exc, requests.exceptions.ReadTimeout) or exc.status_code == 409
                if not busy or time.monotonic() >= deadline:
                    raise
                logger.info("sandbox %s: still being removed", self.spec.name)
                time.sleep(1)

    def _remove_stale(self):
        try:
            self.client.containers.get(self.spec.name).remove(force=True)
        except docker_errors.NotFound:
            pass
        # A stale volume of the name could hold what an earlier sandbox wrote (a reward): never reused.
        remove_volumes(self.client, self.spec.name)

    def _volume(self, folder: Folder, size_mb: int) -> str:
        """A tmpfs volume for a folder the platform reads from outside, labelled with its sandbox's name (it goes with
        the sandbox, the reaper's removal included). Its pages are charged to the sandbox's memory as a tmpfs's are."""
        name = f"{self.spec.name}{folder.path.replace('/', '-')}"
        options = f"size={size_mb}m,uid={folder.uid},gid={folder.uid},mode={folder.mode:o},nosuid,nodev"
        labels = {**self.spec.labels, LABEL_SANDBOX: self.spec.name}
        self.client.volumes.create(name=name, driver="local", driver_opts={"type": "tmpfs", "device": "tmpfs", "o": options}, labels=labels)
        return name

    def _runtime(self) -> str:
        return resolve_runtime(self.spec.runtime, engine_runtimes(self.engine, self.client))

    def _cpus(self, wanted: float) -> float:
        # Docker refuses a CPU limit above the host's cores; asking for more means all of them.
        cores = engine_cpus(self.engine, self.client)
        return min(wanted, cores) if cores else wanted

    def _create(self):
        spec, limits = self.spec, self.spec.limits
        try:
            image = self.client.images.get(spec.image)
        except docker_errors.ImageNotFound as exc:
            raise ImageMissing(f"Sandbox image {spec.image!r} is missing on this host; run `python manage.py build_sandbox_image`.") from exc
        self._seeded = tuple(folder.path for folder in spec.folders if folder.path in _seeded_folders(image.labels or {}))
        build = spec.build_seconds > 0
        device_requests = [DeviceRequest(device_ids=list(spec.gpu.device_ids), capabilities=[["gpu"]])] if spec.gpu else []
        mounts = []
        if spec.network == egress.NETWORK:
            if self.engine.is_local_socket and not egress.socket_path().exists():
                raise LaunchFailed("The egress proxy is not running on this host; start it with `python manage.py egress_proxy`.")
            mounts.append(Mount(egress.MOUNT_DIR, str(egress.socket_path().parent), type="bind", read_only=True))
        for mount in spec.mounts:
            # Docker would create a missing source as an empty, root-owned folder: a run that finds nothing there.
            if self.engine.is_local_socket and not Path(mount.source).exists():
                raise LaunchFailed(f"{mount.source} is missing on this host, so it cannot be mounted at {mount.target}.")
            mounts.append(Mount(mount.target, mount.source, type="bind", read_only=True))
        mounts += [Mount(folder.path, self._volume(folder, limits.tmp_mb), type="volume") for folder in spec.folders if folder.outside]
        try:
            return self._create_container(spec, limits, mounts, device_requests, build)
        except docker_errors.APIError as exc:
            if not (build and exc.status_code == 409):
                raise
        # Another build of the same image holds the name: running, it is at work (wait for its image); exited (at
        # its own deadline, or killed), or created and never started by a worker that died, a leftover, removed here.
        try:
            other = self.client.containers.get(spec.name)
            if other.status not in ("exited", "dead") and not (other.status == "created" and _age(other) > 120):
                raise BuildInProgress(f"{spec.name} is building the same image on this engine.")
            other.remove(force=True)
        except docker_errors.NotFound:
            pass
        try:
            return self._create_container(spec, limits, mounts, device_requests, build)
        except docker_errors.APIError as exc:
            if exc.status_code == 409:
                raise BuildInProgress(f"{spec.name} is building the same image on this engine.") from exc
            raise

    def _create_container(self, spec: SandboxSpec, limits, mounts, device_requests, build: bool):
        memory = f"{limits.memory_mb}m"
        return self.client.containers.create(
            spec.image,
            # A build's sandbox ends by itself: one a dead worker left holds no memory past its deadline.
            command=["sleep", f"{spec.build_seconds:.0f}"] if build else ["sleep", "infinity"],
            name=spec.name,
            labels=spec.labels,
            # PID 1 and the keep-alive run as a uid the workload (spec.user,
            # its execs) cannot signal: `kill -9 -1` inside cannot end the
            # sandbox and make the run look like the platform's fault. Not root: under gVisor (runsc 20221219) a
            # workload's exec could signal a root keep-alive (seen), never another plain uid's.
            # A build's steps are root's own, with the build's capabilities: an exec as root gets them only in a
            # container of root (Docker clears them for an exec in a container of another user).
            user="0:0" if build else egress.KEEPER_USER,
            working_dir="/",
            init=True,
            runtime=self.runtime,
            mounts=mounts,
            # A build's root is written by its steps: its runtime holds what they write in the sandbox's memory.
            read_only=not build,
            tmpfs={
                # Its group (a verifier's: spec.VERIFIER_USER) may read it; no one else.
                HOME: f"rw,exec,nosuid,nodev,size={limits.home_size_mb}m,uid=1000,gid=1000,mode=0750",
                "/tmp": f"rw,exec,nosuid,nodev,size={limits.tmp_mb}m,mode=1777",
                **{folder.path: _tmpfs(folder, limits.tmp_mb) for folder in spec.folders if not folder.outside},
            },
            cap_drop=["ALL"],
            # What a build's steps need as root (chown, chmod, useradd), under gVisor's kernel; a workload gets none.
            cap_add=BUILD_CAPABILITIES if build else None,
            security_opt=["no-new-privileges"],
            **_process_limits(self.runtime, limits.pids),
            mem_limit=memory,
            memswap_limit=memory,  # equal to mem_limit: no swap
            nano_cpus=int(self._cpus(limits.cpus) * 1e9),
            network_mode="none" if spec.network == egress.NETWORK else spec.network,
            device_requests=device_requests,
            # Output is streamed as it comes; the engine's own copy stays small.
            log_config=LogConfig(type="json-file", config={"max-size": "1m", "max-file": "1"}),
            environment={"HOME": HOME, "LANG": "C.UTF-8"},
        )

    def _seed(self):
        """Writable folders are empty mounts over the image: they start with what the image holds for them (images.py).
        What a build left there is the task's: one that does not fit the folder's size is its failure, not ours."""
        copies = " && ".join(f"cp -R {shlex.quote(SEED_DIR + folder)}/. {shlex.quote(folder)}/" for folder in self._seeded)
        where = f"{', '.join(self._seeded)} (each at most {self.spec.limits.tmp_mb} MB in a sandbox)"
        try:
            seeded = self.exec(copies, timeout=120, workdir="/")
        except SandboxUserError as exc:
            raise ImageBuildFailed(f"What the build left in {where} could not be copied into the sandbox: {exc.message}") from exc
        if seeded.exit_code != 0:
            raise ImageBuildFailed(f"What the build left in {where} could not be copied into the sandbox: {seeded.output[-500:]}")

    def _start_egress(self):
        """The forwarder to the proxy socket, under the keeper uid; it also writes the CA bundle clients trust."""
        forwarder = (Path(egress.__file__).parent / "forwarder.py").read_text()
        argv = [
            "/usr/bin/python3",
            "-I",
            "-S",
            "-c",
            forwarder,
            f"{egress.MOUNT_DIR}/{egress.SOCKET_NAME}",
            str(egress.FORWARD_PORT),
            egress.IMAGE_CA_BUNDLE,
            egress.CA_BUNDLE,
        ]
        self._forwarder = self.open_session(argv, env={"BELVEDIR_OPERATOR_CA": egress.operator_ca().decode()}, user=egress.KEEPER_USER, workdir="/")
        try:
            ready = self._forwarder.read_line(30)
        except SandboxTimeout:
            ready = None
        if ready != b"ready":
            raise LaunchFailed(f"Could not set up the sandbox's egress: {self._forwarder.stderr.text()[-500:]}")

    # -- work --------------------------------------------------------------

    def exec(
        self,
        command: str | list[str],
        *,
        timeout: float,
        env: dict[str, str] | None = None,
        workdir: str | None = None,
        user: str | None = None,
        tail_bytes: int = 16384,
        on_output: Callable[[bytes], None] | None = None,
    ) -> ExecResult:
        """Run a command to completion, keeping the last `tail_bytes` of output.

        Past `timeout` seconds the whole sandbox is killed (an exec cannot be
        killed on its own) and SandboxTimeout is raised with the tail.
        """
        argv = ["sh", "-c", command] if isinstance(command, str) else list(command)
        api = self.client.api
        started = time.monotonic()
        with self.engine_errors("start a command"):
            exec_id = api.exec_create(self.container.id, argv, environment=env or {}, workdir=workdir or self.spec.workdir, user=user or self.spec.user)["Id"]
            stream = api.exec_start(exec_id, stream=True)
        tail = TailBuffer(tail_bytes)
        broke: list[BaseException] = []

        def pump():
            try:
                for chunk in stream:
                    tail.write(chunk)
                    if on_output:
                        on_output(chunk)
            except (*ENGINE_ERRORS, OSError) as exc:
                broke.append(exc)  # the container was killed under us (the caller learns why below), or the stream broke

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        deadline = started + timeout
        while reader.is_alive():
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                reader.join(10)
                raise SandboxTimeout(f"Timed out after {timeout:g} s.", output=tail.text())
            reader.join(min(left, LIVENESS_SECONDS))
            if reader.is_alive() and self._stopped():
                # The container died under the exec, whose stream then never
                # ends: under gVisor the kernel OOM-kills the whole sandbox.
                reader.join(1)
                break
        output = tail.text()
        exit_code, stopped = None, self._stopped()
        if not stopped:
            with self.engine_errors("finish a command"):
                exit_code = api.exec_inspect(exec_id)["ExitCode"]
            stopped = self._dying(exit_code)
        if stopped:
            if self._oom_killed():
                raise SandboxOutOfMemory(f"Killed: out of memory (limit {self.spec.limits.memory_mb} MB).", output=output)
            # Stopped by the workload (charged) or by the platform (refunded): the evidence decides.
            if died := self.diagnose(check_limits=False):
                died.output = output
                raise died
            raise SandboxPlatformError(f"The sandbox stopped during a command (exit code {self.container.attrs['State'].get('ExitCode')}).")
        if exit_code != 0 and self._killed:
            # Killed by the platform from another thread (a cancel). Under gVisor the exec can end (137) before the engine
            # sees the container stop, which read as the command's own exit (seen once in CI's contract test).
            raise SandboxPlatformError(f"The sandbox was stopped by the platform during a command (exit code {exit_code}).", output=output)
        if exit_code != 0 and (died := self.diagnose(check_limits=False)):
            died.output = output
            raise died
        if exit_code != 0 and self._out_of_memory():
            raise SandboxOutOfMemory(f"Killed: out of memory (limit {self.spec.limits.memory_mb} MB).", output=output)
        if broke:
            # The command ran to its end in a sandbox still running, but the engine's stream of its output broke:
            # what came is not all it printed, and a caller reading it (a verdict, a list of files) must not take
            # a part for the whole.
            raise SandboxPlatformError(f"The engine's stream of a command's output broke (the command exited {exit_code}): {explain(broke[0])}", output=output)
        return ExecResult(exit_code=exit_code if exit_code is not None else -1, output=output, duration=time.monotonic() - started)

    def open_session(self, argv: list[str], *, env: dict[str, str] | None = None, user: str | None = None, workdir: str | None = None) -> "DockerSession":
        """A long-lived process fed through stdin and read line by line from stdout."""
        api = self.client.api
        with self.engine_errors("start a session"):
            exec_id = api.exec_create(
                self.container.id, argv, stdin=True, environment=env or {}, user=user or self.spec.user, workdir=workdir or self.spec.workdir
            )["Id"]
            sock = api.exec_start(exec_id, socket=True)
        return DockerSession(sock)

    def put_archive(self, directory: str, chunks: Iterable[bytes], *, user: str | None = None):
        """Unpack a tar stream into `directory` through an exec's stdin, as `user` (the sandbox user by default).

        Docker's own archive API writes beneath tmpfs mounts, not into them,
        so the tar goes in as a stream instead: in length-prefixed frames
        ending with an empty one, because the end of stdin cannot be said by
        half-closing the connection over TLS (a remote engine), only over a
        plain socket.
        """
        with self.engine_errors("place files"):
            self._put_archive(directory, chunks, user or self.spec.user)

    def _put_archive(self, directory: str, chunks: Iterable[bytes], user: str):
        api = self.client.api
        # The system's own tools, whatever the image or the workload put first on its PATH, and an isolated Python (-I -S:
        # no user site, no PYTHON* variable, no site at all): a workload's start-up hook must not run in the platform's.
        command = f"mkdir -p {shlex.quote(directory)} && /usr/bin/python3 -I -S -c {shlex.quote(_UNFRAME)} | tar -x --no-same-owner -C {shlex.quote(directory)}"
        exec_id = api.exec_create(self.container.id, ["sh", "-c", command], stdin=True, user=user, environment={"PATH": SYSTEM_PATH})["Id"]
        sock = api.exec_start(exec_id, socket=True)
        raw = getattr(sock, "_sock", sock)
        try:
            for chunk in chunks:
                if chunk:
                    raw.sendall(len(chunk).to_bytes(4, "big") + chunk)
            raw.sendall(bytes(4))
            output = _drain(raw)
        finally:
            sock.close()
        for _ in range(50):
            info = api.exec_inspect(exec_id)
            if not info["Running"]:
                break
            time.sleep(0.05)
        if info["ExitCode"] != 0:
            raise LaunchFailed(f"Could not place files in the sandbox: {output[-500:].decode(errors='replace')}")

    def read_file(self, path: str, max_bytes: int) -> bytes:
        """A file's content; SandboxFileMissing or SandboxFileTooLarge otherwise."""
        with self.engine_errors("read a file"):
            result = self._exec_bytes(["/bin/sh", "-c", 'test -f "$1" || exit 3; head -c "$2" "$1"', "sh", path, str(max_bytes + 1)])
        if result is None:
            raise SandboxFileMissing(f"{path} was not written.")
        if len(result) > max_bytes:
            raise SandboxFileTooLarge(f"{path} is larger than {max_bytes} bytes.")
        return result

    def end_processes(self, user: str) -> bool:
        uid = user.split(":")[0]
        api = self.client.api
        deadline = time.monotonic() + KILLER_SECONDS
        while time.monotonic() < deadline:
            # A plain exec, not `exec`: a killer killed (137) is no news of the sandbox's health to wait on.
            with self.engine_errors("end a user's processes"):
                exec_id = api.exec_create(
                    self.container.id, ["/bin/sh", "-c", KILLER, "killer", uid], user=user, environment={"PATH": SYSTEM_PATH}, workdir="/"
                )["Id"]
                # Detached, its end polled up to the deadline: attached, a killer that never got going under a fork
                # bomb (gVisor) held the call on the engine's socket with no deadline (a trial stuck past 300 s in CI).
                try:
                    api.exec_start(exec_id, detach=True)
                except docker_errors.APIError as exc:
                    # The runtime could not start the killer's process: the processes it would kill hold every
                    # place (EAGAIN). Another round takes one when one frees; anything else is the engine's.
                    if "try again" not in str(exc):
                        raise
                    code = None
                else:
                    code = self._exit_code(exec_id, time.monotonic() + KILLER_RUN_SECONDS)
            if code not in (EXEC_FAILED, SIGKILLED, None):
                return code == 0
            time.sleep(0.02)
        # No killer lived to its end: a fork bomb's processes or a full memory left it no room, the workload's doing.
        if died := self.diagnose():
            raise died
        return False

    def _exit_code(self, exec_id: str, deadline: float) -> int | None:
        """The exec's exit code once it ended, or None if it had not by the deadline."""
        api = self.client.api
        while True:
            info = api.exec_inspect(exec_id)
            if not info["Running"] and info["ExitCode"] is not None:
                return info["ExitCode"]
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.01)

    def fetch(self, path: str, max_bytes: int) -> bytes:
        """A regular file of an `outside` folder, read by the engine (its archive API): nothing inside the sandbox runs."""
        with self.engine_errors("read a file from outside the sandbox"):
            try:
                stream, stat = self.container.get_archive(path, chunk_size=65536)
            except docker_errors.NotFound:
                raise SandboxFileMissing(f"{path} was not written.") from None
            try:
                mode = int(stat.get("mode", 0))
                if mode & ~0o7777:
                    # Go's FileMode type bits: a folder, a link (its linkTarget), a FIFO, a device or a socket.
                    raise SandboxFileRefused(f"{path} is not a regular file ({_file_type(mode, stat.get('linkTarget'))}); it was not read.")
                if int(stat.get("size", 0)) > max_bytes:
                    raise SandboxFileTooLarge(f"{path} is larger than {max_bytes} bytes.")
                data = bytearray()
                for chunk in stream:
                    data += chunk
                    if len(data) > max_bytes + 2048:  # the tar's header and padding, past the checked size: it grew meanwhile
                        raise SandboxFileTooLarge(f"{path} is larger than {max_bytes} bytes.")
            finally:
                stream.close() if hasattr(stream, "close") else None
        with tarfile.open(fileobj=io.BytesIO(bytes(data)), mode="r:") as archive:
            member = archive.next()
            if member is None or not member.isreg() or member.size > max_bytes:
                raise SandboxFileRefused(f"{path} is not a regular file of at most {max_bytes} bytes; it was not read.")
            return archive.extractfile(member).read()

    def _exec_bytes(self, argv: list[str]) -> bytes | None:
        api = self.client.api
        exec_id = api.exec_create(self.container.id, argv, user=self.spec.user, stdout=True, stderr=False, environment={"PATH": SYSTEM_PATH})["Id"]
        stdout = api.exec_start(exec_id, demux=True)[0] or b""
        return None if api.exec_inspect(exec_id)["ExitCode"] == 3 else stdout

    def _dying(self, exit_code: int) -> bool:
        """Whether an exec that ended with this code did so because its whole sandbox is going.

        gVisor kills the whole sandbox when it runs out of memory, and runsc
        then ends the exec itself (exit 128, "urpc method
        containerManager.WaitPID failed: EOF") a moment before the engine
        sees the container stop: wait for that moment, bounded.
        """
        # An exec killed (137) as the engine removes or stops its container ends a moment before the
        # container leaves "running" (seen under load: a run the engine removed was charged as failed).
        if exit_code != SIGKILLED and (not is_gvisor(self.runtime) or exit_code != RUNSC_EXEC_FAILED):
            return False
        for _ in range(15):
            if self._stopped():
                return True
            time.sleep(0.2)
        return False

    def _stopped(self) -> bool:
        with engine_errors("check on the sandbox"):
            self.container.reload()
        return self.container.status != "running"

    def _oom_killed(self) -> bool:
        # The engine records the OOM kill from an event that can trail the exit by a moment.
        for _ in range(5):
            if self.container.attrs["State"].get("OOMKilled"):
                return True
            time.sleep(0.2)
            with engine_errors("check on the sandbox"):
                self.container.reload()
        return False

    def kill(self):
        self._killed = True
        try:
            self.container.kill()
        except ENGINE_ERRORS:
            pass

    @contextmanager
    def engine_errors(self, doing: str):
        """Docker failing under a running sandbox: the workload's doing when the
        evidence says so (see `diagnose`), otherwise the platform's."""
        try:
            yield
        except ENGINE_ERRORS as exc:
            died = self.diagnose()
            if died:
                raise died from exc
            raise SandboxPlatformError(f"The Docker engine failed while trying to {doing}: {explain(exc)}") from exc

    def diagnose(self, *, check_limits: bool = True) -> SandboxUserError | None:
        """Why the sandbox stopped or chokes, if the workload caused it; None otherwise.

        The evidence, in order: an engine that does not answer is a platform
        fault (host lost, dockerd down); a container that is gone, or that
        the engine was asked to kill (its `kill` event: an operator, the
        reaper, a daemon shutdown), was stopped by the platform; one this
        Sandbox killed (timeout, cancel) is reported by whoever killed it. A
        container that stopped with no such request stopped from inside:
        PID 1 or its keep-alive killed, or the kernel OOM-killed the cgroup.
        A running one at its pids limit can start no exec: a fork bomb.
        """
        try:
            self.client.ping()
            self.container.reload()
        except ENGINE_ERRORS:
            return None
        if self._killed:
            return None
        state = self.container.attrs.get("State", {})
        if not state.get("Running"):
            actions = self._engine_actions()
            if actions is None or "kill" in actions:
                return None
            if state.get("OOMKilled") or "oom" in actions:
                return SandboxOutOfMemory(f"The sandbox was stopped: out of memory (limit {self.spec.limits.memory_mb} MB).")
            return SandboxDied(
                f"The sandbox stopped from inside while running (its main process exited with code {state.get('ExitCode')}), "
                f"e.g. a command killed its PID 1 or keep-alive process.{self._last_words()}"
            )
        if not check_limits:
            return None
        stats = self._stats()
        if self._pids_exhausted(stats):
            return SandboxDied(f"The sandbox reached its limit of {self.spec.limits.pids} processes and could start no more.")
        if self._memory_exhausted(stats):
            return SandboxOutOfMemory(f"The sandbox's memory is full (limit {self.spec.limits.memory_mb} MB): no command can start in it.")
        return None

    def _last_words(self) -> str:
        """What the sandbox's init and keep-alive said last, if anything: tini names its own failures there.

        Only PID 1 and its keep-alive write to the container's log (a workload's
        execs have their own streams, and its uid cannot reach theirs).
        """
        try:
            said = self.container.logs(stdout=True, stderr=True, tail=LAST_WORDS_LINES)
        except ENGINE_ERRORS:
            return ""
        said = said.decode(errors="replace").strip()[-LAST_WORDS_CHARS:]
        return f" Its last words: {said}" if said else ""

    def _engine_actions(self) -> set[str] | None:
        """What the engine recorded happening to this container (kill, oom, die…); None if unknown."""
        try:
            events = self.client.api.events(
                since=self._started_at, until=int(time.time()) + 1, filters={"container": [self.container.id], "type": ["container"]}, decode=True
            )
            return {event.get("Action", "") for event in events}
        except ENGINE_ERRORS:
            return None

    def _stats(self) -> dict:
        """The engine's one look at the container's pids and memory; {} when it does not answer."""
        try:
            return self.container.stats(stream=False, one_shot=True)
        except ENGINE_ERRORS:
            return {}

    def _pids_exhausted(self, stats: dict) -> bool:
        pids = stats.get("pids_stats") or {}
        limit = pids.get("limit") or self.spec.limits.pids
        return bool(pids.get("current")) and pids["current"] >= limit

    def _memory_exhausted(self, stats: dict) -> bool:
        """Whether what the sandbox holds fills its memory: the runtime's process for an exec is then OOM-killed as it
        starts ("read init-p: connection reset by peer (possibly OOM-killed)"), seen when an agent filled its tmpfs.

        Held means not reclaimable: the cgroup's usage less its inactive file cache (as `docker stats` counts it);
        what a tmpfs holds stays. Measured here (runc, cgroup v1): an exec still starts with 2 MiB left.
        """
        memory = stats.get("memory_stats") or {}
        counts = memory.get("stats") or {}
        held = memory.get("usage", 0) - counts.get("total_inactive_file", counts.get("inactive_file", 0))
        limit = memory.get("limit") or self.spec.limits.memory_mb << 20
        return bool(memory.get("usage")) and held >= limit - MEMORY_FULL_MARGIN

    def _out_of_memory(self) -> bool:
        """Whether a command that failed did so for memory: a kill the cgroup counted, or, when the look inside got
        no answer (it is an exec, OOM-killed itself in a full sandbox), a memory full as the engine sees it."""
        killed = self._new_oom_kill()
        return killed if killed is not None else self._memory_exhausted(self._stats())

    def _new_oom_kill(self) -> bool | None:
        """Whether the kernel OOM-killed anything in this sandbox since the last look; None when the look got no
        answer (its own exec killed before it could say).

        Docker's own OOMKilled flag only covers the container's main process,
        never an exec, so the cgroup's counter is read instead (v1 and v2
        paths; the cgroup files are read-only inside the sandbox).
        """
        script = "cat /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null; echo looked"
        with self.engine_errors("look for out-of-memory kills"):
            output = self._exec_bytes(["sh", "-c", script]) or b""
        if b"looked" not in output:
            return None
        count = sum(int(line.split()[1]) for line in output.decode().splitlines() if line.startswith("oom_kill "))
        seen, self._oom_kills = self._oom_kills, count
        return count > seen


class DockerSession(Session):
    """Line-oriented talk with one exec: `send` to its stdin, `read_line` from its stdout.

    Docker multiplexes the exec's stdout and stderr over one socket in frames
    (an 8-byte header: stream id, then the payload length); a reader thread
    unpacks them, queues stdout lines and keeps a tail of stderr.
    """

    def __init__(self, sock):
        self._sock = sock
        self._raw = getattr(sock, "_sock", sock)
        self._raw.settimeout(None)
        # Read through the buffered reader that http.client parsed the exec's
        # "101 Upgraded" answer with, never the raw socket beneath it: when this
        # thread is slow to parse that answer (a busy machine), the process's
        # first output has already arrived and sits in that reader's buffer.
        # Reading the raw socket lost it: a humaneval runner's BV-READY line
        # vanished, the slot waited 60 s and failed an honest sample.
        self._stream = _response_reader(sock)
        self._lines: queue.Queue = queue.Queue()
        self.stderr = TailBuffer(4096)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        pending = b""
        try:
            while header := self._recv_exactly(8):
                payload = self._recv_exactly(int.from_bytes(header[4:8], "big"))
                if payload is None:
                    break
                if header[0] == 2:
                    self.stderr.write(payload)
                    continue
                pending += payload
                *complete, pending = pending.split(b"\n")
                for line in complete:
                    self._lines.put(line)
        except (OSError, ValueError):  # ValueError: the buffered reader was closed under us
            pass
        finally:
            self._lines.put(None)  # end of stream

    def _recv_exactly(self, size: int) -> bytes | None:
        if self._stream is not None:
            data = self._stream.read(size)  # a blocking BufferedReader: all `size` bytes, or fewer at end of stream
            return data if len(data) == size else None
        data = b""
        while len(data) < size:
            chunk = self._raw.recv(size - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    def send(self, data: bytes):
        try:
            self._raw.sendall(data)
        except OSError as exc:
            raise SandboxPlatformError(f"The sandbox session closed: {exc}") from exc

    def read_line(self, timeout: float) -> bytes | None:
        """The next stdout line; None once the process has ended. SandboxTimeout past `timeout`."""
        try:
            return self._lines.get(timeout=timeout)
        except queue.Empty:
            raise SandboxTimeout(f"No answer within {timeout:g} s.") from None

    def close(self):
        try:
            self._sock.close()
        except OSError:
            pass


def _response_reader(sock):
    """The BufferedReader of the HTTP response docker-py hijacked the socket from, when it kept one."""
    try:
        reader = sock._response.raw._fp.fp
    except AttributeError:
        return None
    return reader if reader is not None and getattr(reader, "raw", None) is sock else None


def _tmpfs(folder: Folder, size_mb: int) -> str:
    return f"rw,exec,nosuid,nodev,size={size_mb}m,uid={folder.uid},gid={folder.uid},mode={folder.mode:04o}"


def _file_type(mode: int, link: str | None) -> str:
    kinds = {1 << 31: "a folder", 1 << 27: f"a link to {link!r}", 1 << 25: "a named pipe", 1 << 26: "a device", 1 << 24: "a socket"}
    return next((name for bit, name in kinds.items() if mode & bit), "a special file")


def _seeded_folders(labels: dict[str, str]) -> list[str]:
    try:
        folders = json.loads(labels.get(LABEL_SEED) or "[]")
    except ValueError:
        return []
    return [f for f in folders if isinstance(f, str)] if isinstance(folders, list) else []


def _age(container) -> float:
    """Seconds since the engine made the container."""
    made = container.attrs.get("Created", "")
    try:
        return time.time() - datetime.fromisoformat(made.replace("Z", "+00:00")[:26] + "+00:00").timestamp()
    except ValueError:
        return 0.0


def _process_limits(runtime: str, pids: int) -> dict:
    """The process limit, placed where it holds under each runtime.

    runc: the pids cgroup counts the sandbox's processes. runsc: the cgroup
    counts the gVisor kernel's host threads instead, which a fork bomb held
    at its limit still drives into the thousands, and a refused thread kills
    the whole sandbox. So under runsc the host bound only guards the host
    (at 32 threads a process it still killed sandboxes here), and the
    sandbox's own processes are capped per uid by RLIMIT_NPROC, which gVisor
    enforces inside.
    """
    nofile = Ulimit(name="nofile", soft=4096, hard=4096)
    if is_gvisor(runtime):
        return {"pids_limit": max(pids * 64, 16384), "ulimits": [nofile, Ulimit(name="nproc", soft=pids, hard=pids)]}
    return {"pids_limit": pids, "ulimits": [nofile]}


# Runs in the sandbox: copies length-prefixed frames from stdin to stdout until an empty one.
_UNFRAME = "import sys\ni, o = sys.stdin.buffer, sys.stdout.buffer\nwhile n := int.from_bytes(i.read(4), 'big'):\n    o.write(i.read(n))\n"


def _drain(raw) -> bytes:
    raw.settimeout(API_TIMEOUT)
    data = b""
    while chunk := raw.recv(65536):
        data += chunk
    return data
