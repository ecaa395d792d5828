"""`bv datasets`: datasets, their versions and the diffs between them, uploads, and rows made of traces."""

from pathlib import Path

import click

from .terminal import client, id_by_name, json_option, output
from .traces import clip
from .upload import MultipartFile

INPUTS = ["first_user_message", "conversation"]


@click.group()
def datasets():
    """Datasets: versions, diffs, uploads and rows made of traces."""


def dataset_id(name_or_id: str) -> int:
    return id_by_name("datasets", name_or_id, "No dataset named {name} in this project (see `bv datasets list`).")


@datasets.command("list")
@json_option
def datasets_list():
    """Each dataset with its latest version and that version's row count."""
    output(client().get("datasets"), ["id", "name", "version", "row_count", "created_at"])


@datasets.command("versions")
@click.argument("dataset")
@json_option
def datasets_versions(dataset):
    """A dataset's versions, newest first: rows, what each changed from the one before, who made it."""
    output(client().get(f"datasets/{dataset_id(dataset)}/versions"), ["number", "row_count", "added", "edited", "removed", "note", "created_by", "created_at"])


@datasets.command("rows")
@click.argument("dataset")
@click.option("--version", type=int, help="This version's rows; the latest by default.")
@click.option("--limit", type=int, default=100, show_default=True)
@json_option
def datasets_rows(dataset, version, limit):
    """A version's rows, in order."""
    rows = client().all(f"datasets/{dataset_id(dataset)}/rows", at_most=limit, **({"version": version} if version else {}))
    if click.get_current_context().obj["json"]:
        return output(rows)
    output([{**r, "input": clip(r["input"], 60), "expected": clip(r["expected"], 40)} for r in rows], ["position", "input", "expected", "since_version"])


@datasets.command("diff")
@click.argument("dataset")
@click.argument("version", type=int, required=False)
@click.option("--base", type=int, help="The older version; the one before VERSION by default.")
@json_option
def datasets_diff(dataset, version, base):
    """What VERSION (the latest by default) changed: rows added (+), edited (~, before → after) and removed (-)."""
    params = {k: v for k, v in {"version": version, "base": base}.items() if v is not None}
    body = client().get(f"datasets/{dataset_id(dataset)}/diff", **params)
    if click.get_current_context().obj["json"]:
        return output(body)
    counts = body["counts"]
    click.echo(f"Version {body['version']} against version {body['base']}: {counts['added']} added, {counts['edited']} edited, {counts['removed']} removed")
    for row in body["added"]:
        click.echo(f"+ row {row['position']}: {clip(row['input'], 60)} → {clip(row['expected'], 40)}")
    for change in body["edited"]:
        before, after = change["before"], change["after"]
        for field in ("input", "expected"):
            if before[field] != after[field]:
                click.echo(f"~ row {after['position']} {field}: {clip(before[field], 50)} → {clip(after[field], 50)}")
    for row in body["removed"]:
        click.echo(f"- row {row['position']}: {clip(row['input'], 60)} → {clip(row['expected'], 40)}")


@datasets.command("upload")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--name", help="A new dataset's name.")
@click.option("--into", "into", help="Or an existing dataset (name or id): the file's rows are its next version.")
@click.option("--replace", is_flag=True, help="With --into: the file's rows take the places of the dataset's, row for row, instead of being added.")
@json_option
def datasets_upload(path, name, into, replace):
    """Upload a JSONL file ({"input", "expected"} per line) or a CSV (a header naming input and expected)."""
    if bool(name) == bool(into):
        raise click.UsageError("Give --name for a new dataset, or --into DATASET for the next version of one.")
    if replace and not into:
        raise click.UsageError("--replace replaces the rows of a dataset: give --into DATASET.")
    content_type = "text/csv" if path.suffix.lower() == ".csv" else "application/jsonl"
    if into:
        body = MultipartFile({"replace": "true" if replace else "false"}, "file", path, content_type=content_type)
        return output(client().upload(f"datasets/{dataset_id(into)}/upload", body), ["number", "row_count", "added", "edited", "removed", "note"])
    output(client().upload("datasets", MultipartFile({"name": name}, "file", path, content_type=content_type)), ["id", "name", "version", "row_count"])


@datasets.command("add-from-traces")
@click.argument("dataset", required=False)
@click.option("--new", "new_name", help="Make a new dataset of these rows, with this name (instead of DATASET).")
@click.option("--session", "sessions", multiple=True, help="A session id; repeatable. Or choose sessions with the filters below.")
@click.option("--outcome", type=click.Choice(["success", "fail", "none"]), help="Sessions with this outcome (none: not reported).")
@click.option("--run", "run_id", type=int, help="Sessions of this harness run.")
@click.option("--user", help="Sessions of this user id.")
@click.option("--metadata", multiple=True, metavar="KEY=VALUE", help="Sessions whose metadata has KEY=VALUE; repeatable (all must match).")
@click.option("--limit", type=click.IntRange(1, 500), default=50, show_default=True, help="With filters: the newest this many sessions.")
@click.option("--input", "input_from", type=click.Choice(INPUTS), default="first_user_message", show_default=True)
@click.option("--task", type=int, help="One session's task (an id from `bv traces show --json`): the row is made of it alone.")
@click.option("--step", type=int, help="With --input conversation: the LLM step the conversation ends at (the last by default).")
@click.option("--expected", help="One session's row: its expected output, instead of the assistant's answer.")
@json_option
def datasets_add_from_traces(dataset, new_name, sessions, outcome, run_id, user, metadata, limit, input_from, task, step, expected):
    """Rows made of sessions, all in one new version of DATASET (or of a --new one), or none: a session with no user
    message refuses the lot, naming it."""
    if bool(dataset) == bool(new_name):
        raise click.UsageError("Give DATASET (name or id) to add to, or --new NAME for a new dataset.")
    filters = {k: v for k, v in {"outcome": outcome, "run": run_id, "user": user, "metadata": list(metadata)}.items() if v}
    if bool(sessions) == bool(filters):
        raise click.UsageError("Choose sessions with --session (repeatable), or with filters (--outcome, --run, --user, --metadata).")
    payload = {"dataset": dataset} if dataset else {"new_dataset": new_name}
    payload |= {"sessions": list(sessions)} if sessions else {"filters": filters, "limit": limit}
    payload |= {k: v for k, v in {"input": input_from, "task": task, "step": step, "expected": expected}.items() if v is not None}
    body = client().post("datasets/rows-from-traces", payload)
    if click.get_current_context().obj["json"]:
        return output(body)
    version = body["version"]
    output({"dataset": body["dataset"]["name"], "id": body["dataset"]["id"], **version}, ["dataset", "id", "number", "added", "row_count", "note"])
