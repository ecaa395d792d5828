import time

from django.conf import settings
from django.core.cache import cache
from rest_framework.throttling import BaseThrottle

WINDOW_SECONDS = 60


def allow_attempt(scope: str, ident, limit: int, window: int = WINDOW_SECONDS) -> bool:
    """A fixed-window counter shared by every process through the cache."""
    key = f"throttle:{scope}:{ident}:{int(time.time() // window)}"
    cache.add(key, 0, window + 5)
    try:
        count = cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.set(key, 1, window + 5)
        count = 1
    return count <= limit


def allow_coupon_attempt(user) -> bool:
    return allow_attempt("coupon", user.pk, settings.COUPON_ATTEMPTS_PER_MINUTE)


class CouponThrottle(BaseThrottle):
    """The same per-user budget for the API as for the dashboard form."""

    def allow_request(self, request, view):
        return allow_coupon_attempt(request.user)

    def wait(self):
        return WINDOW_SECONDS - time.time() % WINDOW_SECONDS
