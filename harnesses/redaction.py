"""A run's secrets: which values are redacted from what it writes, and which of them it wrote.

Every place a run writes goes through one Redactor built from the same
list (the log tail, results.json, and the spans its per-run key sends):
the harness's secret env values, the run's own secret env (which holds its
per-run key and its canary, both made when it launches) and every secret of
its project.

The canary is a fresh random value under a name that looks like a provider
key, meaning nothing anywhere. A careful workload has no reason to print or
send it; where it shows up, a careless one would have leaked a real key the
same way. Redaction masks it like any secret, and says where it found it.

Every secret found is reported the same way, the canary among them: the run
records which of its secrets (by the name it had in the run's env, never the
value) its output held, and where (Run.secret_places), and its page, the
API and `bv` say so. A user wants to know the run printed their key.
"""

import json
import secrets
from dataclasses import dataclass

from django.db import connection, transaction

from belvedir.core.models import ProjectSecret
from belvedir.redaction import Redactor

from .models import HarnessEnvVar, Place, Run

CANARY_ENV = "BELVEDIR_CANARY_API_KEY"
# The per-run key, kept with the run's secret env so that the trace workers,
# which only see the key's hash, can redact it from the spans it sends.
RUN_KEY_ENV = "BELVEDIR_API_KEY"


def new_canary() -> str:
    return "sk-" + secrets.token_urlsafe(32)


@dataclass(frozen=True)
class RunSecrets:
    run_id: int
    values: tuple[str, ...]
    canary: str
    names: dict[str, str]  # each value's name in the run's env (a harness's secret env var, a project secret, the run's own)

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
    env = [json.loads(value) for kind, _, value in rows if kind == "run"]
    if not env:
        return None
    # The run's own env last: where a name is given twice, the run has the value it names.
    named = [(name, value) for kind, name, value in rows if kind != "run"] + list(env[0].items())
    named = [(name, value) for name, value in named if isinstance(value, str)]
    return RunSecrets(run_id, tuple(v for _, v in named), env[0].get(CANARY_ENV, ""), {value: name for name, value in named})


_SECRETS_SQL = f"""
    SELECT 'run', '', CAST(secret_env AS text) FROM {Run._meta.db_table} WHERE id = %s
    UNION ALL SELECT 'harness', name, value FROM {HarnessEnvVar._meta.db_table}
              WHERE secret AND harness_id = (SELECT harness_id FROM {Run._meta.db_table} WHERE id = %s)
    UNION ALL SELECT 'project', name, value FROM {ProjectSecret._meta.db_table}
              WHERE project_id = (SELECT project_id FROM {Run._meta.db_table} WHERE id = %s)
"""

# ORs each name's places into Run.secret_places in one statement: the worker
# (log, results.json) and the trace workers (spans) mark the same run at
# once, and PostgreSQL evaluates the new value again on the row another
# update left, so no place is lost.
_NOTE_SQL = f"""
    UPDATE {Run._meta.db_table} SET secret_places = secret_places || (
        SELECT jsonb_object_agg(found.key, coalesce((secret_places ->> found.key)::int, 0) | found.value::int)
        FROM jsonb_each_text(%s::jsonb) AS found
    ) WHERE id = %s
"""


def note_found(secrets: RunSecrets, redactor: Redactor, place: Place, extra_names: dict[str, str] | None = None) -> list[str]:
    """Record on the run which of its secrets `redactor` masked in `place` (by name); their names.

    `extra_names`: values the worker knows by a name the run's rows do not
    hold (its egress token, in the proxy variables).
    """
    names = {**secrets.names, **(extra_names or {})}
    found = sorted({names[value] for value in redactor.found if value in names})
    if found and connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(_NOTE_SQL, [json.dumps(dict.fromkeys(found, int(place))), secrets.run_id])
    elif found:
        _note_portably(secrets.run_id, found, place)
    return found


def _note_portably(run_id: int, found: list[str], place: Place):
    # `make run`'s SQLite has no jsonb: the same OR under the row's lock (SQLite holds one writer at a time anyway).
    with transaction.atomic():
        places = Run.objects.select_for_update().values_list("secret_places", flat=True).get(pk=run_id) or {}
        for name in found:
            places[name] = int(places.get(name, 0)) | int(place)
        Run.objects.filter(pk=run_id).update(secret_places=places)


def redact_run_rows(run_id: int, rows: list[dict], source: bytes | None = None) -> list[dict]:
    """A run key's batch of span rows with the run's secrets masked (every string: attributes, events, messages, names).

    `source`: the request body they were parsed from. A batch holding no
    secret costs one query and one scan of it (or, when it has escapes that
    could hide one, a serialisation of the rows and a scan of that).
    """
    secrets = run_secrets(run_id)
    if secrets is None:
        return rows
    redactor = secrets.redactor()
    redacted = redactor.values(rows, source)
    note_found(secrets, redactor, Place.SPANS)
    return redacted
