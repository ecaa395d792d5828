"""What trace ingest asks of the workloads that send spans with a key of their own.

A harness run and a job's trial each get an ingest key (`ApiKey.per_run`)
when they start, revoked when they end. Such a key writes only its
workload's session; what it sends is stored with the workload's secrets
masked; and the session it writes is linked to the workload
(TraceSession.run, TraceSession.trial). Only the workload's own key links:
another key's spans naming the same id make an ordinary session. Workloads
belong to other apps, and those apps show trajectories from traces, so
traces imports nothing from them: each registers its kind here, in its
AppConfig.ready(), as apps register their owner kinds with the sandbox
(belvedir.sandbox.owners).

A kind's session ids are its prefix and the workload's id: a run's "42", a
trial's "trial-7". The form alone says which kind a session names, so the
trace workers need no lookup to find whose secrets to mask.
"""

from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

# Longer ids are no workload's: a bigint column holds 18 digits safely.
MAX_ID_DIGITS = 17


@dataclass(frozen=True)
class Kind:
    """`prefix`: what comes before the workload's id in its session id ("" for runs).
    `field`: TraceSession's foreign key to it.
    `of_key`: the workload a per-run key (by the key's id) was issued for, None once its key may write no more
    (the workload deleted; a trial, ended).
    `redact`: a workload's span rows with its secrets masked; `source`, the body they were parsed from.
    `reports_outcome`: whether its key may report its session's outcome (a trial's is its verifier's reward).
    """

    name: str
    prefix: str
    field: str
    of_key: Callable[[int], int | None]
    redact: Callable[..., list[dict]]
    reports_outcome: bool = True

    def session(self, pk: int) -> str:
        return f"{self.prefix}{pk}"


_kinds: dict[str, Kind] = {}


def register(name: str, *, prefix: str, field: str, of_key, redact, reports_outcome: bool = True) -> Kind:
    _kinds[name] = Kind(name, prefix, field, of_key, redact, reports_outcome)
    return _kinds[name]


def kinds() -> list[Kind]:
    if not _kinds:
        raise ImproperlyConfigured("No app told traces.workload_keys about its workloads (harnesses and agent_tasks do, in their AppConfig.ready()).")
    return list(_kinds.values())


def own_session(key) -> str | None:
    """The one session a key may write: its workload's; "" for a per-run key whose workload has ended (it writes
    nothing); None (any) for other keys. One query per kind asked, in the order they registered.

    Asked once per request: the accepted batch keeps the answer (TraceBatch.own_session) for the worker.
    """
    if not getattr(key, "per_run", False):
        return None
    for kind in kinds():
        if (pk := kind.of_key(key.pk)) is not None:
            return kind.session(pk)
    return ""


def only_its_own(session_id: str, does: str = "writes") -> str:
    """Why a workload's key was refused another session (or, its workload ended, every session)."""
    if not session_id:
        return "This key's run or trial has ended: the key writes and reports nothing more."
    return f"A run's or a trial's key {does} only its own session ({session_id})."


def named_by(session_id: str) -> tuple[Kind, int] | None:
    """The kind and id a session id names by its form (whether that workload exists is not asked)."""
    for kind in kinds():
        if session_id.startswith(kind.prefix):
            digits = session_id[len(kind.prefix) :]
            # ASCII digits in the canonical form only: "007" and "²" are nobody's ("²".isdigit() is True).
            if digits.isascii() and digits.isdigit() and len(digits) <= MAX_ID_DIGITS and str(int(digits)) == digits:
                return kind, int(digits)
    return None


def link(session_id: str) -> tuple[str, int]:
    """The TraceSession foreign key (its attname) and the id that a workload key's own session links to."""
    kind, pk = named_by(session_id)
    return f"{kind.field}_id", pk


def reports_outcome(session_id: str) -> bool:
    """Whether the key whose own session this is may report its outcome."""
    found = named_by(session_id)
    return found is not None and found[0].reports_outcome


def redact(session_id: str, rows: list[dict], source: bytes | None = None) -> list[dict]:
    """A workload key's span rows with its workload's secrets masked (`session_id`: the key's own session)."""
    kind, pk = named_by(session_id)
    return kind.redact(pk, rows, source)


def workload_env(raw_key: str, session_id: str) -> dict[str, str]:
    """What a workload's tracer reads (the `belvedir` SDK, the shipped drivers): the platform's URL, its own key and
    its session, under both names (BELVEDIR_*, and FRACTAL_* that older drivers read)."""
    env = {}
    for prefix in ("FRACTAL", "BELVEDIR"):
        env[f"{prefix}_API_KEY"] = raw_key
        env[f"{prefix}_BASE_URL"] = settings.BELVEDIR_BASE_URL
        env[f"{prefix}_RUN_ID"] = session_id
    return env
