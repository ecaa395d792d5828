"""Every `limit` on a list or a diff is capped at 1,000, and the answer says how to get the rest."""

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.pagination import CursorPagination, LimitOffsetPagination, PageNumberPagination

from agent_tasks.jobs import create_job
from belvedir.core.pagination import MAX_LIMIT
from evals.datasets.versions import create_dataset

from .test_agent_job_rules import task_set

HUGE = "99999999"


@pytest.mark.django_db
def test_the_dataset_diff_holds_at_most_1000_rows_a_kind_and_links_the_next_page(api, project, owner):
    dataset = create_dataset(project, owner, "big", b"".join(b'{"input": "q%d", "expected": "a"}\n' % i for i in range(1500)))
    first = api.get(f"/api/v1/datasets/{dataset.pk}/diff", {"base": 0, "limit": HUGE}).json()
    assert first["counts"] == {"added": 1500, "edited": 0, "removed": 0}
    assert len(first["added"]) == MAX_LIMIT and (first["limit"], first["offset"]) == (MAX_LIMIT, 0)
    assert "offset=1000" in first["next"] and "limit=1000" in first["next"]
    rest = api.get(first["next"]).json()
    assert len(rest["added"]) == 500 and rest["next"] is None
    assert {r["position"] for r in first["added"]}.isdisjoint(r["position"] for r in rest["added"])
    assert len(api.get(f"/api/v1/datasets/{dataset.pk}/diff", {"base": 0}).json()["added"]) == 500  # the default


def _api_views(patterns, prefix=""):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _api_views(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern) and hasattr(pattern.callback, "cls"):
            yield prefix + str(pattern.pattern), pattern.callback.cls


def test_every_api_list_pages_at_most_1000():
    views = list(_api_views(get_resolver().url_patterns))
    assert len(views) > 50  # the sweep sees the API
    for route, view in views:
        paginator = getattr(view, "pagination_class", None)
        if paginator is None:
            continue
        if issubclass(paginator, LimitOffsetPagination):
            assert paginator.max_limit is not None and paginator.max_limit <= MAX_LIMIT, route
        elif issubclass(paginator, CursorPagination | PageNumberPagination):
            size = paginator.max_page_size if paginator.page_size_query_param else paginator.page_size
            assert size is not None and size <= MAX_LIMIT, route
        else:
            raise AssertionError(f"{route}: an unknown paginator {paginator}")


@pytest.mark.django_db
def test_huge_limits_on_every_list_are_capped_or_refused_never_a_500(api, project, owner):
    create_dataset(project, owner, "d", b'{"input": "q", "expected": "a"}\n')
    # One list past the cap, so "at most 1,000" can fail: a job of 1,200 trials (12 tasks × 100 attempts).
    job = create_job(project, owner, version=task_set(project, owner, [f"t{i}" for i in range(12)]), agents=["nop"], attempts=100, budget_cents=100)
    lists = [route for route, view in _api_views(get_resolver().url_patterns) if "<" not in route and "(?P" not in route and "api/v1/" in route]
    assert len(lists) > 20
    for route in lists:
        url = "/" + route.lstrip("^").rstrip("$").replace("\\Z", "").replace("\\.", ".")
        response = api.get(url, {"limit": HUGE, "page_size": HUGE, "n": HUGE, "offset": "0"})
        assert response.status_code < 500, url
        if response.status_code == 200 and "json" in response.get("Content-Type", ""):
            body = response.json()
            if isinstance(body, dict) and "results" in body and isinstance(body["results"], list):
                assert len(body["results"]) <= MAX_LIMIT, url
    trials = api.get(f"/api/v1/jobs/{job.pk}/trials", {"limit": HUGE}).json()
    assert len(trials["results"]) == MAX_LIMIT and trials["next"] and trials["count"] == 1200
    rest = api.get(trials["next"]).json()
    assert len(rest["results"]) == 200 and rest["next"] is None
