"""The proxy's memory of grants and what they used, written to the database
from one thread, so proxied connections never wait on a write.

One proxy process serves a host (`--num-acceptors 1`), so its running totals
are the truth for the grants it serves: the byte cap is enforced on them,
not on a database value that lags by a flush.
"""

import json
import logging
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import NamedTuple

from django.db import IntegrityError, InterfaceError, OperationalError, connection, transaction
from django.db.models import F
from django.utils import timezone

from ..models import EgressDestination, EgressGrant

logger = logging.getLogger(__name__)
FLUSH_SECONDS = 0.5


@dataclass
class GrantState:
    id: int
    owner: str
    domains: tuple[str, ...]
    max_bytes: int
    used: int
    revoked: bool
    capped: bool = False


class GrantRow(NamedTuple):
    id: int
    owner_kind: str
    owner_id: str
    domains: list
    max_bytes: int
    used: int
    revoked: bool
    capped: bool


# Plain SQL, not the ORM: this runs for every proxied connection, and compiling
# the equivalent queryset cost 0.7-1.8 ms a lookup here against 0.04 ms for the
# query itself (measured beside bench/egress_proxy.py, a loaded 2-core machine).
GRANT_SQL = (
    "SELECT id, owner_kind, owner_id, domains, max_bytes, bytes_up + bytes_down, revoked_at IS NOT NULL, cap_reached_at IS NOT NULL"
    f" FROM {EgressGrant._meta.db_table} WHERE token_hash = %s"
)


def _select_grant(token_hash: str) -> GrantRow | None:
    with connection.cursor() as cursor:
        cursor.execute(GRANT_SQL, [token_hash])
        row = cursor.fetchone()
    if row is None:
        return None
    row = GrantRow(*row)
    # Django's psycopg adapter hands jsonb over as text, for JSONField to decode.
    return row._replace(domains=json.loads(row.domains)) if isinstance(row.domains, str) else row


