"""The response cache: a deployment's answer kept for its exact request, so the same request is paid once.

Content-addressed within a project. The key is the whole request as canonical JSON: the deployment's
base URL and model, a digest of its credential (a gateway's virtual key picks the backend behind one URL, so two
deployments that differ only in their key are two sources), a digest of what its server's `GET /models` says
of the model (vLLM: the weights' path and context length), the path and the normalised body (messages, tools, sampling parameters, max
tokens, stop, seed) and the request's attempt within its row (an epoch, a pass@k sample, a turn). Any
change is a miss. The key is stored whole and compared on every hit, so two requests that share a hash
can never share an answer; its SHA-256 is only the index. An answer is also kept with the
`system_fingerprint` it came with and served only while the deployment's last answers carry the same
(`Deployment.served_fingerprint`): a model changed behind the same name stops being served from the
first fresh answer that says so.

What is never served: an answer older than the asking deployment's time to live, another project's
(a deployment moved to another project leaves its answers behind), one of a deleted deployment (they go
with it), and under `auto`, a sampled request (temperature above 0, or unset: servers default to 1)
without a seed, whose answers are meant to differ. `bypass` asks the deployment and keeps the fresh answer.

A hit costs nothing: no request goes out and no token is counted in the eval's cost. Lookups made by rows
that start together are answered by one query (an identical 1,319-row re-run is a few queries, not 1,319).
"""

import asyncio
import functools
import hashlib
from dataclasses import dataclass, field
from datetime import timedelta

import orjson
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from belvedir.core import bulk

from .client import Request
from .models import CachedResponse, CacheMode, Deployment, Eval

LOOKUP_BATCH = 500


@dataclass(frozen=True)
class Key:
    text: str
    hash: str


def source_of(deployment: Deployment) -> str:
    """What answers a deployment's requests: its base URL, model and credential (a digest, never the key itself).
    Deployments of a project with the same source are served each other's answers, and clear them together."""
    parts = [deployment.base_url.rstrip("/"), deployment.model, hashlib.sha256(deployment.api_key.encode()).hexdigest()]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def key_of(deployment: Deployment, request: Request, attempt: int, fingerprint: str | None = None) -> Key:
    return _key(_deployment_parts(deployment, fingerprint), request, attempt)


def _deployment_parts(deployment: Deployment, fingerprint: str | None = None) -> dict:
    """What every key of the deployment's requests holds alike."""
    return {
        "base_url": deployment.base_url.rstrip("/"),
        "model": deployment.model,
        "source": source_of(deployment),
        "fingerprint": served_parts(deployment.served_fingerprint)[0] if fingerprint is None else fingerprint,
    }


def _key(parts: dict, request: Request, attempt: int) -> Key:
    text = orjson.dumps({**parts, "path": request.path, "body": _normalised(request.payload), "attempt": attempt}, option=orjson.OPT_SORT_KEYS).decode()
    return Key(text, hashlib.sha256(text.encode()).hexdigest())


