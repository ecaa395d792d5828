"""A human-graded eval: a queue's labels of one eval's samples, as an eval of their own ("human" scorer), on the
same rows as the eval they label, so that it compares paired with it (or with any eval on those rows) like any other.

A row's score is the reviewers' consensus on one numeric or boolean score, put on 0 to 1 (a boolean's "yes" is 1;
a number from the rubric's min to its max). Only rows someone labelled are stored: the comparison pairs those and
counts the rest as unpaired. Nothing is asked of any deployment, so nothing is charged.
"""

from django.db import transaction
from django.utils import timezone

from evals.engine import refresh_counters
from evals.models import Eval, Sample

from . import export
from .errors import ReviewError
from .models import Item, Queue


def score_value(score: dict, agreed) -> float | None:
    if agreed is None:
        return None
    if score["kind"] == "boolean":
        return 1.0 if agreed else 0.0
    return (float(agreed) - score["min"]) / (score["max"] - score["min"])


def human_eval(queue: Queue, user, score_name: str, source_id: int | None = None) -> Eval:
    """The eval of the queue's labels of `score_name` on the samples of one eval (`source_id`, or the only one it holds)."""
    score = next((s for s in queue.rubric.scores if s["name"] == score_name), None)
    if score is None or score["kind"] not in ("numeric", "boolean"):
        graded = [s["name"] for s in queue.rubric.scores if s["kind"] in ("numeric", "boolean")]
        raise ReviewError("score", f"A human eval scores a numeric or boolean score of the rubric: {', '.join(graded) or 'it has none'}.")
    sample_ids = Item.objects.filter(queue=queue, kind=Item.Kind.SAMPLE).values("object_id")
    sources = sorted(set(Sample.objects.filter(pk__in=sample_ids, eval__project=queue.project).values_list("eval_id", flat=True)))
    if source_id is None and len(sources) != 1:
        raise ReviewError(
            "eval",
            f"The queue holds samples of {'no eval' if not sources else 'evals ' + ', '.join(f'#{pk}' for pk in sources)}: name the one to grade (eval).",
        )
    source_id = source_id if source_id is not None else sources[0]
    if source_id not in sources:
        raise ReviewError("eval", f"The queue holds no sample of eval #{source_id}.", status_code=404)
    source = Eval.objects.get(pk=source_id)
    by_sample = {entry["object_id"]: entry for entry in export.labelled(queue) if entry["kind"] == Item.Kind.SAMPLE}
    graded = []
    for sample in Sample.objects.filter(eval=source, pk__in=list(by_sample)).order_by("row_index"):
        value = score_value(score, by_sample[sample.pk]["consensus"].get(score_name))
        if value is not None:
            graded.append((sample, value, by_sample[sample.pk]))
    if not graded:
        raise ReviewError("score", f"No sample of eval #{source.pk} in this queue has a label of {score_name} yet.")
    now = timezone.now()
    with transaction.atomic():
        ev = Eval.objects.create(
            project=queue.project,
            deployment=source.deployment,
            benchmark=source.benchmark,
            benchmark_version=source.benchmark_version,
            benchmark_options=source.benchmark_options,
            dataset=source.dataset,
            dataset_version=source.dataset_version,
            scorers=[{"name": "human", "options": {"queue": queue.pk, "score": score_name, "rubric_version": queue.rubric.number}}],
            sample_limit=source.sample_limit,
            seed=source.seed,
            generation=source.generation,
            same_rows_as=source,
            rescored_from=source,
            mode=source.mode,
            status=Eval.Status.SUCCEEDED,
            status_message=f"Graded by people: {score_name} in review queue {queue.name}, {len(graded)} labelled rows of eval #{source.pk}.",
            total=len(graded),
            started_at=now,
            finished_at=now,
            created_by=user,
        )
        Sample.objects.bulk_create(
            [
                Sample(
                    eval=ev,
                    row_index=sample.row_index,
                    input=sample.input,
                    output=sample.output,
                    extracted=sample.extracted,
                    reference=sample.reference,
                    category=sample.category,
                    score=value,
                    scores={"human": {"queue": queue.pk, "score": score_name, "labels": [label["values"].get(score_name) for label in entry["labels"]]}},
                )
                for sample, value, entry in graded
            ]
        )
    refresh_counters(ev.pk)
    ev.refresh_from_db()
    return ev
