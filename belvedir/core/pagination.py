"""The API's pages: DRF's limit and offset, with a most per page."""

from rest_framework.pagination import LimitOffsetPagination


class Pagination(LimitOffsetPagination):
    """Unbounded, `?limit=` went to PostgreSQL as it came: 10**23 overflowed its bigint LIMIT (a 500),
    and 10**9 read a whole table into one answer. A larger limit gets this many, and `next` goes on.
    (An offset past the rows is answered without a query.)"""

    max_limit = 1000
