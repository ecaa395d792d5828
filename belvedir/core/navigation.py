"""The dashboard's navigation: every area, each with the pages within it, the current ones marked.

One list, here, so that no page is reachable only from a sentence of links, and the header, the phone's menu and the
error pages all show the same areas.
"""

from dataclasses import dataclass, field

from django.urls import reverse


@dataclass
class Link:
    label: str
    url_name: str
    # Paths under which this link is the current one (its own URL when none is given).
    prefixes: tuple[str, ...] = ()
    owners_only: bool = False
    children: list["Link"] = field(default_factory=list)


AREAS = [
    Link("Harnesses", "harnesses:list", ("/harnesses/", "/runs/")),
    Link(
        "Evaluations",
        "evals:list",
        ("/evals/",),
        children=[
            Link("Evals", "evals:list", ("/evals/",)),
            Link("Benchmarks", "evals:benchmarks", ("/evals/benchmarks/", "/evals/compare/")),
            Link("Suites", "evals:suites", ("/evals/suites/", "/evals/suite-runs/", "/evals/local-model/")),
            Link("Deployments", "evals:deployments", ("/evals/deployments/",)),
            Link("Datasets", "evals:datasets", ("/evals/datasets/",)),
            Link("Judges", "evals:judges", ("/evals/judges/",)),
        ],
    ),
    Link("Monitors", "monitors:list", ("/monitors/", "/alerts/")),
    Link("Review", "review:queues", ("/review/",)),
    Link("Models", "models:list", ("/models/",)),
    Link("Tasks", "agent_tasks:list", ("/tasks/",)),
    Link("Jobs", "agent_tasks:jobs", ("/jobs/", "/trials/", "/regrades/")),
    Link(
        "Traces",
        "traces:sessions",
        ("/traces/",),
        children=[
            Link("Sessions", "traces:sessions", ("/traces/",)),
            Link("Task groups", "traces:groups", ("/traces/groups/",)),
            Link("Evaluators", "traces:evaluators", ("/traces/evaluators/",)),
        ],
    ),
    Link(
        "Settings",
        "settings",
        ("/settings/",),
        children=[
            Link("Overview", "settings", ("/settings/",)),
            Link("Balance", "billing:balance", ("/settings/balance/",), owners_only=True),
            Link("Secrets", "secrets", ("/settings/secrets/",), owners_only=True),
            Link("Members", "members", ("/settings/members/", "/settings/invitations/", "/settings/project/")),
            Link("Email", "email_settings", ("/settings/email/",)),
            Link("API keys", "api_keys", ("/settings/api-keys/",)),
        ],
    ),
]


def _current(links: list[Link], path: str) -> Link | None:
    """The link whose longest prefix the path starts with."""
    best, length = None, -1
    for link in links:
        for prefix in link.prefixes or (reverse(link.url_name),):
            if path.startswith(prefix) and len(prefix) > length:
                best, length = link, len(prefix)
    return best


def navigation(request) -> dict:
    """Context processor: `nav_areas`, each {label, url, current, children}, for the signed-in."""
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {}
    path = request.path
    is_owner = getattr(getattr(request, "membership", None), "role", "") == "owner"
    area = _current(AREAS, path)
    shown = []
    for link in AREAS:
        children = [c for c in link.children if is_owner or not c.owners_only]
        here = _current(children, path) if link is area else None
        shown.append(
            {
                "label": link.label,
                "url": reverse(link.url_name),
                "current": link is area,
                "children": [{"label": c.label, "url": reverse(c.url_name), "current": c is here} for c in children],
            }
        )
    return {"nav_areas": shown}
