"""One lifecycle for every paid workload: a harness run, a job's trial, a regrade's grading, and whatever comes next.

Each kind registers once (in its AppConfig.ready) where its rows are, which statuses mean waiting and running, and
what ends with one (its credentials, a job's tally). What happens to the money is then written here, once:

- `charge`: the price on the ledger under `<kind>:<id>`, once however often it is asked, in the caller's transaction;
- `end`: the final status and fields, the credentials revoked and, when the platform failed it, the charge given
  back: one transaction, so a crash between them never leaves a workload ended and charged for our failure, or its
  key alive. A workload whose bookkeeping fails (its fields cannot be stored) is ended errored at once;
- `cancel`, at any point: one that never started is ended and refunded (nothing ran); one running is ended charged
  (it ran) where its kind stops running work on a cancel, or left to finish where it does not (a job's trials);
- `reap` (the sandbox reaper's, every minute): ends what is still running past its deadline (its worker died) as
  the platform's fault, and settles what ended at the platform's fault without its refund;
- `host_lost`: ends what ran on a host whose engine stopped answering, refunded.

The ledger is the record: a refund is posted only against a charge, and each at most once (billing.actions). Each
kind is also registered as a sandbox owner kind, so the reaper and the health check reach it without importing its
app. tests/test_paid_workloads.py runs one contract against every registered kind.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from django.db import DatabaseError, models, transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.db.models.functions import Cast, Concat
from django.utils import timezone

from belvedir.core.ids import parse_id
from belvedir.sandbox import owners

from .actions import post_entry, refund_charge
from .models import Account, LedgerEntry

logger = logging.getLogger(__name__)

# Bounds on one reaper pass; the schedule comes back every minute for the rest.
REAP_BATCH = 100
# How far back the reaper looks for a workload ended at the platform's fault without its refund: the window is a
# crash between two commits of code older than this module, or a bug; a month is far past either.
SETTLE_WINDOW = timedelta(days=30)


def _nothing(*args):
    return None


@dataclass(frozen=True)
class PaidKind:
    """What the lifecycle needs to know of one kind of paid workload.

    `waiting`: statuses before its sandbox starts (a cancel there refunds); `running`: statuses while it may hold
    one. `errored` is the status of one the platform failed, `cancelled` the status a cancel gives, and
    `message_field` the text field that says why. `faulted`: which ended rows the platform failed (each must hold
    its refund). `stale`: running rows whose worker is gone. `revoke(row)`: its credentials end.
    `on_money(row, cents)`: cents charged (positive) or given back (negative), in the same transaction.
    `after_end(row)`: once it is ended (a job sends its next trial). `cancel_stops`: whether a cancel
    ends a running one (a harness run) or lets it finish (a job's trial).
    """

    name: str
    model: type[models.Model]
    waiting: tuple[str, ...]
    running: tuple[str, ...]
    errored: str
    cancelled: str
    message_field: str
    faulted: Q
    project: Callable[[models.Model], models.Model]
    stale: Callable[[], QuerySet]
    revoke: Callable[[models.Model], None] = _nothing
    on_money: Callable[[models.Model, int], None] = _nothing
    after_end: Callable[[models.Model], None] = _nothing
    cancel_stops: bool = True
    # A boolean field set on an end at the platform's fault (a trial's `platform_fault`), where the status alone
    # does not say it.
    fault_flag: str = ""

    @property
    def noun(self) -> str:
        return self.model._meta.verbose_name

    @property
    def active(self) -> tuple[str, ...]:
        return (*self.waiting, *self.running)

    def reference(self, pk) -> str:
        """What the ledger names its charge and refund by: each happens once."""
        return f"{self.name}:{pk}"

    def rows(self) -> QuerySet:
        return self.model._default_manager.all()


_kinds: dict[str, PaidKind] = {}


def register(kind: PaidKind) -> PaidKind:
    """Register a kind here and as a sandbox owner kind (its leases and containers reaped, its host's loss heard)."""
    _kinds[kind.name] = kind
    owners.register(
        kind.name,
        active=lambda: kind.rows().filter(status__in=kind.active),
        reap_stale=lambda: reap(kind),
        host_lost=lambda ids, host: host_lost(kind, ids),
    )
    return kind


def registered() -> list[PaidKind]:
    return list(_kinds.values())


def kind(name: str) -> PaidKind:
    return _kinds[name]


# -- money ------------------------------------------------------------------------------------------------------------


def charge(kind: PaidKind, row, price: int, *, memo: str, user=None) -> LedgerEntry:
    """Post the row's price, once, in the caller's transaction (atomic itself otherwise): the charge, posted by this
    call or an earlier one.

    InsufficientBalance, nothing posted, when the balance cannot pay it or its project is in debt."""
    with transaction.atomic():
        entry, created = post_entry(
            Account.for_project(kind.project(row)),
            kind=LedgerEntry.Kind.RUN_CHARGE,
            amount_cents=-price,
            reference=kind.reference(row.pk),
            memo=memo,
            user=user,
        )
        if created:
            kind.rows().filter(pk=row.pk).update(price_cents=price)
            row.price_cents = price
            kind.on_money(row, price)
    return entry


def refund(kind: PaidKind, row, reason: str) -> int:
    """Give the row's charge back, once: the cents this call gave back (0 when it was never charged or already was)."""
    with transaction.atomic():
        entry, created = refund_charge(kind.reference(row.pk), f"Refund for {kind.noun} #{row.pk}: {reason}"[:500])
        if not created:
            return 0
        kind.on_money(row, -entry.amount_cents)
        return entry.amount_cents


# -- ends -------------------------------------------------------------------------------------------------------------


def end(kind: PaidKind, row, status: str, *, refund_reason: str = "", from_statuses=None, **fields) -> bool:
    """Move the row from `from_statuses` (its running ones by default) to `status`, once, with all that ends with it.

    One transaction: the status and fields, the credentials revoked, the refund when `refund_reason` is given. The
    conditional update settles races between a worker, a cancel and the reaper: whoever ends it first wins, the
    others change nothing. Whether this call ended it. Fields that cannot be stored (a bug, or text no sanitising
    caught) end it errored instead, refunded: it is never left running for the reaper to find."""
    try:
        ended = _end(kind, row, status, refund_reason, from_statuses, fields)
    except DatabaseError:
        logger.exception("could not store the end of %s %s", kind.name, row.pk)
        message = f"The platform could not store this {kind.noun}'s results; it was refunded. Retry it."
        ended = _end(kind, row, kind.errored, message, from_statuses, fault_fields(kind, message))
    row.refresh_from_db()
    if ended:
        kind.after_end(row)
    return ended


def _end(kind: PaidKind, row, status, refund_reason, from_statuses, fields) -> bool:
    with transaction.atomic():
        ended = kind.rows().filter(pk=row.pk, status__in=from_statuses or kind.running).update(status=status, finished_at=timezone.now(), **fields)
        if ended:
            kind.revoke(row)
            if refund_reason:
                refund(kind, row, refund_reason)
    return bool(ended)


def cancel(kind: PaidKind, row, reason: str) -> bool:
    """Cancel at any point: waiting, ended `cancelled` and refunded (nothing ran); running, ended charged where its kind
    stops on a cancel, else left to finish. Whether this call ended it."""
    if end(kind, row, kind.cancelled, refund_reason=f"cancelled before it started: {reason}", from_statuses=kind.waiting, **{kind.message_field: reason}):
        return True
    if kind.cancel_stops:
        return end(kind, row, kind.cancelled, from_statuses=kind.running, **{kind.message_field: reason})
    return False


def host_lost(kind: PaidKind, ids: list[str]) -> int:
    """Its running rows (by owner id) on a host whose engine stopped answering: ended errored, refunded."""
    message = f"The sandbox host running this {kind.noun} stopped answering; it was refunded. Retry it."
    rows = kind.rows().filter(pk__in=[pk for i in ids if (pk := parse_id(str(i)))], status__in=kind.running)
    return sum(end(kind, row, kind.errored, refund_reason="sandbox host lost", **fault_fields(kind, message)) for row in rows)


def reap(kind: PaidKind) -> int:
    """Running rows whose worker is gone, ended errored and refunded; and rows ended at the platform's fault whose refund
    is missing, refunded. Bounded; how many it ended or settled."""
    message = f"The worker running this {kind.noun} stopped; it was refunded. Retry it."
    ended = sum(
        end(kind, row, kind.errored, refund_reason="worker died", **fault_fields(kind, message))
        for row in kind.stale().filter(status__in=kind.running)[:REAP_BATCH]
    )
    return ended + sum(refund(kind, row, "ended at the platform's fault") > 0 for row in unsettled(kind)[:REAP_BATCH])


def fault_fields(kind: PaidKind, message: str) -> dict:
    """The fields of an end at the platform's fault: the reason, and the kind's flag where it has one."""
    return {kind.message_field: message, **({kind.fault_flag: True} if kind.fault_flag else {})}


def unsettled(kind: PaidKind) -> QuerySet:
    """Ended at the platform's fault (lately), charged, and not refunded: what a crash between two commits would leave."""
    reference = Concat(models.Value(f"{kind.name}:"), Cast(OuterRef("pk"), models.CharField()))
    entries = LedgerEntry.objects.filter(reference=reference)
    return (
        kind.rows()
        .filter(kind.faulted, finished_at__gte=timezone.now() - SETTLE_WINDOW)
        .filter(Exists(entries.filter(kind=LedgerEntry.Kind.RUN_CHARGE)), ~Exists(entries.filter(kind=LedgerEntry.Kind.REFUND)))
        .order_by("pk")
    )
