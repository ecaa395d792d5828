"""What every command shares: the invocation's API client, --json, and how results are printed."""

import functools
import json

import click
from rich.console import Console
from rich.table import Table

from . import yamlsafe
from .client import ApiError, Client


def console() -> Console:
    """A console for this invocation: it reads COLUMNS and the terminal's size now, not when the module was first imported."""
    return Console()


def json_option(command):
    """--json on every command: machine-readable output instead of tables."""

    @click.option("--json", "as_json", is_flag=True, help="Print JSON.")
    @functools.wraps(command)
    def wrapper(*args, as_json, **kwargs):
        click.get_current_context().obj["json"] = as_json
        return command(*args, **kwargs)

    return wrapper


def output(data, columns=None, title=None):
    ctx = click.get_current_context()
    if ctx.obj.get("json"):
        click.echo(json.dumps(data, indent=2, default=str))
        return
    rows = data if isinstance(data, list) else [data]
    if columns is None:
        for key, value in data.items() if isinstance(data, dict) else []:
            click.echo(f"{key}: {value}")
        return
    table = Table(title=title)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*["" if row.get(c) is None else str(row.get(c)) for c in columns])
    console().print(table)


def client() -> Client:
    return click.get_current_context().obj.setdefault("client", Client())


def id_by_name(path: str, name_or_id: str, missing: str) -> int:
    """An id given as is, or the id of the item named so in a list endpoint; `missing` says where to look."""
    if name_or_id.isdigit():
        return int(name_or_id)
    matches = [item["id"] for item in client().all(path) if item["name"] == name_or_id]
    if not matches:
        raise ApiError(missing.format(name=repr(name_or_id)))
    return matches[0]


def read_config_file(path) -> dict:
    """A YAML (or JSON) file of fields, as `-f` and `--config` take; ApiError (exit 2) when it cannot be read or is not a mapping."""
    try:
        data = yamlsafe.load_file(path)
    except (OSError, yamlsafe.YAMLRefused) as exc:
        raise ApiError(f"Cannot read {path}: it {exc}" if isinstance(exc, yamlsafe.YAMLRefused) else f"Cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ApiError(f"{path} must hold a mapping of fields.")
    return data
