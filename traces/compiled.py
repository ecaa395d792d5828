"""Which trace ingest modules are compiled with Cython, and which build or source this process runs.

Storing a batch runs these modules once per span (parsing, extraction of
columns and messages): ~15,000 dict operations per 1,000-span request, which
is interpreter overhead more than work. `scripts/compile.py` compiles the
same source, unchanged, to C; where it cannot (no C compiler), the modules
run as plain Python, slower.

Only pure parsing code is compiled. traces/ingest.py (the ORM, COPY and the
session upsert) was too until 2026-12-02; counted with callgrind (instructions
do not depend on the machine's load), parsing and building the rows of a
1,000-span batch took 769.1 M instructions with all four compiled, 770.3 M
with ingest.py as plain Python (+0.16 %) and 832.9 M with none (+8.3 %): the
parsing modules pay for their build, ingest.py's did not.

Python imports a compiled module (`otlp.cpython-311-x86_64-linux-gnu.so`) in
place of its source, so a source edited after the build would silently not
run. Each build records its source's digest, and `Builds`, a finder that
`traces/__init__.py` puts first on `sys.meta_path`, imports a module's build
only while it matches that digest and loads; otherwise the source, with one
warning (and the system check belvedir.W005) saying to run scripts/compile.py.
"""

import ctypes
import functools
import hashlib
import json
import logging
from importlib.machinery import EXTENSION_SUFFIXES
from importlib.util import spec_from_file_location
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODULES = ("otlp", "extract", "messages")
DIGESTS = HERE / "compiled-sources.json"
REBUILD = "run `.venv/bin/python scripts/compile.py` (as `make run` and `make test` do) and restart"

log = logging.getLogger(__name__)


def source(name: str) -> Path:
    return HERE / f"{name}.py"


def builds(name: str) -> list[Path]:
    """The compiled files for `name` in the order this interpreter's own finder would pick one (none: plain Python)."""
    return [path for suffix in EXTENSION_SUFFIXES if (path := HERE / f"{name}{suffix}").exists()]


def digest(name: str) -> str:
    return hashlib.sha256(source(name).read_bytes()).hexdigest()


def recorded() -> dict[str, str]:
    try:
        return json.loads(DIGESTS.read_text())
    except (FileNotFoundError, ValueError):
        return {}


def current(name: str) -> bool:
    """Built from the source as it is now."""
    return bool(builds(name)) and recorded().get(name) == digest(name)


def unusable(name: str) -> str:
    """Why `name`'s build would not run its source as it is now ('' when it would)."""
    if not builds(name):
        return "is not compiled"
    if not current(name):
        return "changed after it was compiled"
    try:
        # dlopen is what importing it would do first (a truncated build, one
        # for another machine); the handle stays open, so the import reuses it.
        getattr(ctypes.CDLL(str(builds(name)[0])), f"PyInit_{name}")
    except (OSError, AttributeError) as exc:
        return f"has a build that does not load ({exc})"
    return ""


@functools.cache
def plain() -> dict[str, str]:
    """The modules this process runs from their source instead of their build, and why: decided once, and warned once."""
    reasons = {name: why for name in MODULES if (why := unusable(name))}
    if reasons:
        log.warning("Trace ingest runs as plain Python, slower: %s; %s.", "; ".join(f"traces/{name}.py {why}" for name, why in reasons.items()), REBUILD)
    return reasons


class Builds:
    """Imports each compiled module from its build, or from its source where `plain()` says so."""

    def find_spec(self, fullname, path=None, target=None):
        package, _, name = fullname.rpartition(".")
        if package != __package__ or not source(name).exists():
            return None
        if name not in MODULES:
            # A build left from when the module was compiled would shadow its source: the source runs.
            return spec_from_file_location(fullname, source(name)) if builds(name) else None
        return spec_from_file_location(fullname, source(name) if name in plain() else builds(name)[0])


def record(names: list[str]):
    DIGESTS.write_text(json.dumps({**recorded(), **{name: digest(name) for name in names}}, indent=1, sort_keys=True))


def stray() -> list[str]:
    """Modules with a build that are no longer compiled (ingest.py's, from before 2026-12-02)."""
    return sorted({path.name.split(".", 1)[0] for suffix in EXTENSION_SUFFIXES for path in HERE.glob(f"*{suffix}")} - set(MODULES))


def remove(name: str):
    for path in builds(name):
        path.unlink()
