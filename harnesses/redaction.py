"""A run's secrets: which values are redacted from what it writes, and its canary.

Every place a run writes goes through one Redactor built from the same
list (the log tail, results.json, and the spans its per-run key sends):
the harness's secret env values, the run's own secret env (which holds its
per-run key and its canary, both made when it launches) and every secret of
its project.

The canary is a fresh random value under a name that looks like a provider
key, meaning nothing anywhere. A careful workload has no reason to print or
send it; where it shows up, a careless one would have leaked a real key the
same way. Redaction masks it like any secret, and says where it found it.
"""

import enum
import json
import secrets
from dataclasses import dataclass

from django.db import connection
from django.db.models import F

from belvedir.core.models import ProjectSecret
from belvedir.redaction import Redactor

from .models import HarnessEnvVar, Run

CANARY_ENV = "BELVEDIR_CANARY_API_KEY"
# The per-run key, kept with the run's secret env so that the trace workers,
# which only see the key's hash, can redact it from the spans it sends.
RUN_KEY_ENV = "BELVEDIR_API_KEY"


class Place(enum.IntFlag):
    """Where a run's output held its canary (Run.canary_places)."""

    LOG = 1
    RESULTS = 2
    SPANS = 4


PLACE_NAMES = {Place.LOG: "log", Place.RESULTS: "results.json", Place.SPANS: "spans"}


def new_canary() -> str:
    return "sk-" + secrets.token_urlsafe(32)


@dataclass(frozen=True)
class RunSecrets:
    run_id: int
    values: tuple[str, ...]
    canary: str

    def redactor(self) -> Redactor:
        return Redactor(self.values)


def run_secrets(run_id: int) -> RunSecrets | None:
    """The values redacted from everything the run writes (None for no such run).

    One query, in SQL: the trace workers ask once per batch a run's key
    sends, and three ORM queries cost ~7 ms there, more than the scan.
    """
    with connection.cursor() as cursor:
        cursor.execute(_SECRETS_SQL, [run_id] * 3)
        rows = cursor.fetchall()
    env = [json.loads(value) for kind, value in rows if kind == "run"]
    if not env:
        return None
    values = [value for kind, value in rows if kind != "run"] + list(env[0].values())
    return RunSecrets(run_id, tuple(v for v in values if isinstance(v, str)), env[0].get(CANARY_ENV, ""))


_SECRETS_SQL = f"""
    SELECT 'run', CAST(secret_env AS text) FROM {Run._meta.db_table} WHERE id = %s
    UNION ALL SELECT 'harness', value FROM {HarnessEnvVar._meta.db_table}
              WHERE secret AND harness_id = (SELECT harness_id FROM {Run._meta.db_table} WHERE id = %s)
    UNION ALL SELECT 'project', value FROM {ProjectSecret._meta.db_table}
              WHERE project_id = (SELECT project_id FROM {Run._meta.db_table} WHERE id = %s)
"""


def note_canary(secrets: RunSecrets, redactor: Redactor, place: Place) -> bool:
    """Mark the run when `redactor` has masked its canary in `place`; whether it had.

    One conditional update that ORs the place in: the worker (log,
    results.json) and the trace workers (spans) mark the same run at once.
    """
    if not secrets.canary or secrets.canary not in redactor.found:
        return False
    Run.objects.filter(pk=secrets.run_id).update(canary_places=F("canary_places").bitor(int(place)))
    return True


def redact_run_rows(run_id: str, rows: list[dict], source: bytes | None = None) -> list[dict]:
    """A run key's batch of span rows with the run's secrets masked (every string: attributes, events, messages, names).

    `source`: the request body they were parsed from. A batch holding no
    secret costs one query and one scan of it (or, when it has escapes that
    could hide one, a serialisation of the rows and a scan of that).
    """
    secrets = run_secrets(int(run_id)) if run_id.isdigit() else None
    if secrets is None:
        return rows
    redactor = secrets.redactor()
    redacted = redactor.values(rows, source)
    note_canary(secrets, redactor, Place.SPANS)
    return redacted