class Recorder:
    def __init__(self):
        self._lock = threading.Lock()
        self._by_id: dict[int, GrantState] = {}
        # (grant id, host, port, reason) -> [requests, up, down]
        self._pending = defaultdict(lambda: [0, 0, 0])
        self._newly_capped: set[int] = set()
        self._db = ThreadPoolExecutor(max_workers=1, thread_name_prefix="egress-lookup")
        self._thread = threading.Thread(target=self._flush_forever, daemon=True, name="egress-recorder")
        self._thread.start()

    # -- grants ------------------------------------------------------------

    def grant(self, token_hash: str) -> GrantState | None:
        """The grant behind a token, read from the database for every new connection.

        No cache: a run's end revokes its grant in the same transaction that
        ends it, and the next connection must see that at once. The read is
        one lookup on the unique index of token_hash. Byte counts stay in
        memory, one state per grant that every connection shares, so the cap
        holds across connections between flushes.
        """
        row = self._load(token_hash)
        if row is None:
            return None
        with self._lock:
            state = self._by_id.get(row.id)
            if state is None:
                state = self._by_id[row.id] = GrantState(id=row.id, owner=f"{row.owner_kind}:{row.owner_id}", domains=(), max_bytes=0, used=0, revoked=False)
            state.domains = tuple(row.domains)
            state.max_bytes = row.max_bytes
            state.used = max(state.used, row.used)
            state.revoked = row.revoked
            state.capped = state.capped or row.capped
            if state.revoked:
                # Refused from now on: forgotten, so a long-lived proxy holds only live grants
                # (connections still open keep counting into their own reference).
                del self._by_id[row.id]
        return state

    def _load(self, token_hash: str) -> "GrantRow | None":
        # proxy.py calls plugins inside an event loop, where Django refuses
        # blocking queries: lookups go to a thread of their own, which also
        # keeps one database connection for all of them.
        return self._db.submit(self._query_grant, token_hash).result(timeout=30)

    @staticmethod
    def _query_grant(token_hash: str) -> "GrantRow | None":
        try:
            return _select_grant(token_hash)
        except (OperationalError, InterfaceError):
            # The database restarted under this long-lived connection: one retry on a fresh one.
            connection.close()
            return _select_grant(token_hash)

    # -- usage -------------------------------------------------------------

    def denied(self, grant: GrantState | None, host: str, port: int, reason: str):
        if grant is None:
            return  # no grant, nobody to show it to; the proxy log has it
        with self._lock:
            self._pending[(grant.id, host, port, reason)][0] += 1

    def allowed(self, grant: GrantState, host: str, port: int):
        with self._lock:
            self._pending[(grant.id, host, port, "")][0] += 1

    def transfer(self, grant: GrantState, host: str, port: int, up: int = 0, down: int = 0, reason: str = "") -> bool:
        """Count bytes (beside a denial when `reason` says why the request was refused);
        False once the grant's cap is passed (the caller closes the connection)."""
        with self._lock:
            entry = self._pending[(grant.id, host, port, reason)]
            entry[1] += up
            entry[2] += down
            grant.used += up + down
            if grant.used > grant.max_bytes and not grant.capped:
                grant.capped = True
                self._newly_capped.add(grant.id)
            return not grant.capped

    # -- the writer --------------------------------------------------------

    def _flush_forever(self):
        while True:
            time.sleep(FLUSH_SECONDS)
            try:
                self.flush()
            except Exception:
                logger.exception("could not record egress usage; will retry")
                connection.close()

    def flush(self):
        with self._lock:
            pending, self._pending = self._pending, defaultdict(lambda: [0, 0, 0])
            capped, self._newly_capped = self._newly_capped, set()
        if not pending and not capped:
            return
        try:
            self._write(pending, capped)
        except (OperationalError, InterfaceError):
            # Kept for the next flush (the database is restarting): nothing counted is lost.
            with self._lock:
                for key, (requests, up, down) in pending.items():
                    entry = self._pending[key]
                    entry[0] += requests
                    entry[1] += up
                    entry[2] += down
                self._newly_capped |= capped
            raise

    def _write(self, pending, capped):
        now = timezone.now()
        # A grant replaced meanwhile (its run re-delivered) takes its counts with it.
        alive = set(EgressGrant.objects.filter(pk__in={key[0] for key in pending} | capped).values_list("pk", flat=True))
        pending = {key: value for key, value in pending.items() if key[0] in alive}
        totals = defaultdict(lambda: [0, 0])
        for (grant_id, host, port, reason), (requests, up, down) in pending.items():
            try:
                self._add_destination(grant_id, host, port, reason, requests, up, down, now)
            except IntegrityError:
                continue  # the grant was deleted after the check above: its counts go with it
            totals[grant_id][0] += up
            totals[grant_id][1] += down
        for grant_id, (up, down) in totals.items():
            EgressGrant.objects.filter(pk=grant_id).update(bytes_up=F("bytes_up") + up, bytes_down=F("bytes_down") + down)
        if capped:
            EgressGrant.objects.filter(pk__in=capped, cap_reached_at__isnull=True).update(cap_reached_at=now)

    @staticmethod
    def _add_destination(grant_id, host, port, reason, requests, up, down, now):
        # Atomic, so a refused insert leaves the connection usable for the next one.
        with transaction.atomic():
            updated = EgressDestination.objects.filter(grant_id=grant_id, host=host, port=port, reason=reason).update(
                requests=F("requests") + requests, bytes_up=F("bytes_up") + up, bytes_down=F("bytes_down") + down, last_at=now
            )
            if not updated:
                EgressDestination.objects.create(
                    grant_id=grant_id, host=host, port=port, reason=reason, requests=requests, bytes_up=up, bytes_down=down, last_at=now
                )


_recorder: Recorder | None = None
_recorder_lock = threading.Lock()


def recorder() -> Recorder:
    """One per proxy process, started on first use (after proxy.py has forked its acceptor)."""
    global _recorder
    with _recorder_lock:
        if _recorder is None:
            _recorder = Recorder()
        return _recorder
