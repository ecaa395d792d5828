"""Where a trial's sandbox went out, from the egress proxy's record, and which of it a benchmark forbids.

Terminal-Bench 2 refuses a job whose agent could reach the benchmark's own website or repository (its answers
are there); a job can deny more hosts of its own. A trial with network none has an empty record.
"""

from belvedir.sandbox.models import EgressDestination

from .trials import OWNER_KIND

BENCHMARK_HOSTS = ("tbench.ai", "github.com/laude-institute", "huggingface.co/datasets/laude-institute")


def egress_record(trial) -> list[dict]:
    """One entry per destination, allowed or refused (`refused` says why)."""
    return egress_records([trial])[trial.pk]


def egress_records(trials) -> dict[int, list[dict]]:
    """`egress_record` of many trials in one query: {trial id: its record}, an empty one for a trial that had none."""
    ids = {str(t.pk): t.pk for t in trials}
    records: dict[int, list[dict]] = {pk: [] for pk in ids.values()}
    rows = EgressDestination.objects.filter(grant__owner_kind=OWNER_KIND, grant__owner_id__in=list(ids)).values(
        "grant__owner_id", "host", "port", "requests", "bytes_up", "bytes_down", "reason"
    )
    for row in rows:
        trial, refused = ids[row.pop("grant__owner_id")], row.pop("reason")
        records[trial].append({**row, "refused": refused})
    return records


def denied_by_trial(trials, deny_hosts=()) -> dict[int, list[str]]:
    """`denied_reaches` for many trials in one query: {trial id: what a reviewer must see}, only those with any.

    Read when shown, not stored at the trial's end: the proxy writes its record up to a flush (half a second)
    after the sandbox's last connection, which can be after the trial ended."""
    return {pk: said for pk, record in egress_records(trials).items() if (said := denied_reaches(record, deny_hosts))}


def is_denied(host: str, deny_hosts=()) -> bool:
    """A benchmark's host (a path in the list narrows nothing here: the proxy sees hosts), or one the job denies."""
    host = host.lower()
    return any(host == d.split("/")[0] or host.endswith("." + d.split("/")[0]) for d in (*BENCHMARK_HOSTS, *deny_hosts))


def denied_reaches(record: list[dict], deny_hosts=()) -> list[str]:
    """What in a record a reviewer must see: each denied host reached, or tried and refused."""
    return [
        f"{'tried to reach' if d['refused'] else 'reached'} {d['host']}{' (refused: ' + d['refused'] + ')' if d['refused'] else ''}"
        for d in record
        if is_denied(d["host"], deny_hosts)
    ]
