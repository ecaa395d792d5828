"""A queue's labelled items as data: a version of a dataset (the first export makes the dataset, each later one its
next version), and the labels themselves as JSON lines for `bv review export`."""

import json
from collections import Counter
from statistics import fmean

from django.db import transaction

from agent_tasks.models import Trial
from evals.datasets.rows import DatasetError
from evals.datasets.versions import new_dataset, replace_rows
from evals.models import DatasetVersion, Sample
from traces.models import TraceSession
from traces.to_datasets import CONVERSATION, FIRST_USER_MESSAGE, Source, row_from

from .errors import ReviewError
from .models import Item, Label, Queue
from .rubric import as_number

MAX_EXPORT = 50_000


def consensus(scores: list[dict], answers: list[dict]) -> dict:
    """What the reviewers said together, per score: the mean of numbers, the commonest boolean or category (the first
    given on a tie); free text is left to the labels themselves."""
    agreed = {}
    for score in scores:
        given = [values.get(score["name"]) for values in answers]
        given = [value for value in given if as_number(score, value) is not None]  # text, or a value an older version gave
        if not given:
            continue
        agreed[score["name"]] = fmean(given) if score["kind"] == "numeric" else Counter(given).most_common(1)[0][0]
    return agreed


def labelled(queue: Queue, limit: int = MAX_EXPORT, labelled_by=None) -> list[dict]:
    """Each labelled item, in the order items were first labelled: {item, kind, object_id, step, judge_value, labels: [...], consensus};
    with `labelled_by`, only the items that person labelled (a skip is not a label)."""
    by_item = {}
    rows = Label.objects.filter(item__queue=queue, skipped=False).select_related("item", "reviewer", "rubric").order_by("item_id", "created_at")
    if labelled_by is not None:
        rows = rows.filter(item__in=Label.objects.filter(item__queue=queue, reviewer=labelled_by, skipped=False).values("item_id"))
    for label in rows[: limit * 10].iterator(chunk_size=2000):
        entry = by_item.setdefault(
            label.item_id,
            {
                "item": label.item_id,
                "kind": label.item.kind,
                "object_id": label.item.object_id,
                "step": label.item.step,
                "judge_value": label.item.judge_value,
                "labels": [],
            },
        )
        entry["labels"].append(
            {"reviewer": label.reviewer.username, "rubric_version": label.rubric.number, "values": label.values, "at": label.created_at.isoformat()}
        )
    scores = queue.rubric.scores
    # In the order items were first labelled: a later export adds rows at the end of the dataset's next version
    # (replace_rows matches rows by place), rather than shifting every row after an item labelled late.
    found = sorted(by_item.values(), key=lambda entry: (entry["labels"][0]["at"], entry["item"]))[:limit]
    for entry in found:
        entry["consensus"] = consensus(scores, [label["values"] for label in entry["labels"]])
    return found


def _inputs(entries: list[dict]) -> dict[tuple, object]:
    """What each item was, as a dataset row's input: a sample's prompt, a session's conversation, a trial's task."""
    ids = {kind: [e["object_id"] for e in entries if e["kind"] == kind] for kind in Item.Kind.values}
    found = {(Item.Kind.SAMPLE, pk): text for pk, text in Sample.objects.filter(pk__in=ids[Item.Kind.SAMPLE]).values_list("pk", "input")}
    for trial in Trial.objects.filter(pk__in=ids[Item.Kind.TRIAL]).select_related("task"):
        found[(Item.Kind.TRIAL, trial.pk)] = f"Trial {trial.pk}: task {trial.task}, agent {trial.agent}"
    of_session = {}
    for entry in entries:
        if entry["kind"] in (Item.Kind.SESSION, Item.Kind.STEP):
            of_session.setdefault(entry["object_id"], []).append(entry)
    for session in TraceSession.objects.filter(pk__in=list(of_session)):
        for entry in of_session[session.pk]:
            step = entry["step"] if entry["kind"] == Item.Kind.STEP else None
            try:
                found[(entry["kind"], session.pk, step)] = row_from(Source(session, step=step, input=CONVERSATION if step else FIRST_USER_MESSAGE))["input"]
            except DatasetError:
                found[(entry["kind"], session.pk, step)] = f"Session {session.session_id}" + (f", step {step}" if step else "")
    return found


def to_dataset(queue: Queue, user) -> DatasetVersion:
    """The queue's labelled items as the next version of its dataset: input as the item was, expected the consensus
    (JSON), metadata every label. 400 when nothing is labelled yet."""
    entries = labelled(queue)
    if not entries:
        raise ReviewError("queue", "Nothing in this queue is labelled yet: there is nothing to export.")
    inputs = _inputs(entries)
    rows = []
    for entry in entries:
        key = (
            (entry["kind"], entry["object_id"])
            if entry["kind"] in (Item.Kind.SAMPLE, Item.Kind.TRIAL)
            else (entry["kind"], entry["object_id"], entry["step"] or None)
        )
        rows.append(
            {
                "input": inputs.get(key) or f"{entry['kind']} {entry['object_id']} (deleted)",
                "expected": json.dumps(entry["consensus"], ensure_ascii=False, sort_keys=True),
                "metadata": {"source": "review", "queue": queue.pk, **{k: entry[k] for k in ("kind", "object_id", "step", "judge_value", "labels")}},
            }
        )
    with transaction.atomic():
        locked = Queue.objects.select_for_update().get(pk=queue.pk)
        if locked.dataset_id is None:
            dataset = new_dataset(queue.project, user, f"{queue.name} labels"[:100], rows, f"labels of review queue {queue.pk}")
            Queue.objects.filter(pk=queue.pk).update(dataset=dataset)
            queue.dataset = dataset
            return dataset.versions.get(number=1)
        try:
            return replace_rows(locked.dataset, user, rows, f"labels of review queue {queue.pk}")
        except DatasetError as exc:
            raise ReviewError("queue", str(exc)) from None
