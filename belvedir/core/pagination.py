"""The API's pages: DRF's limit and offset, with a most per page, and the same rule for lists a view slices itself."""

from rest_framework.pagination import LimitOffsetPagination
from rest_framework.utils.urls import replace_query_param

MAX_LIMIT = 1000


class Pagination(LimitOffsetPagination):
    """Unbounded, `?limit=` went to PostgreSQL as it came: 10**23 overflowed its bigint LIMIT (a 500),
    and 10**9 read a whole table into one answer. A larger limit gets this many, and `next` goes on.
    (An offset past the rows is answered without a query.)"""

    max_limit = MAX_LIMIT


def window(params, default: int) -> tuple[int, int]:
    """(limit, offset) from `?limit=` and `?offset=`, as Pagination reads them: a limit over MAX_LIMIT is
    MAX_LIMIT, one absent, zero or not a number is `default`; an offset not a number is 0."""
    raw = params.get("limit", "")
    limit = min(int(raw), MAX_LIMIT) if raw.isdecimal() and int(raw) > 0 else default
    raw = params.get("offset", "")
    return limit, int(raw) if raw.isdecimal() else 0


def next_link(request, limit: int, offset: int, total: int) -> str | None:
    """The URL of the page after this one, or None when this one reaches `total`."""
    if offset + limit >= total:
        return None
    url = replace_query_param(request.build_absolute_uri(), "limit", limit)
    return replace_query_param(url, "offset", offset + limit)
