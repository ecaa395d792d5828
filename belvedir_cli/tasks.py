"""`bv tasks`: agent task sets in Harbor's format, imported from a folder and listed."""

import io
import tarfile
import tempfile
from pathlib import Path

import click

from .client import ApiError
from .terminal import client, json_option, output
from .upload import MultipartFile

# Folders a task's author keeps beside it but that are no part of it.
SKIPPED = {".git", "__pycache__", ".venv", "node_modules"}


@click.group()
def tasks():
    """Agent task sets (Harbor's format): import a folder, list the sets."""


def pack_folder(folder: Path) -> bytes:
    """The folder as a .tar.gz in memory, its files under the folder's own name (a folder that is itself a task
    takes its name from it). Links are refused here as the server would refuse them."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for path in sorted(folder.rglob("*")):
            relative = path.relative_to(folder)
            if SKIPPED & set(relative.parts):
                continue
            if path.is_symlink():
                raise ApiError(f"{path}: a link; a task archive holds plain files only")
            if path.is_file():
                tar.add(path, arcname=f"{folder.name}/{relative.as_posix()}", recursive=False)
    return out.getvalue()


@tasks.command("import")
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--name", required=True, help="The task set's name; an existing set gets a new version when the content changed.")
@json_option
def tasks_import(folder, name):
    """Import FOLDER (a task directory, or a folder of them) as a task set's version."""
    folder = folder.resolve()
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / f"{folder.name}.tar.gz"
        archive.write_bytes(pack_folder(folder))
        version = client().upload("task-sets", MultipartFile({"name": name}, "file", archive, content_type="application/gzip"))
    if click.get_current_context().obj.get("json"):
        return output(version)
    output(
        [{**t, "version": version["number"], "unknown_keys": ", ".join(t["unknown_keys"])} for t in version["tasks"]],
        ["version", "name", "agent_timeout_sec", "verifier_timeout_sec", "has_solution", "unknown_keys"],
    )


@tasks.command("list")
@json_option
def tasks_list():
    """Each task set with its latest version."""
    output(client().get("task-sets"), ["id", "name", "latest_version", "created_at"])
