"""A dashboard list: filtered and sorted by a FilterSet, a page at a time, with the total.

django-filter reads the query string through a form, so a value that is not one of a filter's choices is an error
shown beside the filter (the list answers empty), never a 500 or a query on what came. Whatever the page, a list asks
the same queries: one count and one page of rows (plus what its queryset prefetches).
"""

import django_filters
from django.core.paginator import Paginator
from django.db.models import F

PER_PAGE = 50


class Ordering(django_filters.OrderingFilter):
    """Sorts with the empty values last either way (an eval with no score is not the best or the worst), and by id
    after, so a page boundary never moves between two requests."""

    def filter(self, qs, value):
        if not value:
            return qs
        fields = [self.get_ordering_value(param) for param in value]
        return qs.order_by(*[F(f.lstrip("-")).desc(nulls_last=True) if f.startswith("-") else F(f).asc(nulls_last=True) for f in fields], "-pk")


def sort(**params) -> Ordering:
    """A list's Sort: each query parameter named for what it sorts (`?order=score`, `?order=-score`) as (model field or
    annotation, label); without one, the list keeps its queryset's order, newest first."""
    return Ordering(
        fields=[(field, param) for param, (field, _) in params.items()],
        field_labels={field: label for field, label in params.values()},
        empty_label="Newest first",
        label="Sort",
    )


class ByName(django_filters.FilterSet):
    """A list whose rows are known by their name: a search on it, and a sort by it or by age (newest first unless
    asked). A list subclasses it with its Meta (model and fields) and its own filters, and gives it its rows newest first."""

    name = django_filters.CharFilter(lookup_expr="icontains", label="Name", max_length=100)
    order = sort(name=("name", "Name"), created=("created_at", "Created"))


def listing(request, filterset_class, queryset, *, per_page: int = PER_PAGE) -> dict:
    """The template's context for one page: `filters` (the form), `page` (its rows, number and total) and `query` (the
    filters and sort, for the page links)."""
    filters = filterset_class(request.GET or None, queryset=queryset, request=request)
    # Its fields' ids apart from a form on the same page (the deployments page's own `name`): one id, one element.
    filters.form.auto_id = "filter_%s"
    rows = queryset if not filters.is_bound else filters.qs if filters.is_valid() else queryset.none()
    page = Paginator(rows, per_page).get_page(request.GET.get("page"))
    params = request.GET.copy()
    params.pop("page", None)
    return {"filters": filters, "page": page, "query": params.urlencode()}


def paged(request, rows, *, per_page: int = PER_PAGE) -> dict:
    """A page of a list with nothing to filter (a list built in Python, such as the judges' cards): the same `page` and
    `query` as listing() gives, for _pager.html."""
    return {"page": Paginator(rows, per_page).get_page(request.GET.get("page")), "query": ""}
