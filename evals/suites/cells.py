"""Suite cells paid once: what decides a cell's answers as one key, and the project's finished cell that holds them.

A cell (one benchmark on one deployment in a suite run) gives the answers its inputs decide: the benchmark's
data (its version: the data's SHA-256; for a dataset its id and version), options and mode, the rows drawn,
epochs and samples per problem, the generation settings, what the deployment serves (base URL, model, API
style, what its server says it serves) and, for a judged cell, the same of its judge and the judge's prompt.
`cell_key` is the SHA-256 of exactly that as canonical JSON. A deployment's name, id, API key, prices and
max in flight change no answer and are not in it; the response cache mode is not either (it only decides
where the same answers come from).

A cell whose key matches a finished cell of the same project is not run: it is created succeeded, its rows
copied in one INSERT ... SELECT, linked to the eval whose answers they are (`reused_from`), at no cost.
Finished means every row stored and none errored (`finished_cells`). A suite run with `force` runs every cell;
one under the cache mode `auto` runs again a cell whose answers were sampled without a seed (`Eval.sampled`).
"""

import asyncio
import hashlib
import json
from dataclasses import dataclass
from decimal import Decimal

from django.db import connection
from django.db.models import F, Max
from django.utils import timezone

from .. import benchmarks
from ..client import http_session, models_entry
from ..comparison import row_count
from ..models import CacheMode, Deployment, Eval, Sample
from ..response_cache import record_models_entry
from ..subset import select_rows

# Bumped whenever what the key holds changes: keys made before then never match again.
KEY_VERSION = 1
# A benchmark's draws tried for a new run: those of its newest finished cells, a few (each costs a key per deployment).
SEED_CANDIDATES = 10
# The columns a copied row starts afresh: it asked nothing, so it spent no token and hit no cache.
UNSPENT = ("prompt_tokens", "completion_tokens", "judge_prompt_tokens", "judge_completion_tokens")


@dataclass
class Cell:
    """One eval a suite run makes: plan_eval's fields, its key, and the finished eval it copies (None: it runs)."""

    plan: dict
    key: str
    source: Eval | None = None


