"""What an item is: the session, step, sample or trial it names, found within the queue's project, and what the
review page shows of it (the way Belvedir already shows each), with the judge's verdict kept apart for the blind rule."""

from dataclasses import dataclass, field

from django.db.models import QuerySet
from django.urls import reverse

from agent_tasks.models import Trial
from evals.models import Sample
from traces import trajectory
from traces.models import TraceSession

from .errors import ReviewError
from .models import Item

# A session shows its first steps on the review page; the whole of it is a link away.
STEPS_SHOWN = 50


def scoped(kind: str, project) -> QuerySet:
    """The objects of `kind` an item of the project may name."""
    if kind in (Item.Kind.SESSION, Item.Kind.STEP):
        return TraceSession.objects.filter(project=project)
    if kind == Item.Kind.SAMPLE:
        return Sample.objects.filter(eval__project=project)
    if kind == Item.Kind.TRIAL:
        return Trial.objects.filter(task__version__task_set__project=project)
    raise ReviewError("kind", f"An item is a {', '.join(Item.Kind.values)}, not {str(kind)[:40]!r}.")


@dataclass
class Shown:
    """The review page's view of one item: a title, a link to where it lives, and the parts its template draws."""

    title: str
    url: str
    template: str
    context: dict = field(default_factory=dict)


def shown(item: Item) -> Shown:
    """The item as its own page shows it (fetched within the queue's project: a deleted object says so)."""
    project = item.queue.project
    found = scoped(item.kind, project).filter(pk=item.object_id).first()
    if found is None:
        return Shown(f"{item.get_kind_display()} {item.object_id} (deleted)", "", "review/items/gone.html")
    if item.kind == Item.Kind.SAMPLE:
        ev = found.eval
        return Shown(
            f"{ev.benchmark or ev.dataset or 'eval'} row {found.row_index} ({ev.deployment})",
            ev.get_absolute_url(),
            "review/items/sample.html",
            {"sample": found, "eval": ev},
        )
    if item.kind == Item.Kind.TRIAL:
        return Shown(f"Trial {found.pk}: {found.task} by {found.agent}", found.get_absolute_url(), "review/items/trial.html", {"trial": found})
    prices = trajectory.model_prices(project.pk)
    if item.kind == Item.Kind.STEP:
        # The trajectory page's own cursor to the step (all_steps reads the spans before it without their prompts).
        before = trajectory.all_steps(found, item.step, prices)
        params = {"after": before[-1].page_query.removeprefix("?after=")} if len(before) == item.step and item.step > 1 else {}
        steps = [step for step in trajectory.steps_page(found, params, size=1, prices=prices)[0] if step.number == item.step]
        title = f"Step {item.step} of session {found.session_id}"
    else:
        steps = trajectory.steps_page(found, {}, size=STEPS_SHOWN, prices=prices)[0]
        title = f"Session {found.session_id}"
    url = reverse("traces:session", args=[found.session_id])
    return Shown(title, url, "review/items/session.html", {"session": found, "steps": steps, "cursor": None, "more": found.span_count > len(steps)})
