"""Who a sandbox workload belongs to, and how each kind of owner is asked about its ids.

An `Owner` is what a lease, a container's labels and an egress grant name.
Apps register their owner kinds here (in AppConfig.ready), so this package
can reap every kind of workload without importing any app.
"""

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.db.models import QuerySet

from belvedir.core.ids import parse_id


@dataclass(frozen=True)
class Owner:
    kind: str
    id: str

    def __post_init__(self):
        object.__setattr__(self, "id", str(self.id))  # a pk or its label text: one value either way

    def __str__(self):
        # The lease column's form: unique per workload, parsed back by `parse`.
        return f"{self.kind}:{self.id}"

    @classmethod
    def parse(cls, value: str) -> "Owner":
        kind, sep, owner_id = value.partition(":")
        if not sep or not kind or not owner_id:
            raise ValueError(f"Not an owner: {value!r}")
        return cls(kind, owner_id)

    @property
    def container_name(self) -> str:
        # The installation is in the name, not only in the labels: a sandbox
        # removes a stale container of its own name on entry, and two
        # platforms sharing an engine both have a run 5.
        return f"bv-{instance_tag()}-{self.kind}-{self.id}"


def instance_tag() -> str:
    """This installation in a form Docker accepts in a name ([a-zA-Z0-9_.-]); BELVEDIR_INSTANCE may be any text."""
    instance = settings.SANDBOX_INSTANCE
    if re.fullmatch(r"[a-zA-Z0-9][a-zA-Z0-9_.-]{0,39}", instance):
        return instance
    return hashlib.sha256(instance.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class OwnerKind:
    """What the sandbox package needs to know about one kind of owner.

    `active`: the owners whose workloads may still hold a lease or a
    container (e.g. runs queued or in progress). `reap_stale`: ends owners
    whose worker died (the reaper calls it first, so what it ends is reaped
    in the same pass); returns how many. `host_lost`: ends the owners (by id)
    whose host's engine stopped answering.
    """

    kind: str
    active: Callable[[], QuerySet]
    reap_stale: Callable[[], int] | None = None
    host_lost: Callable[[list[str], object], int] | None = None


_kinds: dict[str, OwnerKind] = {}


def register(kind: str, *, active, reap_stale=None, host_lost=None) -> OwnerKind:
    _kinds[kind] = OwnerKind(kind, active, reap_stale, host_lost)
    return _kinds[kind]


def registered() -> list[OwnerKind]:
    return list(_kinds.values())


def get(kind: str) -> OwnerKind | None:
    return _kinds.get(kind)


def active_ids(kind: OwnerKind, ids) -> set[str]:
    """Which of these ids are still active. Owner ids are integer primary keys: anything else never is."""
    numeric = {pk for i in ids if (pk := parse_id(str(i)))}
    if not numeric:
        return set()
    return {str(pk) for pk in kind.active().filter(pk__in=numeric).values_list("pk", flat=True)}
