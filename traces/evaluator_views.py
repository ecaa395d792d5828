"""Evaluator pages: the list and the form that makes one, an evaluator's scores over time, its backfill and its verdicts to label."""

from datetime import date

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from belvedir.core.charts import Series, line_chart
from belvedir.core.listing import listing
from belvedir.core.scoping import get_scoped_or_404
from billing.errors import InsufficientBalance
from evals.models import Deployment
from evals.scoring.base import config
from evals.scoring.calibration import posted_grade
from evals.scoring.judge import SCALES, WITHOUT_REFERENCE
from evals.scoring.scorers import SCORERS

from .evaluator_rules import daily, label_score, save_evaluator, summaries, summary
from .evaluators import EvaluatorError, backfill_estimate, start_backfill
from .filters import EvaluatorFilter
from .models import JUDGE_SCORER, Evaluator, EvaluatorScore, TaskGroup
from .training import BadFilter, parse_bound

# The form's families of scorers: a code check (which one: `check`), the LLM judge, the trajectory check.
KINDS = [
    ("code", "Code (exact, contains, regex, JSON-valid, last number)"),
    ("judge", "LLM judge"),
    ("trajectory", "Trajectory check (steps, tool errors, cost)"),
]
LIMITS = ("max_steps", "max_tool_errors", "max_cost")


