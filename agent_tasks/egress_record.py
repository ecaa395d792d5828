"""Where a trial's sandbox went out, from the egress proxy's record, and which of it a benchmark forbids.

Terminal-Bench 2 refuses a job whose agent could reach the benchmark's own website or repository (its answers
are there); a job can deny more hosts of its own. A trial with network none has an empty record.
"""

from belvedir.sandbox.models import EgressDestination, EgressGrant

from .trials import OWNER_KIND

BENCHMARK_HOSTS = ("tbench.ai", "github.com/laude-institute", "huggingface.co/datasets/laude-institute")


def egress_record(trial) -> list[dict]:
    """One entry per destination, allowed or refused (`refused` says why)."""
    grant = EgressGrant.objects.filter(owner_kind=OWNER_KIND, owner_id=str(trial.pk)).prefetch_related("destinations").first()
    if grant is None:
        return []
    return [
        {"host": d.host, "port": d.port, "requests": d.requests, "bytes_up": d.bytes_up, "bytes_down": d.bytes_down, "refused": d.reason}
        for d in grant.destinations.all()
    ]


def denied_by_trial(trials, deny_hosts=()) -> dict[int, list[str]]:
    """`denied_reaches` for many trials in one query: {trial id: what a reviewer must see}, only those with any.

    Read when shown, not stored at the trial's end: the proxy writes its record up to a flush (half a second)
    after the sandbox's last connection, which can be after the trial ended."""
    ids = {str(t.pk): t.pk for t in trials}
    found: dict[int, list[dict]] = {}
    rows = EgressDestination.objects.filter(grant__owner_kind=OWNER_KIND, grant__owner_id__in=list(ids)).values("grant__owner_id", "host", "reason")
    for row in rows:
        found.setdefault(ids[row["grant__owner_id"]], []).append({"host": row["host"], "refused": row["reason"]})
    return {pk: said for pk, record in found.items() if (said := denied_reaches(record, deny_hosts))}


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
