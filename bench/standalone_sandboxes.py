"""Code sandboxes of their own on a backend the caller brings, with no lease: for benches, and the tests that try them.

An eval's come from `launch.layout` under its lease (evals/tasks.py); these
are opened straight on an engine, laid out as an eval's are, so a bench
measures what an eval gets. Import it once Django is set up.
"""

from contextlib import contextmanager

from belvedir.sandbox import launch
from belvedir.sandbox.backend import Backend
from belvedir.sandbox.owners import Owner
from evals.code_sandbox import MEMORY_MB, CodeSandbox, CodeSandboxes, code_sandbox_layout, code_sandbox_spec

# Not an "eval" owner: the reaper would take it for an ended eval's sandbox.
OWNER_KIND = "standalone"


@contextmanager
def standalone_code_sandbox(name: str, backend: Backend, *, slots: int = 4, timeout: int = 10, memory_mb: int = MEMORY_MB, runtime: str = "auto"):
    """One sandbox holding every slot, whatever the runtime would lay out."""
    spec = code_sandbox_spec(Owner(OWNER_KIND, name), slots=slots, memory_mb=memory_mb, runtime=runtime)
    with backend.sandbox(spec) as box, CodeSandbox(box, slots=slots, timeout=timeout, memory_mb=memory_mb) as code:
        yield code


@contextmanager
def standalone_code_sandboxes(name: str, backend: Backend, *, slots: int = 4, timeout: int = 10, memory_mb: int = MEMORY_MB, runtime: str = "auto"):
    """The sandboxes an eval of `slots` gets under `runtime` on `backend` (`code_sandbox_layout`), scoring as one."""
    specs = code_sandbox_layout(Owner(OWNER_KIND, name), slots=slots, runtime=backend.runtime(runtime), memory_mb=memory_mb)
    with launch.sandboxes(backend, specs) as boxes, CodeSandboxes.opened(boxes, slots=slots, timeout=timeout, memory_mb=memory_mb) as scorer:
        yield scorer
