"""The sandbox backends, by the name a SandboxHost gives (`SandboxHost.backend`).

Written out, not registered by decorators at import (Inspect's
`@sandboxenv`): which backends exist is read here, in one place. Nothing
outside the sandbox package imports this package or a module in it
(tests/test_import_rules.py): apps reach a backend only through
`launch.workload`.
"""

from ..backend import Backend
from ..engine import Engine
from ..errors import LaunchFailed
from ..models import SandboxHost, backend_choices
from .docker import DockerBackend
from .fake import FakeBackend

BACKENDS: dict[str, type[Backend]] = {backend.name: backend for backend in (DockerBackend, FakeBackend)}


def get(name: str, engine: Engine | str) -> Backend:
    """The backend `name` on `engine`; LaunchFailed (a platform error) where settings do not allow it."""
    if name not in dict(backend_choices()):
        raise LaunchFailed(f"The sandbox backend {name!r} is not allowed on this platform (settings.SANDBOX_ALLOW_FAKE_BACKEND).")
    return BACKENDS[name](engine)


def for_host(host: SandboxHost) -> Backend:
    return get(host.backend, host.engine)