def cell_key(ev: Eval) -> str:
    """What decides the eval's answers, hashed: an unsaved Eval(**plan) before it exists, the stored one after."""
    identity = {
        "key": KEY_VERSION,
        "benchmark": ev.benchmark,
        "benchmark_version": ev.benchmark_version,
        "options": ev.benchmark_options,
        "dataset": [ev.dataset_id, ev.dataset_version] if ev.dataset_id else None,
        "scorers": ev.scorers,
        "mode": ev.mode,
        "deployment": served_by(ev.deployment),
        "generation": ev.generation,
        "judge": _judge(ev),
        "rows": _rows(ev),
        "epochs": ev.epochs,
        "samples_per_problem": ev.samples_per_problem,
    }
    text = json.dumps(_canonical(identity), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def served_by(deployment: Deployment) -> dict:
    """Who answers: the endpoint, the model it is asked for, how it is asked, and what its server says it serves."""
    return {"base_url": deployment.base_url.rstrip("/"), "model": deployment.model, "api_style": deployment.api_style, "served": deployment.served_fingerprint}


def _judge(ev: Eval) -> dict | None:
    if ev.judge_id is None:
        return None
    spec = benchmarks.get(ev.benchmark) if ev.benchmark else None
    rubric = spec.rubric(ev.benchmark_version) if spec is not None else None
    # A dataset's judge prompt is its llm_judge scorer's options, already in `scorers`.
    return {**served_by(ev.judge), "rubric": f"{rubric.name}@{rubric.version}" if rubric else None}


def _rows(ev: Eval) -> str:
    # The rows themselves, not the seed that drew them: a whole split is the same rows whatever the seed.
    count = row_count(ev)
    indices = select_rows(count, ev.sample_limit, ev.seed)
    if len(indices) == count:
        return f"all {count}"
    return "sha256:" + hashlib.sha256(",".join(map(str, indices)).encode()).hexdigest()


def _canonical(value):
    # 0 and 0.0 ask the same (a YAML file writes one, a form the other).
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {str(key): _canonical(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(item) for item in value]
    return value


def finished_cells(project, cache: str = CacheMode.AUTO):
    """The project's suite cells that can stand for a new one: succeeded with every row stored and none errored.

    Not one stopped early (a budget, a cancel: fewer rows than its total, and not succeeded), nor one with an
    errored row: its copy would carry the error, and a retry would then ask the deployment after all. Under `auto`,
    not one that sent a request sampled without a seed (Eval.sampled: MT-Bench's categories at 0.7): its answers
    are one draw, and a comparison of two runs pairing the same draw would find a delta of 0 by construction, where
    the response cache itself refuses them. `always` takes them, as it takes sampled answers from the cache.
    """
    done = Eval.objects.filter(project=project, status=Eval.Status.SUCCEEDED, error_count=0, total__gt=0, done_count=F("total"))
    if cache != CacheMode.ALWAYS:
        done = done.filter(sampled=False)
    return done.exclude(cell_key="")


def cells_of(project, plans: list[dict], *, force: bool, cache: str = CacheMode.AUTO) -> tuple[list[Cell], list[str]]:
    """Each planned eval as a cell, with the finished cell it copies unless `force`; and notes for the run's page.

    A benchmark drawn on a subset takes the rows of the finished cells most of this run's deployments can
    reuse (`_take_finished_rows`), so adding a deployment to a suite reuses the others' cells and the new
    ones pair with them. What the servers say they serve is asked first, for every run: a model swapped
    behind the same name since it was last seen is a miss, and a forced run's cells are keyed right.
    """
    refresh_fingerprints({d.pk: d for plan in plans for d in (plan["deployment"], plan["judge"]) if d is not None}.values())
    if force or not finished_cells(project, CacheMode.ALWAYS).filter(benchmark__in={plan["benchmark"] for plan in plans}).exists():
        return [Cell(plan, cell_key(Eval(**plan))) for plan in plans], []
    notes = _take_finished_rows(project, plans, cache)
    keys = [cell_key(Eval(**plan)) for plan in plans]
    latest = _latest(project, keys, cache)
    sources = Eval.objects.in_bulk(set(latest.values()))
    cells = [Cell(plan, key, sources.get(latest.get(key))) for plan, key in zip(plans, keys, strict=True)]
    if cache != CacheMode.ALWAYS:
        notes += _sampled_notes(project, [cell for cell in cells if cell.source is None])
    return cells, notes


def _sampled_notes(project, cells: list[Cell]) -> list[str]:
    """Why a cell a finished one has the key of runs again: that one's answers were drawn (Eval.sampled)."""
    drawn = set(finished_cells(project, CacheMode.ALWAYS).filter(sampled=True, cell_key__in={cell.key for cell in cells}).values_list("cell_key", flat=True))
    return [
        f"{cell.plan['benchmark']} on {cell.plan['deployment'].name} runs again: its finished cell's answers were sampled "
        "without a seed, one draw of many. Choose the cache mode `always` to reuse them."
        for cell in cells
        if cell.key in drawn
    ]


def refresh_fingerprints(deployments):
    """Each deployment's `/models` entry asked now, side by side (one GET each, 10 s at most), and recorded.

    An unanswered one keeps what was last seen: a server without the route, or down for a moment, is not
    a change of model (the local model's server starts with its first eval).
    """
    deployments = list(deployments)
    if not deployments:
        return

    async def entries():
        async with http_session(len(deployments)) as client:
            return await asyncio.gather(*(models_entry(client, d) for d in deployments))

    for deployment, entry in zip(deployments, asyncio.run(entries()), strict=True):
        if entry is not None:
            record_models_entry(deployment, entry)


def _take_finished_rows(project, plans: list[dict], cache: str) -> list[str]:
    """Set each subset benchmark's seed (all its deployments', so they pair) to the draw with the most reusable cells.

    A draw whose cells may not be reused (sampled answers, under `auto`) still lends its rows when no other
    draw has a reusable cell: the cells asked again then pair with the earlier ones, row for row.
    """
    groups: dict[str, list[dict]] = {}
    for plan in plans:
        if plan["benchmark"] and plan["same_rows_as"] is None and plan["sample_limit"] and plan["sample_limit"] < benchmarks.get(plan["benchmark"]).row_count():
            groups.setdefault(plan["benchmark"], []).append(plan)
    keyed: dict[tuple[str, int], list[str]] = {}
    for name, group in groups.items():
        earlier = finished_cells(project, CacheMode.ALWAYS).filter(benchmark=name, sample_limit=group[0]["sample_limit"]).order_by("-pk")
        for seed in list(dict.fromkeys(earlier.values_list("seed", flat=True)[: 5 * SEED_CANDIDATES]))[:SEED_CANDIDATES]:
            keyed[name, seed] = [cell_key(Eval(**{**plan, "seed": seed})) for plan in group]
    if not keyed:
        return []
    every_key = [key for keys in keyed.values() for key in keys]
    latest = _latest(project, every_key, cache)
    drawn = latest if cache == CacheMode.ALWAYS else _latest(project, every_key, CacheMode.ALWAYS)
    notes = []
    for name, group in groups.items():
        # The most cells reused; between equals, the most cells paired, then the newest draw.
        ranked = [
            (sum(k in latest for k in keys), sum(k in drawn for k in keys), max((drawn[k] for k in keys if k in drawn), default=0), seed)
            for (n, seed), keys in keyed.items()
            if n == name
        ]
        hits, paired, newest, seed = max(ranked, default=(0, 0, 0, None))
        if paired:
            for plan in group:
                plan["seed"] = seed
            done = "whose finished cells this run reuses" if hits else "so the cells asked again pair with it row for row"
            notes.append(f"{name}: drawn on the rows of eval #{newest}, {done}.")
    return notes


def _latest(project, keys: list[str], cache: str) -> dict[str, int]:
    """{key: the newest finished cell with it}, one query whatever the number of cells having each key."""
    found = finished_cells(project, cache).filter(cell_key__in=set(keys)).values("cell_key").annotate(latest=Max("pk"))
    return {row["cell_key"]: row["latest"] for row in found}


def new_eval(cell: Cell, **fields) -> Eval:
    """The cell's eval: pending, to run; or, with a source, already succeeded on the source's counters at no cost."""
    if cell.source is None:
        return Eval(**{**cell.plan, **fields, "cell_key": cell.key, "status": Eval.Status.PENDING})
    source, now = cell.source, timezone.now()
    origin = source.reused_from_id or source.pk  # the eval that asked the deployment, not a copy of it
    priced = cell.plan["deployment"].is_priced or (cell.plan["judge"] is not None and cell.plan["judge"].is_priced)
    return Eval(
        **{**cell.plan, **fields},
        cell_key=cell.key,
        status=Eval.Status.SUCCEEDED,
        status_message=f"Reused from eval #{origin}: its {source.total:,} rows were copied; nothing was asked, nothing spent.",
        reused_from_id=origin,
        total=source.total,
        done_count=source.done_count,
        error_count=0,
        score=source.score,
        score_low=source.score_low,
        score_high=source.score_high,
        pass_at_k=source.pass_at_k,
        # A copy of one draw is that draw: `auto` never reuses it either.
        sampled=source.sampled,
        # Its tokens stay 0: they were paid by the eval it copies. $0 where a price would have counted them.
        cost=Decimal(0) if priced else None,
        started_at=now,
        finished_at=now,
    )


def copy_samples(ev: Eval, source: Eval) -> bool:
    """The source's rows as `ev`'s, in one INSERT ... SELECT (no row passes through Python); False when some were
    missing (the source deleted since it was found), and the caller's transaction must not commit.

    Every column is copied but the eval, the time stored, and the tokens, which this eval did not spend
    (refresh_counters would otherwise count them as its own).
    """
    quote = connection.ops.quote_name
    table = quote(Sample._meta.db_table)
    fresh = {"eval_id": ("%s", ev.pk), "created_at": ("%s", timezone.now()), "cache_hits": ("0", None), **{name: ("NULL", None) for name in UNSPENT}}
    columns, values, params = [], [], []
    for f in Sample._meta.concrete_fields:
        if f.primary_key:
            continue
        columns.append(quote(f.column))
        value, param = fresh.get(f.column, (quote(f.column), None))
        values.append(value)
        if value == "%s":
            params.append(param)
    sql = f"INSERT INTO {table} ({', '.join(columns)}) SELECT {', '.join(values)} FROM {table} WHERE {quote('eval_id')} = %s"
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, source.pk])
        return cursor.rowcount == source.total


def restamp(eval_id: int):
    """A cell that just finished keyed again with what its deployment says it serves now that it answered.

    Its key was made before it ran, from what was last seen; its pass asked `/models` and read the answers'
    system_fingerprint, which the next run's key is made from. Without this its first repeat never matched.
    """
    ev = Eval.objects.select_related("deployment", "judge").exclude(cell_key="").filter(pk=eval_id, status=Eval.Status.SUCCEEDED).first()
    if ev is not None:
        Eval.objects.filter(pk=eval_id).update(cell_key=cell_key(ev))