class EvaluatorForm(forms.Form):
    name = forms.CharField(max_length=100)
    enabled = forms.BooleanField(required=False, initial=True)
    target = forms.ChoiceField(choices=Evaluator.Target.choices, help_text="Score each session, or each of its tasks.")
    task_group = forms.ModelChoiceField(queryset=TaskGroup.objects.none(), required=False, help_text="Only this task group's sessions or tasks.")
    user_id = forms.CharField(required=False, label="User", help_text="Only this user's sessions.")
    metadata = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 2}), help_text="key=value, one a line: the session's metadata must hold each."
    )
    outcome = forms.ChoiceField(choices=[("", "Any"), ("success", "success"), ("fail", "fail"), ("none", "none reported")], required=False)
    source = forms.ChoiceField(choices=Evaluator.Source.choices)
    harness = forms.ModelChoiceField(queryset=Evaluator.harnesses_of(None).none(), required=False, help_text="Only this harness's runs.")
    sample_rate = forms.FloatField(min_value=0, max_value=1, initial=1.0, help_text="The share scored: 0.1 scores a fixed tenth (the same for the same seed).")
    kind = forms.ChoiceField(choices=KINDS, label="Scorer")
    check = forms.ChoiceField(
        choices=[(name, name) for name, scorer in SCORERS.items() if not scorer.needs_judge],
        required=False,
        help_text="Code: what the answer must pass.",
    )
    expected = forms.CharField(required=False, help_text="Code: the text (or number) expected.")
    pattern = forms.CharField(required=False, help_text="Code, regex: the pattern the answer must match (stopped after its time limit).")
    judge = forms.ModelChoiceField(queryset=Deployment.objects.none(), required=False, help_text="LLM judge: the deployment that grades.")
    prompt = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 4}), initial=WITHOUT_REFERENCE, help_text="LLM judge: {input} and {output} are filled in."
    )
    scale = forms.ChoiceField(choices=[(s, s) for s in SCALES], required=False, help_text="LLM judge: PASS/FAIL, or a 1-10 rating as [[n]].")
    daily_budget = forms.DecimalField(
        required=False, min_value=0, decimal_places=4, label="Daily budget ($)", help_text="LLM judge: its spend stops here each day."
    )
    max_steps = forms.IntegerField(required=False, min_value=0, help_text="Trajectory: at most this many steps.")
    max_tool_errors = forms.IntegerField(required=False, min_value=0, help_text="Trajectory: at most this many failed tool calls.")
    max_cost = forms.DecimalField(required=False, min_value=0, help_text="Trajectory: at most this cost ($).")

    def __init__(self, *args, project=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["task_group"].queryset = TaskGroup.objects.filter(project=project)
        self.fields["harness"].queryset = Evaluator.harnesses_of(project)
        self.fields["judge"].queryset = Deployment.objects.filter(project=project)

    def data_for_save(self) -> dict:
        data = self.cleaned_data
        metadata = {}
        for line in (data["metadata"] or "").splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip():
                metadata[key.strip()] = value.strip()
        scorer = {
            "code": lambda: config(data["check"], {k: data[k] for k in ("expected", "pattern") if data[k] and k in SCORERS[data["check"]].options}),
            "judge": lambda: config(JUDGE_SCORER, {"prompt": data["prompt"], "scale": data["scale"] or "pass_fail"}),
            "trajectory": lambda: config("trajectory", {k: float(data[k]) if k == "max_cost" else data[k] for k in LIMITS if data[k] is not None}),
        }[data["kind"]]()
        return {
            **{
                k: data[k]
                for k in ("name", "enabled", "target", "task_group", "user_id", "outcome", "source", "harness", "sample_rate", "judge", "daily_budget")
            },
            "metadata": metadata,
            "scorer": scorer,
        }

    @classmethod
    def initial_of(cls, evaluator: Evaluator) -> dict:
        fields = ("name", "enabled", "target", "task_group", "user_id", "outcome", "source", "harness", "sample_rate", "judge", "daily_budget")
        name, options = evaluator.scorer["name"], evaluator.scorer["options"]
        kind = "judge" if evaluator.needs_judge else "trajectory" if name == "trajectory" else "code"
        return {
            **{f: getattr(evaluator, f) for f in fields},
            **options,
            "kind": kind,
            **({"check": name} if kind == "code" else {}),
            "metadata": "\n".join(f"{k}={v}" for k, v in evaluator.metadata.items()),
        }


@login_required
def evaluators(request):
    form = EvaluatorForm(request.POST or None, project=request.project)
    status = 200
    if request.method == "POST" and form.is_valid():
        try:
            evaluator = save_evaluator(request.project, request.user, form.data_for_save())
        except (EvaluatorError, InsufficientBalance) as exc:
            form.add_error(None, str(exc))
            status = _refused_status(exc)
        else:
            messages.success(request, f"Evaluator {evaluator.name} scores sessions that begin from now on; backfill older ones from its page.")
            return redirect(evaluator)
    listed = Evaluator.objects.for_user(request.user, request.project).select_related("judge", "task_group").order_by("-created_at", "-pk")
    shown = listing(request, EvaluatorFilter, listed)
    found = summaries(shown["page"])
    rows = [(evaluator, found[evaluator.pk]) for evaluator in shown["page"]]
    return render(request, "traces/evaluators.html", {"form": form, "rows": rows, **shown}, status=status)


def _refused_status(exc) -> int:
    # A form the user can fix answers 200 with its errors; a debt is a 402, as for runs and evals.
    return exc.status_code if isinstance(exc, InsufficientBalance) else 200


@login_required
def evaluator_detail(request, pk):
    evaluator = get_scoped_or_404(request, Evaluator.objects.for_user(request.user, request.project).select_related("judge", "task_group"), pk=pk)
    form = EvaluatorForm(request.POST or None, project=request.project, initial=EvaluatorForm.initial_of(evaluator))
    status = 200
    if request.method == "POST" and form.is_valid():
        try:
            before = evaluator.version
            save_evaluator(request.project, request.user, form.data_for_save(), evaluator)
        except (EvaluatorError, InsufficientBalance) as exc:
            form.add_error(None, str(exc))
            status = _refused_status(exc)
            evaluator.refresh_from_db()
        else:
            changed = evaluator.version != before
            messages.success(request, f"Saved{f' as version {evaluator.version}: its rule changed, older scores keep theirs' if changed else ''}.")
            return redirect(evaluator)
    series = daily(evaluator)
    charts = [
        (
            group,
            line_chart(
                [
                    Series(
                        group, [(date.fromisoformat(p["day"]), p["mean"]) for p in points], intervals=[tuple(p["ci"] or (p["mean"], p["mean"])) for p in points]
                    )
                ],
                y_label="daily mean score",
            ),
        )
        for group, points in series.items()
    ]
    scores = evaluator.scores.filter(version=evaluator.version).select_related("session", "task").prefetch_related("labels")[:50]
    context = {
        "evaluator": evaluator,
        "form": form,
        "summary": summary(evaluator),
        "charts": charts,
        "scores": scores,
        "backfill": backfill_context(request, evaluator),
    }
    return render(request, "traces/evaluator.html", context, status=status)


def backfill_context(request, evaluator) -> dict:
    """The backfill form's state: a window typed in (GET), and its estimate, which the confirm button then starts."""
    if "since" not in request.GET:
        return {}
    try:
        since, until = parse_bound(request.GET.get("since"), end=False), parse_bound(request.GET.get("until"), end=True)
        if since is None or until is None:
            raise EvaluatorError("Give the window's start and end.")
        estimate = backfill_estimate(evaluator, since, until)
    except (BadFilter, EvaluatorError) as exc:
        return {"error": str(exc), "since": request.GET.get("since"), "until": request.GET.get("until")}
    return {"estimate": estimate, "since": request.GET["since"], "until": request.GET.get("until", "")}


@login_required
@require_POST
def evaluator_backfill(request, pk):
    evaluator = get_scoped_or_404(request, Evaluator.objects.for_user(request.user, request.project).select_related("judge"), pk=pk)
    try:
        since, until = parse_bound(request.POST.get("since"), end=False), parse_bound(request.POST.get("until"), end=True)
        if since is None or until is None:
            raise EvaluatorError("Give the window's start and end.")
        estimate = start_backfill(evaluator, since, until)
    except (BadFilter, EvaluatorError, InsufficientBalance) as exc:
        messages.error(request, f"No backfill: {exc}")
    else:
        messages.success(request, f"Backfill started: {estimate['to_score']} to score in {estimate['sessions']} sessions.")
    return redirect(evaluator)


@login_required
@require_POST
def evaluator_label(request, pk):
    evaluator = get_scoped_or_404(request, Evaluator.objects.for_user(request.user, request.project), pk=pk)
    score_id = request.POST.get("score", "")
    score = get_object_or_404(EvaluatorScore.objects.filter(evaluator=evaluator), pk=int(score_id) if score_id.isdecimal() else 0)
    try:
        label_score(score, request.user, **posted_grade(request.POST))
    except (EvaluatorError, ValueError, KeyError) as exc:
        messages.error(request, f"Not labelled: {exc}")
    else:
        messages.success(request, "Labelled: it counts on the judge's calibration card.")
    return redirect(f"{evaluator.get_absolute_url()}#score-{score.pk}")
