"""What the home page shows: a project at a glance, in a fixed number of queries.

Every query is bounded by an index or a small LIMIT, so the page costs the
same at ten runs as at 10,000 runs and a million spans: runs and sessions
through their (project, -time) indexes, ledger entries through created_at.
"""

from dataclasses import dataclass
from datetime import timedelta

from django.db.models import Count, F, Q, Subquery, Sum, Window
from django.db.models.functions import RowNumber, TruncDate
from django.urls import reverse
from django.utils import timezone

from belvedir.core.charts import Series, line_chart
from belvedir.core.models import Project
from billing.models import Account, LedgerEntry
from evals import local_model
from evals.models import Eval
from harnesses.models import Harness, Run
from traces.models import EvaluatorScore, TraceSession

LATEST_RUNS = 8
SPEND_DAYS = 30
LATEST_SCORES = 12
SPEND_KINDS = (LedgerEntry.Kind.RUN_CHARGE, LedgerEntry.Kind.REFUND)
FUNDING_KINDS = (LedgerEntry.Kind.COUPON, LedgerEntry.Kind.TOPUP, LedgerEntry.Kind.ADJUSTMENT)
CHECKLIST_BENCHMARK, CHECKLIST_ROWS = "gsm8k", 20


@dataclass
class Step:
    label: str
    url: str
    done: bool
    owner_only: bool = False


def running_evals(project):
    return list(Eval.objects.filter(project=project, status__in=Eval.ACTIVE).select_related("deployment", "dataset").order_by("-pk")[:10])


def latest_scores(project):
    """The newest finished eval per (benchmark or dataset, deployment): its score, or its failure when the newest
    failed (an older score would say the deployment still scores so, when it no longer answers)."""
    pair = [F("benchmark"), F("dataset_id"), F("deployment_id")]
    evals = (
        Eval.objects.filter(Q(status=Eval.Status.SUCCEEDED, score__isnull=False) | Q(status__in=[Eval.Status.FAILED, Eval.Status.ERROR]), project=project)
        .select_related("deployment", "dataset")
        # A window, not PostgreSQL's DISTINCT ON: `make run` serves from SQLite, where DISTINCT ON is refused (the home page was a 500).
        .annotate(newest=Window(RowNumber(), partition_by=pair, order_by=[F("finished_at").desc(), F("pk").desc()]))
        .filter(newest=1)
        .order_by(*pair)
    )
    return sorted(evals[:LATEST_SCORES], key=lambda e: (e.label, e.deployment.name))


def spend(account, now):
    """Spend this month and per day over the last 30 days, in cents (a refund lowers it)."""
    since = (now - timedelta(days=SPEND_DAYS - 1)).replace(hour=0, minute=0, second=0, microsecond=0)
    month_start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    entries = LedgerEntry.objects.filter(account=account, kind__in=SPEND_KINDS, created_at__gte=min(since, month_start))
    by_day = dict(
        entries.filter(created_at__gte=since)
        .annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(total=Sum("amount_cents"))
        .values_list("day", "total")
    )
    month = entries.filter(created_at__gte=month_start).aggregate(total=Sum("amount_cents"))["total"] or 0
    days = [since.date() + timedelta(days=i) for i in range(SPEND_DAYS)]
    return -month, [(d, -(by_day.get(d) or 0)) for d in days]


def spend_chart(per_day):
    if not any(cents for _, cents in per_day):
        return None
    points = [(day, cents / 100) for day, cents in per_day]
    return line_chart([Series("Spend", points)], y_label="spend (USD)")


def model_spend(project, now) -> dict:
    """This month's token cost at the project's deployments' prices: its evals (with their judges) and its evaluators' judges.

    Paid to whoever serves the deployments, not charged here: shown beside the balance, never posted to the ledger.
    """
    month_start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)

    def month_total(model, since_field):
        rows = model.objects.filter(project=project, **{f"{since_field}__gte": month_start}).order_by().values("project").annotate(s=Sum("cost"))
        return Subquery(rows.values("s")[:1])

    # One query for both tables: the home page's query count stays fixed (tests/test_home.py).
    spent = Project.objects.filter(pk=project.pk).annotate(eval_spend=month_total(Eval, "created_at"), evaluator_spend=month_total(EvaluatorScore, "scored_at"))
    evals, evaluators = spent.values_list("eval_spend", "evaluator_spend").get()
    return {"evals": evals, "evaluators": evaluators, "total": (evals or 0) + (evaluators or 0)}


def traces_today(project, now):
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    counts = TraceSession.objects.filter(project=project, last_span_at__gte=today).aggregate(
        total=Count("pk"), judged=Count("pk", filter=~Q(outcome="")), failed=Count("pk", filter=Q(outcome="fail"))
    )
    counts["fail_share"] = counts["failed"] / counts["judged"] if counts["judged"] else None
    return counts


def checklist(project, account, has_deployment: bool):
    """The three first steps of a new project; a done step drops out, and the list with the last one."""
    funded = account.balance_cents > 0 or LedgerEntry.objects.filter(account=account, kind__in=FUNDING_KINDS).exists()
    steps = [
        Step("Redeem a coupon or add funds", reverse("billing:balance"), funded, owner_only=True),
        Step("Create a harness from a preset", reverse("harnesses:new"), Harness.objects.filter(project=project, preset__isnull=False).exists()),
        Step(
            f"Add a deployment and run {CHECKLIST_BENCHMARK} on {CHECKLIST_ROWS} rows",
            reverse("evals:deployments")
            if not has_deployment
            else f"{reverse('evals:create_benchmark')}?benchmark={CHECKLIST_BENCHMARK}&sample_limit={CHECKLIST_ROWS}",
            Eval.objects.filter(project=project, benchmark=CHECKLIST_BENCHMARK).exists(),
        ),
    ]
    return [s for s in steps if not s.done]


def overview(project, now=None) -> dict:
    now = timezone.localtime(now or timezone.now())
    account = Account.for_project(project)
    month, per_day = spend(account, now)
    # One query for the checklist and the local model's button both.
    deployments = local_model.deployment_names(project)
    return {
        "account": account,
        "spend_month_cents": month,
        "spend_chart": spend_chart(per_day),
        "latest_runs": list(Run.objects.filter(project=project).select_related("harness").order_by("-created_at", "-pk")[:LATEST_RUNS]),
        "running_evals": running_evals(project),
        "latest_scores": latest_scores(project),
        "traces_today": traces_today(project, now),
        "model_spend": model_spend(project, now),
        "checklist": checklist(project, account, has_deployment=bool(deployments)),
        "local_model_offer": local_model.offer(project, deployments),
    }
