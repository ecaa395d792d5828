"""Review pages: the queues (with a form for each way to make one), a queue's progress and agreement, and the review
page itself: the item as Belvedir shows it, the rubric beside it, driven by the keyboard (static/js/review.js)."""

import json
import time

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from belvedir.core import reviewers
from belvedir.core.models import Membership
from belvedir.core.scoping import get_scoped_or_404

from . import agreement, export, fill, handout, judged, progress, queues
from .errors import ReviewError, Taken
from .forms import CalibrateForm, FillForm, QueueForm, RubricForm
from .human_eval import human_eval
from .items import shown
from .models import Item, Label, Queue
from .rubric import keyed


def _manages(request) -> bool:
    """Owners and members make and change queues; reviewers label them (belvedir/core/reviewers.py refuses the rest)."""
    return request.membership.role != Membership.Role.REVIEWER


def _refused(request):
    return render(request, "core/reviewer_only.html", {"message": reviewers.MESSAGE}, status=403)


@login_required
def queue_list(request):
    project = request.project
    form = QueueForm(request.POST if "new_queue" in request.POST else None)
    calibrate_form = CalibrateForm(request.POST if "calibrate" in request.POST else None, project=project)
    posted = form if form.is_bound else calibrate_form if calibrate_form.is_bound else None
    if posted is not None:
        if not _manages(request):
            return _refused(request)
        if posted.is_valid():
            data = dict(posted.cleaned_data)
            if posted is form:
                data = {key: value for key, value in data.items() if value not in (None, "")} | {"blind": data["blind"]}
            else:
                data["name"] = f"Calibrate {data['judge']}"[:100]
            try:
                queue = queues.create_queue(project, request.user, data)
            except ReviewError as exc:
                field = exc.field.split(".", 1)[0].split("[", 1)[0]
                posted.add_error(field if field in posted.fields else None, str(exc))
            else:
                messages.success(request, f"Queue {queue.name} made: {queue.items.count():,} items." + (" Add items below." if not queue.judge_key else ""))
                return redirect(queue)
    found = Queue.objects.for_user(request.user, project).annotate(**progress.COUNTS)
    context = {"queues": found[:200], "form": form, "calibrate_form": calibrate_form, "manages": _manages(request)}
    return render(request, "review/list.html", context, status=400 if posted is not None and posted.errors else 200)


def _queue(request, pk) -> Queue:
    return get_scoped_or_404(request, Queue.objects.for_user(request.user, request.project), pk=pk)


@login_required
def queue_detail(request, pk, *, fill_form=None, rubric_form=None, status=200):
    queue = _queue(request, pk)
    rubric = queue.rubric
    context = {
        "queue": queue,
        "rubric": rubric,
        "progress": progress.of_queue(queue),
        "reviewers": progress.of_reviewers(queue),
        "agreement": agreement.report(queue) if queue.overlap > 1 else None,
        "min_pair": agreement.MIN_PAIR,
        "judge": judged.estimate(queue) if queue.judge_key else None,
        "fill_form": fill_form or FillForm(),
        "rubric_form": rubric_form or RubricForm(initial={"scores": json.dumps(rubric.scores, indent=1), "instructions": rubric.instructions}),
        "versions": queue.rubrics.count(),
        "graded_scores": [s["name"] for s in rubric.scores if s["kind"] in ("numeric", "boolean")]
        if queue.items.filter(kind=Item.Kind.SAMPLE).exists()
        else [],
        "manages": _manages(request),
    }
    return render(request, "review/detail.html", context, status=status)


@login_required
@require_POST
def queue_action(request, pk, what):
    queue = _queue(request, pk)
    if not _manages(request):
        return _refused(request)
    try:
        if what == "fill":
            form = FillForm(request.POST)
            if not form.is_valid():
                return queue_detail(request, pk, fill_form=form, status=400)
            kind, filters = form.filters()
            added = fill.fill_by_filter(queue, kind, filters)
            messages.success(request, f"{added:,} item{'s' if added != 1 else ''} added." if added else "Nothing new matched: no item added.")
        elif what == "rubric":
            form = RubricForm(request.POST)
            if not form.is_valid():
                return queue_detail(request, pk, rubric_form=form, status=400)
            queue = queues.update_queue(queue, request.user, {"scores": form.cleaned_data["scores"], "instructions": form.cleaned_data["instructions"]})
            messages.success(request, f"Rubric version {queue.rubric.number} saved; labels made before keep the version they were made under.")
        elif what == "dataset":
            version = export.to_dataset(queue, request.user)
            messages.success(request, f"Labels exported: version {version.number} of dataset {version.dataset.name} ({version.row_count:,} rows).")
            return redirect(version.dataset)
        elif what == "eval":
            ev = human_eval(queue, request.user, request.POST.get("score", "")[:50])
            messages.success(request, f"Human-graded eval #{ev.pk}: {ev.total} labelled rows, on the rows of the eval they label.")
            return redirect(ev)
        elif what == "resume":
            try:
                width = float(request.POST.get("target_width", ""))
            except ValueError:
                raise ReviewError("target_width", "Give the narrower interval width to label on to.") from None
            queue = queues.update_queue(queue, request.user, {"target_width": width})
            messages.success(request, f"The queue hands items out again, until κ's interval is {width:g} wide.")
        elif what == "delete":
            name = queue.name
            queue.delete()
            messages.success(request, f"Queue {name} deleted, with its labels.")
            return redirect("review:queues")
        else:
            return render(request, "404.html", status=404)
    except ReviewError as exc:
        messages.error(request, str(exc))
        return queue_detail(request, pk, status=exc.status_code if exc.status_code < 500 else 400)
    return redirect(queue)


