"""One taxonomy for everything that can go wrong in a sandbox.

User errors are the sandboxed code's doing (non-zero exit, timeout, out of
memory, an oversized or missing file): the user pays for the run. Platform
errors are ours (the engine down, image missing, no capacity): at launch
they refund. Every backend raises these same classes (backend.py). Callers
map them to run statuses in one place; the API's HTTP answer comes from
`status_code` (belvedir/core/api_errors.py).
"""


class SandboxError(Exception):
    def __init__(self, message: str, *, output: str = ""):
        super().__init__(message)
        self.message = message
        self.output = output


class SandboxUserError(SandboxError):
    pass


class SandboxTimeout(SandboxUserError):
    pass


class SandboxOutOfMemory(SandboxUserError):
    pass


class SandboxDied(SandboxUserError):
    """The container stopped, or could start no process, while the engine was
    healthy and nobody on the platform stopped it: the workload's doing
    (killing PID 1, exhausting pids). Charged like any other failure."""


class SandboxFileMissing(SandboxUserError):
    pass


class SandboxFileTooLarge(SandboxUserError):
    pass


class SandboxFileRefused(SandboxUserError):
    """Not a regular file (a link, a named pipe, a device): the workload's doing, and never read."""


class SandboxPlatformError(SandboxError):
    pass


class BackendUnavailable(SandboxPlatformError):
    """The host's engine does not answer: its host is marked unhealthy and the launch moves (launch.py)."""


class DockerUnavailable(BackendUnavailable):
    pass


class ImageMissing(SandboxPlatformError):
    pass


class NoCapacity(SandboxPlatformError):
    status_code = 409  # the API's answer when a start finds no room (nothing was charged)


class ProjectAtLimit(NoCapacity):
    """The project already has as much work in progress as one project may."""


class LaunchFailed(SandboxPlatformError):
    pass


class ImageBuildFailed(SandboxUserError):
    """An image's recipe (a task's RUN lines) failed to build: a step exited non-zero, ran out of time or wrote too much."""


class BuildInProgress(SandboxPlatformError):
    """Another worker is building the same image on this engine: wait for it (images.py), never a failure of its own."""
