"""Stopping an eval early: the engine's look at each flush, and the record of where and why it stopped (#43).

An eval with `decide_against` (an eval of the same rows) stops once the sequential test
(evals/sequential.py) decides on the longest prefix of the run order both have stored, or
shows that no difference worth having is left; one with `precision_target` stops once its
score's 95% interval is that narrow. A stop is written into `early_stop` while the eval
runs: no new request goes out, the rows in flight are stored, and the pass ends it
succeeded (tasks.finish), so its scoring sandbox is never reaped under rows still being
scored. Resume (actions.resume_eval) sets it aside as {"resumed": ...} and scores the rest.

It looks at every flush (about once a second), on the ORM's thread. Measured at MMLU's
size (14,042 rows each stored, PostgreSQL, load ~3): 85-100 ms a look, of which reading
both evals' scores is 30-50 ms and the test on the whole prefix ~45 ms of Python; an
eval without a target pays nothing.
"""

from django.db.models import Case, F, FloatField, When

from . import statistics
from .comparison import scale_of, sequential_prefix, stopped_early, summary
from .models import Eval, Sample

# Below this many rows the precision target is not looked at: a bootstrap interval of a handful of rows can be
# narrow by chance (three equal grades give a width of 0).
MIN_ROWS_FOR_PRECISION = 30


def stops_early(ev: Eval) -> bool:
    """Whether the eval may stop before its last row at all."""
    return bool(ev.decide_against_id or ev.precision_target)


def look(ev: Eval) -> bool:
    """At a flush (the ORM's thread): True when no new request may go out because the eval stopped early, now or before.

    `ev` is the engine's copy, loaded when the pass began: its targets, and its
    early_stop then (a resumed one's {"resumed": ...} runs to the end).
    """
    if stopped_early(ev):
        return True
    if not stops_early(ev) or ev.early_stop:
        return False
    now = Eval.objects.filter(pk=ev.pk).values("status", "done_count", "total", "score", "score_low", "score_high", "early_stop").first()
    if now is None:
        return False
    if "reason" in now["early_stop"]:
        return True  # stopped at an earlier flush of this pass: each flush answers again
    if now["status"] != Eval.Status.RUNNING or now["early_stop"] or now["done_count"] >= now["total"]:
        return False
    stop = None
    if ev.decide_against_id:
        stop = decision(ev)
    if stop is None and ev.precision_target:
        stop = precision(ev, now)
    if stop is None:
        return False
    return bool(
        Eval.objects.filter(pk=ev.pk, status=Eval.Status.RUNNING, early_stop={}).update(early_stop=stop, status_message=f"Stopped early: {stop['summary']}.")
    )


def stored_scores(eval_id: int) -> dict[int, float | None]:
    """{row index: score} of the rows an eval stored, None for an errored one (stored, but nothing to pair)."""
    usable = Case(When(error="", then=F("score")), default=None, output_field=FloatField())
    return dict(Sample.objects.filter(eval_id=eval_id).values_list("row_index", usable))


def decision(ev: Eval) -> dict | None:
    """The sequential test of this eval against `decide_against`; the early_stop to record, or None to go on."""
    against = Eval.objects.select_related("deployment").filter(pk=ev.decide_against_id).first()
    if against is None:  # deleted since: nothing to decide against
        return None
    alpha = ev.decision_alpha or statistics.ALPHA
    found = sequential_prefix(against, ev, stored_scores(against.pk), stored_scores(ev.pk), alpha)
    if found.look.reason is None:
        return None
    return {
        "at": found.at,
        "of": found.of,
        "pairs": found.look.pairs,
        "reason": found.look.reason,
        "why": found.look.why,
        "verdict": found.look.verdict,
        "p": found.look.p,
        "alpha": alpha,
        "fixed_n_p": found.look.fixed_p,
        "delta": found.delta,
        "interval": found.interval,
        "min_difference": found.min_difference,
        "against": against.pk,
        "method": found.look.method,
        "summary": summary(found, alpha, f"{ev.deployment.name} (this eval)", f"{against.deployment.name} (eval #{against.pk})", scale_of(ev), stopped=True),
    }


def precision(ev: Eval, now: dict) -> dict | None:
    """Stop once the score's 95% interval, as refresh_counters just stored it, is at most ±precision_target."""
    if now["score_low"] is None or now["done_count"] < MIN_ROWS_FOR_PRECISION:
        return None
    half_width = (now["score_high"] - now["score_low"]) / 2
    if half_width > ev.precision_target:
        return None
    graded = Sample.objects.filter(eval_id=ev.pk, error="").exclude(score__in=[0.0, 1.0]).exists()
    # refresh_counters' choice: Wilson's for right/wrong rows, the percentile bootstrap once any row is graded.
    interval = "bootstrap" if graded else "Wilson"
    at, of = now["done_count"], now["total"]
    return {
        "at": at,
        "of": of,
        "reason": "precision",
        "verdict": "",
        "score": now["score"],
        "half_width": half_width,
        "target": ev.precision_target,
        "interval": interval,
        "summary": (
            f"stopped at {at:,}/{of:,}: score {now['score']:.4f} ± {half_width:.4f} ({interval} 95% interval of the {at:,} rows stored), "
            f"within its precision target ±{ev.precision_target:g}"
        ),
    }