def _normalised(value):
    # 0 and 0.0 ask the same (a YAML file writes one, a form the other); orjson sorts the keys. By exact type, text
    # first: a request is mostly its messages' text, and this runs for every request an eval makes.
    kind = type(value)
    if kind is str:
        return value
    if kind is dict:
        return {key: _normalised(item) for key, item in value.items()}
    if kind is list or kind is tuple:
        return [_normalised(item) for item in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _normalised(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_normalised(item) for item in value]
    return value


def is_sampled(payload: dict) -> bool:
    """Answers meant to differ from one request to the next: a temperature above 0 (servers default to 1) and no seed."""
    temperature = payload.get("temperature", 1)
    return isinstance(temperature, int | float) and temperature > 0 and payload.get("seed") is None


def not_cached_because(ev: Eval, generation: dict | None = None) -> str:
    """Why an eval's requests are neither read from nor written to the cache; "" when they may be."""
    if ev.deployment.cache_ttl_seconds == 0:
        return f"{ev.deployment.name} caches nothing (its time to live is 0)."
    if ev.cache == CacheMode.AUTO and generation is not None and is_sampled(generation):
        return "Sampled requests (temperature above 0) without a seed are not cached: set a seed, or choose to cache them anyway."
    return ""


@dataclass
class ResponseCache:
    """One eval pass's view of its project's cache: lookups batched, fresh answers kept until the engine's next write."""

    project_id: int
    deployment: Deployment
    mode: str
    hits: int = 0
    misses: int = 0
    _waiting: list = field(default_factory=list)
    _loader: asyncio.Task | None = None
    _fresh: dict = field(default_factory=dict)
    _hit_ids: list = field(default_factory=list)
    _fingerprint_changed: bool = False
    # The deployment's part of every key, worked out again only when what it serves changes.
    _parts: tuple[str, dict] | None = None

    @classmethod
    def for_eval(cls, ev: Eval) -> "ResponseCache | None":
        if ev.deployment.cache_ttl_seconds == 0:
            return None
        return cls(ev.project_id, ev.deployment, ev.cache)

    def key(self, request: Request, attempt: int) -> Key | None:
        """The request's key, or None when it may be neither served nor kept (sampled, no seed, under `auto`)."""
        if self.mode == CacheMode.AUTO and is_sampled(request.payload):
            return None
        served = self.deployment.served_fingerprint
        if self._parts is None or self._parts[0] != served:
            self._parts = (served, _deployment_parts(self.deployment))
        return _key(self._parts[1], request, attempt)

    async def lookup(self, key: Key) -> bytes | None:
        """The kept answer to exactly this request, or None (a miss); never one under `bypass`."""
        if self.mode == CacheMode.BYPASS:
            return None
        answer = asyncio.get_running_loop().create_future()
        self._waiting.append((key, answer))
        if self._loader is None:
            self._loader = asyncio.create_task(self._load())
        return await answer

    async def _load(self):
        # One step later: the rows that started with this one have queued their keys by then.
        await asyncio.sleep(0)
        try:
            while self._waiting:
                batch, self._waiting = self._waiting[:LOOKUP_BATCH], self._waiting[LOOKUP_BATCH:]
                try:
                    found = await sync_to_async(self._fetch)([key.hash for key, _ in batch])
                except Exception as exc:
                    for _, answer in batch:
                        answer.set_exception(exc)
                    continue
                for key, answer in batch:
                    pk, text, body = found.get(key.hash, (None, None, None))
                    if text == key.text:  # the whole key, not its hash: a collision is a miss
                        self.hits += 1
                        self._hit_ids.append(pk)
                        answer.set_result(body)
                    else:
                        answer.set_result(None)
        finally:
            self._loader = None

    def _fetch(self, hashes: list[str]) -> dict[str, tuple]:
        fresh_since = timezone.now() - timedelta(seconds=self.deployment.cache_ttl_seconds)
        system = served_parts(self.deployment.served_fingerprint)[1]
        rows = CachedResponse.objects.filter(project_id=self.project_id, key_hash__in=hashes, created_at__gte=fresh_since, system_fingerprint=system)
        return {key_hash: (pk, key, bytes(body)) for pk, key_hash, key, body in rows.values_list("pk", "key_hash", "key", "body")}

    def keep(self, key: Key, body: bytes, system_fingerprint: str | None = None):
        """A fresh answer, stored at the engine's next write with the system_fingerprint it came with."""
        self.misses += 1
        known = served_parts(self.deployment.served_fingerprint)[1]
        # None: the answer says nothing (log-likelihood answers are read without it), so it is taken as the known one.
        system_fingerprint = known if system_fingerprint is None else "".join(system_fingerprint.split())[:100]
        if system_fingerprint != known:
            # The server says it serves something else now: answers kept under the old one are no longer served.
            self.deployment.served_fingerprint = _served(served_parts(self.deployment.served_fingerprint)[0], system_fingerprint)
            self._fingerprint_changed = True
        # A tuple, not a model: made for every request on the engine's loop (a model instance costs twice a key).
        self._fresh[key.hash] = (key, bytes(body), system_fingerprint)

    def write(self, eval_id: int):
        """Store what was kept, count what was served; called from the engine's write (the ORM's thread)."""
        fresh, self._fresh = list(self._fresh.values()), {}
        hit_ids, self._hit_ids = self._hit_ids, []
        hits, misses, self.hits, self.misses = self.hits, self.misses, 0, 0
        if fresh:
            _store(self.project_id, self.deployment, fresh)
        if hit_ids:
            CachedResponse.objects.filter(pk__in=hit_ids).update(hits=F("hits") + 1, last_hit_at=timezone.now())
        if hits or misses:
            Eval.objects.filter(pk=eval_id).update(cache_hits=F("cache_hits") + hits, cache_misses=F("cache_misses") + misses)
        if self._fingerprint_changed:
            Deployment.objects.filter(pk=self.deployment.pk).update(served_fingerprint=self.deployment.served_fingerprint)
            self._fingerprint_changed = False


def _store(project_id: int, deployment: Deployment, fresh: list[tuple[Key, bytes, str]]):
    """Insert the answers, replacing any kept for the same request (a bypassing eval's fresh one wins).

    PostgreSQL: one binary COPY into a temporary table and one upsert from it (belvedir/core/bulk.py); an
    executemany of the upsert spent most of its time quoting every value into the statement on the client.
    Other databases: one prepared statement run for every answer (executemany), not bulk_create's one
    statement of them all, whose text is split again on every placeholder (bench/response_cache.py).
    """
    now = timezone.now()
    source = source_of(deployment)
    rows = [(project_id, deployment.pk, key.hash, source, system, key.text, body, len(key.text) + len(body), 0, now) for key, body, system in fresh]
    if bulk.is_postgresql():
        with transaction.atomic(), connection.cursor() as cursor:
            names = bulk.stage(cursor, "cached_incoming", _table(), _columns(), rows)
            cursor.execute(_upsert(f"SELECT {names} FROM cached_incoming"))
        return
    now = connection.ops.adapt_datetimefield_value(now)
    # In one transaction: in autocommit each row was a commit of its own, a write to SQLite's log every answer
    # (0.5 ms a row, most of the engine's time at 512 in flight on SQLite).
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.executemany(_upsert("VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"), [row[:-1] + (now,) for row in rows])


COLUMNS = ("project", "deployment", "key_hash", "source", "system_fingerprint", "key", "body", "size", "hits", "created_at")


@functools.cache
def _columns():
    return [CachedResponse._meta.get_field(name) for name in COLUMNS]


def _names() -> str:
    return ", ".join(connection.ops.quote_name(f.column) for f in _columns())


def _table() -> str:
    return connection.ops.quote_name(CachedResponse._meta.db_table)


@functools.cache
def _upsert(rows: str) -> str:
    key = connection.ops.quote_name("key")
    return (
        f"INSERT INTO {_table()} ({_names()}) {rows} ON CONFLICT (project_id, key_hash) DO UPDATE SET "
        f"deployment_id = excluded.deployment_id, source = excluded.source, system_fingerprint = excluded.system_fingerprint, {key} = excluded.{key}, "
        "body = excluded.body, size = excluded.size, hits = 0, created_at = excluded.created_at, last_hit_at = NULL"
    )


def _served(models: str, system: str) -> str:
    return " ".join(part for part in (f"models:{models}" if models else "", f"system:{system}" if system else "") if part)[:200]


def served_parts(served: str) -> tuple[str, str]:
    """(the `/models` entry's digest, the last system_fingerprint) of a `Deployment.served_fingerprint`."""
    parts = dict(part.split(":", 1) for part in served.split() if ":" in part)
    return parts.get("models", ""), parts.get("system", "")


def record_models_entry(deployment: Deployment, entry: dict | None) -> None:
    """What `/models` says of the deployment's model, minus what changes on every answer (vLLM's `created`)."""
    stable = {k: v for k, v in (entry or {}).items() if k not in {"created", "permission", "object"}}
    models = hashlib.sha256(orjson.dumps(stable, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16] if stable else ""
    served = _served(models, served_parts(deployment.served_fingerprint)[1])
    if served != deployment.served_fingerprint:
        deployment.served_fingerprint = served
        Deployment.objects.filter(pk=deployment.pk).update(served_fingerprint=served)


def clear_cache(deployment: Deployment) -> int:
    """Every kept answer the deployment would be served (those of its source, whichever deployment of the project
    asked) and every one it asked itself: its next evals ask again. How many went."""
    served = CachedResponse.objects.filter(project_id=deployment.project_id, source=source_of(deployment))
    return served.delete()[0] + CachedResponse.objects.filter(deployment=deployment).delete()[0]


def evict(project_id: int) -> int:
    """Answers past their deployment's time to live, then the least recently used past the project's cap; how many went."""
    gone = 0
    now = timezone.now()
    for deployment_id, ttl in Deployment.objects.filter(cached_responses__project_id=project_id).distinct().values_list("pk", "cache_ttl_seconds"):
        gone += CachedResponse.objects.filter(project_id=project_id, deployment_id=deployment_id, created_at__lt=now - timedelta(seconds=ttl)).delete()[0]
    kept = CachedResponse.objects.filter(project_id=project_id)
    excess = (kept.aggregate(total=Sum("size"))["total"] or 0) - settings.RESPONSE_CACHE_MAX_BYTES
    if excess <= 0:
        return gone
    oldest, freed = [], 0
    for pk, size in kept.order_by(Coalesce("last_hit_at", "created_at"), "pk").values_list("pk", "size").iterator():
        if freed >= excess:
            break
        oldest.append(pk)
        freed += size
    for start in range(0, len(oldest), 1000):
        gone += CachedResponse.objects.filter(pk__in=oldest[start : start + 1000]).delete()[0]
    return gone
