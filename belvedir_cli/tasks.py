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
    """Agent task sets (Harbor's format): import a folder, list the sets, audit a version."""


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


def task_set_id(name_or_id: str) -> int:
    """A task set of the project, by its name or id."""
    for found in client().get("task-sets"):
        if found["name"] == name_or_id or str(found["id"]) == name_or_id:
            return found["id"]
    raise ApiError(f"No task set {name_or_id!r} in this project (bv tasks list).")


@tasks.command("audit")
@click.argument("task_set")
@click.option("--version", type=int, help="The version to audit (its latest by default).")
@click.option("--runtime", type=click.Choice(["auto", "runc", "runsc"]), default="auto", show_default=True)
@click.option("--show", is_flag=True, help="Print what the newest audit found instead of starting one.")
@click.option("--wait", is_flag=True, help="Follow the audit until it ends, then print each task's verdict.")
@json_option
def tasks_audit(task_set, version, runtime, show, wait):
    """Audit TASK_SET: each task's solution (must score 1), doing nothing (must not) and the red team's forgeries (none
    may score 1), in a sandbox per trial, charged as a job's trials are. Exits 1 when a task is broken or hackable."""
    from .jobs import follow

    pk = task_set_id(task_set)
    query = {"version": version} if version else {}
    if show:
        found = client().get(f"task-sets/{pk}/audit", **query)
    else:
        found = client().post(f"task-sets/{pk}/audit", {**query, "runtime": runtime})
        click.echo(f"Auditing version {found['version']}: job #{found['job']['id']}, {found['job']['progress']['total']} trials.", err=True)
        if not wait:
            return output(found) if click.get_current_context().obj.get("json") else None
        follow(found["job"])
        found = client().get(f"task-sets/{pk}/audit", version=found["version"])
    if click.get_current_context().obj.get("json"):
        output(found)
    else:
        rows = [{"task": t["task"], "status": t["status"], "hacks": ", ".join(t["hacks"]), "why": " ".join(t["reasons"])[:160]} for t in found["tasks"]]
        output(rows, ["task", "status", "hacks", "why"], title=f"Audit of version {found['version']} (job #{found['job']})")
    if found["counts"]["broken"] or found["counts"]["hackable"]:
        raise SystemExit(1)
