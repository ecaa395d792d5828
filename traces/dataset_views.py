"""Pages that add traces to datasets: one session's "Add to dataset" (its row previewed, the answer editable before
saving) and the session list's "add these sessions" (one version for all of them, or none)."""

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from belvedir.core.scoping import get_scoped_or_404
from evals.datasets.rows import DatasetError

from .dataset_forms import SessionRowForm, ToDatasetForm
from .models import TraceSession
from .to_datasets import FIRST_USER_MESSAGE, MAX_SESSIONS, Source, add_to_dataset, row_from


@login_required
def session_to_dataset(request, session_id):
    """GET: the row this session (its task, its step) makes, previewed; POST: saved, with the expected output as edited."""
    session = get_scoped_or_404(request, TraceSession.objects.for_user(request.user, request.project), session_id=session_id)
    data = request.POST.copy() if request.method == "POST" else request.GET.copy()
    data.setdefault("input", FIRST_USER_MESSAGE)
    form = SessionRowForm(data, request=request, session=session)
    row, problem = None, ""
    if form.is_valid():
        try:
            row = row_from(form.source(session))
        except DatasetError as exc:
            problem = str(exc)
    else:
        problem = "; ".join(error for errors in form.errors.values() for error in errors)
    if request.method == "POST" and row is not None:
        try:
            version = add_to_dataset(
                request.project,
                request.user,
                [form.source(session)],
                dataset=form.cleaned_data["dataset"],
                new_name=form.cleaned_data["new_name"],
                expected=form.cleaned_data["expected"],
            )
        except DatasetError as exc:
            problem = str(exc)
        else:
            messages.success(request, f"Row added to {version.dataset.name}: its version {version.number}.")
            return redirect(version.dataset)
    if request.method == "GET" and row is not None:
        # The answer as found, for the person to edit before saving.
        form = SessionRowForm(initial={**data.dict(), "expected": row["expected"]}, request=request, session=session)
    shown = json.dumps(row["input"], indent=2, ensure_ascii=False) if row and isinstance(row["input"], list) else (row or {}).get("input", "")
    context = {"session": session, "form": form, "row": row, "shown_input": shown, "problem": problem}
    return render(request, "traces/to_dataset.html", context)


@login_required
@require_POST
def sessions_to_dataset(request):
    """The sessions the list showed (their ids, posted), as rows of one new version of a dataset; or none and why."""
    back = request.POST.get("next", "")
    # A path of this site only: redirect() would take anything else without a slash for a view's name.
    back = back if back.startswith("/") and url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}) else ""
    ids = request.POST.getlist("session")[: MAX_SESSIONS + 1]
    sessions = list(TraceSession.objects.for_user(request.user, request.project).filter(session_id__in=ids).order_by("-last_span_at", "-pk"))
    form = ToDatasetForm(request.POST, request=request)
    if not form.is_valid():
        messages.error(request, "Not added: " + "; ".join(error for errors in form.errors.values() for error in errors))
        return redirect(back or "traces:sessions")
    try:
        version = add_to_dataset(
            request.project,
            request.user,
            [Source(session=s, input=form.cleaned_data["input"]) for s in sessions],
            dataset=form.cleaned_data["dataset"],
            new_name=form.cleaned_data["new_name"],
        )
    except DatasetError as exc:
        messages.error(request, f"Not added: {exc}")
        return redirect(back or "traces:sessions")
    messages.success(request, f"{version.added} rows added to {version.dataset.name}, as its version {version.number}.")
    return redirect(f"{version.dataset.get_absolute_url()}?diff={version.number}" if version.number > 1 else version.dataset.get_absolute_url())
