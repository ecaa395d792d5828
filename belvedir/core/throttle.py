"""Fixed-window rate limits shared by every process.

Counts go up atomically: Redis INCR when there is Redis, otherwise one
row-locking UPDATE on a counter row. (Django's database cache reads, then
writes, so parallel attempts overshoot any limit kept in it.)
"""

import datetime
import time

from django.conf import settings
from django.core.cache import cache
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone
from rest_framework.throttling import BaseThrottle

from .models import RateCounter

WINDOW_SECONDS = 60


def allow_attempt(scope: str, ident, limit: int, window: int = WINDOW_SECONDS) -> bool:
    key = f"throttle:{scope}:{ident}:{int(time.time() // window)}"[:255]
    return _increment(key, window + 5) <= limit


def _increment(key: str, ttl: int) -> int:
    if settings.REDIS_URL:
        cache.add(key, 0, ttl)
        try:
            return cache.incr(key)  # INCR: atomic in Redis
        except ValueError:  # expired between add and incr
            cache.set(key, 1, ttl)
            return 1
    expires_at = timezone.now() + datetime.timedelta(seconds=ttl)
    if connection.vendor == "postgresql":
        # One statement, the same for every request: count up atomically, and
        # drop a few expired windows on the way (SKIP LOCKED: never wait on them).
        with connection.cursor() as cursor:
            cursor.execute(
                """
                WITH expired AS (
                    DELETE FROM core_ratecounter WHERE id IN (
                        SELECT id FROM core_ratecounter WHERE expires_at < now() LIMIT 20 FOR UPDATE SKIP LOCKED
                    )
                )
                INSERT INTO core_ratecounter (key, count, expires_at) VALUES (%s, 1, %s)
                ON CONFLICT (key) DO UPDATE SET count = core_ratecounter.count + 1
                RETURNING count
                """,
                [key, expires_at],
            )
            return cursor.fetchone()[0]
    with transaction.atomic():
        # The UPDATE locks the row until commit, so the count read back is ours.
        if not RateCounter.objects.filter(key=key).update(count=F("count") + 1):
            try:
                with transaction.atomic():
                    RateCounter.objects.create(key=key, count=1, expires_at=expires_at)
                RateCounter.objects.filter(expires_at__lt=timezone.now()).delete()
                return 1
            except IntegrityError:  # created by a parallel attempt meanwhile
                RateCounter.objects.filter(key=key).update(count=F("count") + 1)
        return RateCounter.objects.filter(key=key).values_list("count", flat=True).get()


def seconds_to_next_window(window: int = WINDOW_SECONDS) -> int:
    return int(window - time.time() % window) + 1


def client_address(request) -> str:
    # REMOTE_ADDR only: X-Forwarded-For is the client's to forge unless a
    # trusted proxy sets it, and this platform does not assume one.
    return request.META.get("REMOTE_ADDR", "")


def allow_coupon_attempt(request) -> bool:
    limit = settings.COUPON_ATTEMPTS_PER_MINUTE
    user_ok = allow_attempt("coupon-user", request.user.pk, limit)
    address_ok = allow_attempt("coupon-addr", client_address(request), limit * 5)
    return user_ok and address_ok


def allow_login_attempt(request, username: str) -> bool:
    """Per username *and* address together, plus per address.

    A limit on the username alone would let anyone lock a chosen user out by
    failing to log in as them; this way the user's own address keeps its budget.
    """
    limit = settings.LOGIN_ATTEMPTS_PER_MINUTE
    address = client_address(request)
    pair_ok = allow_attempt("login-user-addr", f"{username.lower()[:150]}|{address}", limit)
    address_ok = allow_attempt("login-addr", address, limit * 5)
    return pair_ok and address_ok


class CouponThrottle(BaseThrottle):
    """The same per-user budget for the API as for the dashboard form."""

    def allow_request(self, request, view):
        return allow_coupon_attempt(request)

    def wait(self):
        return seconds_to_next_window()


class IngestThrottle(BaseThrottle):
    """Per key: generous enough for a busy fleet sending 1,000-span batches back to back."""

    def allow_request(self, request, view):
        return allow_attempt("ingest", getattr(request.auth, "pk", request.user.pk), settings.INGEST_REQUESTS_PER_MINUTE)

    def wait(self):
        return seconds_to_next_window()


def allow_mail_to(address: str) -> bool:
    """Mail the platform sends on a stranger's request (verification links,
    password resets): a few a minute per address, so nobody floods an inbox."""
    return allow_attempt("mail-to", address.lower()[:254], settings.MAILS_PER_ADDRESS_PER_MINUTE)
