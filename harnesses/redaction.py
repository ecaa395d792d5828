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
import secrets

from django.db.models import F

from belvedir.redaction import Redactor

from .models import Run

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


def run_secrets(run: Run) -> list[str]:
    """The values redacted from everything the run writes."""
    from belvedir.core.models import ProjectSecret

    values = [v.value for v in run.harness.env_vars.all() if v.secret]
    values += run.secret_env.values()
    values += ProjectSecret.objects.filter(project_id=run.project_id).values_list("value", flat=True)
    return [v for v in values if isinstance(v, str)]


def canary_of(run: Run) -> str:
    return run.secret_env.get(CANARY_ENV, "")


def note_canary(run: Run, redactor: Redactor, place: Place) -> bool:
    """Mark the run when `redactor` has masked its canary in `place`; whether it had.

    One conditional update that ORs the place in: the worker (log,
    results.json) and the trace workers (spans) mark the same run at once.
    """
    canary = canary_of(run)
    if not canary or canary not in redactor.found:
        return False
    Run.objects.filter(pk=run.pk).update(canary_places=F("canary_places").bitor(int(place)))
    return True


def redact_run_spans(run_id: str, spans: list[dict]) -> list[dict]:
    """A run key's batch of parsed spans with the run's secrets masked (attributes, events, names: every string).

    Costs one serialisation and one scan of the batch when it holds none.
    """
    run = Run.objects.select_related("harness").prefetch_related("harness__env_vars").filter(pk=run_id).first() if run_id.isdigit() else None
    if run is None:
        return spans
    redactor = Redactor(run_secrets(run))
    redacted = redactor.values(spans)
    note_canary(run, redactor, Place.SPANS)
    return redacted
