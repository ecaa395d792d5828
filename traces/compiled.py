"""Which trace ingest modules are compiled with Cython, and whether a build still matches its source.

Storing a batch runs these modules once per span (parsing, extraction of
columns and messages, the COPY rows): ~15,000 dict operations per 1,000-span
request, which is interpreter overhead more than work. `scripts/compile.py`
compiles the same source, unchanged, to C; where it cannot (no C compiler),
the modules run as plain Python, slower.

Python imports a compiled module (`otlp.cpython-311-x86_64-linux-gnu.so`) in
place of its source, so a source edited after the build would silently not
run. Each build records its source's digest, and the app refuses to start
(traces/apps.py) while a compiled module's source differs from it.
"""

import hashlib
import json
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODULES = ("otlp", "extract", "messages", "ingest")
DIGESTS = HERE / "compiled-sources.json"


def source(name: str) -> Path:
    return HERE / f"{name}.py"


def builds(name: str) -> list[Path]:
    """The compiled files this interpreter would import for `name` (none: it runs as plain Python)."""
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


def stale() -> list[str]:
    """Compiled modules whose source changed after they were built: Python would run the old code."""
    return [name for name in MODULES if builds(name) and not current(name)]


def record(names: list[str]):
    DIGESTS.write_text(json.dumps({**recorded(), **{name: digest(name) for name in names}}, indent=1, sort_keys=True))


def remove(name: str):
    for path in builds(name):
        path.unlink()
