"""Fixed-window rate limits shared by every process through the cache."""

import time

from django.conf import settings
from django.core.cache import cache
from rest_framework.throttling import BaseThrottle

WINDOW_SECONDS = 60


def allow_attempt(scope: str, ident, limit: int, window: int = WINDOW_SECONDS) -> bool:
    key = f"throttle:{scope}:{ident}:{int(time.time() // window)}"
    cache.add(key, 0, window + 5)
    try:
        count = cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.set(key, 1, window + 5)
        count = 1
    return count <= limit


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
    limit = settings.LOGIN_ATTEMPTS_PER_MINUTE
    user_ok = allow_attempt("login-user", username.lower()[:150], limit)
    address_ok = allow_attempt("login-addr", client_address(request), limit * 5)
    return user_ok and address_ok


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