def _fields(rubric, values: dict) -> list[dict]:
    """The rubric's scores as the form draws them: the choices keys 1-9 pick, and what is filled in."""
    fields = []
    for score in rubric.scores:
        given = values.get(score["name"])
        choices = [
            {"key": n, "value": str(v).lower() if isinstance(v, bool) else v, "checked": given is not None and str(given).lower() in (str(v).lower(), f"{v}.0")}
            for n, v in enumerate(keyed(score), 1)
        ]
        fields.append({**score, "choices": choices, "value": given})
    return fields


@login_required
def review(request, pk):
    """GET: the item to label (the next one, or ?item= one you labelled); POST: your label or skip, then the next one."""
    queue = _queue(request, pk)
    rubric = queue.rubric
    status, values, note = 200, {}, ""
    if request.method == "POST":
        item = get_object_or_404(Item.objects.filter(queue=queue), pk=request.POST.get("item") if str(request.POST.get("item", "")).isdigit() else 0)
        if request.POST.get("action") == "skip":
            try:
                handout.skip(queue, item, request.user)
            except ReviewError as exc:
                messages.error(request, str(exc))
            return redirect("review:review", pk=queue.pk)
        values = {score["name"]: request.POST.get(f"score-{score['name']}", "") for score in rubric.scores}
        started = request.POST.get("started", "")
        seconds = max(0.0, time.time() - float(started)) if started.replace(".", "", 1).isdigit() else None
        try:
            handout.submit(queue, item, request.user, values, seconds=min(seconds, 86_400) if seconds is not None else None)
        except Taken as exc:
            note, status = str(exc), 409
        except ReviewError as exc:
            note, status = str(exc), 400
        else:
            messages.success(request, "Label saved.")
            return redirect("review:review", pk=queue.pk)
    elif request.GET.get("item", "").isdigit():
        # An item you labelled (to look again or change it); owners and members open any, to adjudicate.
        openable = Item.objects.filter(queue=queue) if _manages(request) else Item.objects.filter(queue=queue, labels__reviewer=request.user)
        item = get_object_or_404(openable, pk=request.GET["item"])
    else:
        item = handout.next_item(queue, request.user)
    mine = Label.objects.filter(item=item, reviewer=request.user, skipped=False).first() if item else None
    if mine is not None and not values:
        values = mine.values
    adjudicating = item is not None and mine is None and request.GET.get("item", "").isdigit()
    unblinded = item is not None and (not queue.blind or mine is not None or adjudicating)
    others = list(Label.objects.filter(item=item, skipped=False).exclude(reviewer=request.user).select_related("reviewer")) if unblinded else []
    drawn = shown(item) if item else None
    context = {
        **(drawn.context if drawn else {}),  # what the item's own template draws: its sample, session or trial
        "queue": queue,
        "rubric": rubric,
        "item": item,
        "shown": drawn,
        "fields": _fields(rubric, values),
        "mine": mine,
        "note": note,
        "unblinded": unblinded,
        "others": others,
        "previous": handout.previous(queue, request.user, item if mine else None) if item else handout.previous(queue, request.user),
        "progress": progress.of_queue(queue),
        "my_count": Label.objects.filter(item__queue=queue, reviewer=request.user, skipped=False).count(),
        "started": time.time(),
    }
    return render(request, "review/review.html", context, status=status)


@login_required
@require_POST
def add_to_queue(request):
    """ "Add to queue" from an eval's samples, a session or a trial page: back to where it was pressed."""
    queue = get_scoped_or_404(
        request, Queue.objects.for_user(request.user, request.project), pk=request.POST.get("queue") if str(request.POST.get("queue", "")).isdigit() else 0
    )
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        back = queue.get_absolute_url()
    if not _manages(request):
        return _refused(request)
    kind = request.POST.get("kind", "")
    raw = request.POST.get("id", "")
    ident = int(raw) if raw.isdigit() and kind in (Item.Kind.SAMPLE, Item.Kind.TRIAL) else raw
    step = request.POST.get("step", "")
    try:
        added = fill.add_items(queue, kind, [ident], step=int(step) if step.isdigit() else None)
    except ReviewError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Added to review queue {queue.name}." if added else f"Already in review queue {queue.name}.")
    return redirect(back)
