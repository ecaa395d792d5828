"""What trace ingest asks of runs, told by the app that has them.

A run's own ingest key (`ApiKey.per_run`) writes only its run's session (the
run's id), and what it sends is stored with the run's secrets masked; a
session whose id names a run of its project is linked to that run. Runs are
the harnesses app's, and harnesses shows trajectories from traces, so
traces imports nothing from it: harnesses registers here, in its
AppConfig.ready(), how to find a key's run, which ids name a project's runs
and how a run's rows are redacted, as apps register their owner kinds with
the sandbox (belvedir.sandbox.owners).
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured


@dataclass(frozen=True)
class Runs:
    """`of_key`: the run a per-run key (by the key's id) was issued for, None once it is gone.
    `among`: which of these ids name runs of the project (by its id).
    `redact`: a run's span rows with its secrets masked; `source`, the body they were parsed from.
    """

    of_key: Callable[[int], int | None]
    among: Callable[[int, list[int]], Iterable[int]]
    redact: Callable[..., list[dict]]


_runs: Runs | None = None


def register(*, of_key, among, redact) -> Runs:
    global _runs
    _runs = Runs(of_key, among, redact)
    return _runs


def registered() -> Runs:
    if _runs is None:
        raise ImproperlyConfigured("No app told traces.run_keys about runs (harnesses does, in its AppConfig.ready()).")
    return _runs


def run_of(key) -> int | None:
    """The run a per-run key was issued for; None for other keys (and a run's key whose run is gone).

    Asked once per request: the accepted batch keeps the answer (TraceBatch.run_id) for the worker.
    """
    if not getattr(key, "per_run", False):
        return None
    return registered().of_key(key.pk)


def session_of(key, run_id: int | None) -> str | None:
    """The one session a key may write: its run's id; "" for a run's key whose run is gone (spans naming none); None (any) for other keys."""
    if run_id is not None:
        return str(run_id)
    return "" if getattr(key, "per_run", False) else None


def runs_among(project_id: int, ids: list[int]) -> Iterable[int]:
    return registered().among(project_id, ids)


def redact(run_id: int, rows: list[dict], source: bytes | None = None) -> list[dict]:
    return registered().redact(run_id, rows, source)
