"""The Datasets pages: the list with its upload, and one dataset's page: a version's rows, its versions with their
diffs, and the edits that each make a version (a row added, edited or removed; a file appended or in place of the rows)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from belvedir.core.listing import listing
from belvedir.core.scoping import get_scoped_or_404

from ..filters import DatasetFilter
from ..forms import DatasetRowForm, DatasetRowsUploadForm, DatasetUploadForm
from ..models import Dataset, Eval
from .rows import DatasetError, clean_row
from .versions import add_rows, create_dataset, diff, edit_row, remove_rows, rows_at, upload_into, version_of

ROWS_PER_PAGE = 50
# A diff of a whole file replaced can hold 100,000 rows: the page shows this many of each kind, and says how many more.
DIFF_SHOWN = 200


@login_required
def datasets(request):
    form = DatasetUploadForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            dataset = create_dataset(request.project, request.user, form.cleaned_data["name"], upload, filename=upload.name)
        except DatasetError as exc:
            form.add_error("file", str(exc))
        else:
            messages.success(request, f"Dataset {dataset.name} uploaded with {dataset.row_count} rows: its version 1.")
            return redirect(dataset)
    mine = Dataset.objects.for_user(request.user, request.project).order_by("-created_at", "-pk")
    return render(request, "evals/datasets.html", {"form": form, **listing(request, DatasetFilter, mine)})


def _dataset(request, pk) -> Dataset:
    return get_scoped_or_404(request, Dataset.objects.for_user(request.user, request.project), pk=pk)


@login_required
def dataset_detail(request, pk):
    return _page(request, _dataset(request, pk))


def _page(request, dataset, *, row_form=None, upload_form=None, edit_form=None, status=200):
    """The dataset's page at ?version=N (its latest by default), with ?diff=N's changes and ?edit=POSITION's form; forms
    given are shown bound, with what the person typed and why it was refused."""
    try:
        version = version_of(dataset, request.GET.get("version") or dataset.version)
        shown_diff = diff(dataset, int(request.GET["diff"])) if request.GET.get("diff", "").isdecimal() else None
    except DatasetError as exc:
        messages.error(request, str(exc))
        return redirect(dataset)
    latest = version.number == dataset.version
    editing = int(request.GET["edit"]) if latest and request.GET.get("edit", "").isdecimal() else None
    if edit_form is not None:
        editing = edit_form.position
    elif editing is not None and (row := rows_at(dataset).filter(position=editing).first()) is not None:
        edit_form = DatasetRowForm(initial={"input": row.input, "expected": row.expected})
    page = request.GET.get("page")
    if editing is not None and not page:
        # The page that holds the row being edited, so a refused edit shows again with what was typed.
        page = rows_at(dataset).filter(position__lt=editing).count() // ROWS_PER_PAGE + 1
    rows = Paginator(rows_at(dataset, version.number), ROWS_PER_PAGE).get_page(page)
    versions = list(dataset.versions.select_related("created_by")[:200])
    evals_per_version = dict(Eval.objects.filter(dataset=dataset).values_list("dataset_version").annotate(n=Count("pk")))
    for v in versions:
        v.eval_count = evals_per_version.get(v.number, 0)
    context = {
        "dataset": dataset,
        "version": version,
        "latest": latest,
        "rows": rows,
        "versions": versions,
        "diff": shown_diff,
        "diff_shown": DIFF_SHOWN,
        "editing": editing,
        "edit_form": edit_form,
        "row_form": row_form or DatasetRowForm(),
        "upload_form": upload_form or DatasetRowsUploadForm(),
    }
    return render(request, "evals/dataset.html", context, status=status)


@login_required
@require_POST
def dataset_add_row(request, pk):
    dataset = _dataset(request, pk)
    form = DatasetRowForm(request.POST)
    try:
        form.is_valid()
        version = add_rows(dataset, request.user, [clean_row(form.cleaned_data, "The new row")], note="A row added")
    except DatasetError as exc:
        form.add_error(None, str(exc))
        return _page(request, dataset, row_form=form)
    messages.success(request, f"Version {version.number}: a row added.")
    return redirect(dataset)


@login_required
@require_POST
def dataset_edit_row(request, pk, position):
    dataset = _dataset(request, pk)
    form = DatasetRowForm(request.POST)
    form.position = position
    try:
        form.is_valid()
        version = edit_row(dataset, request.user, position, form.cleaned_data)
    except DatasetError as exc:
        form.add_error(None, str(exc))
        return _page(request, dataset, edit_form=form)
    messages.success(request, f"Version {version.number}: row {position} edited; version {version.number - 1} keeps it as it was.")
    return redirect(f"{dataset.get_absolute_url()}?diff={version.number}")


@login_required
@require_POST
def dataset_remove_row(request, pk, position):
    dataset = _dataset(request, pk)
    try:
        version = remove_rows(dataset, request.user, [position])
    except DatasetError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Version {version.number}: row {position} removed; version {version.number - 1} keeps it.")
    return redirect(dataset)


@login_required
@require_POST
def dataset_upload(request, pk):
    dataset = _dataset(request, pk)
    form = DatasetRowsUploadForm(request.POST, request.FILES)
    if not form.is_valid():
        return _page(request, dataset, upload_form=form)
    upload = form.cleaned_data["file"]
    try:
        version = upload_into(dataset, request.user, upload, upload.name, replace=form.cleaned_data["replace"])
    except DatasetError as exc:
        form.add_error("file", str(exc))
        return _page(request, dataset, upload_form=form)
    messages.success(request, f"Version {version.number}: {version.added} added, {version.edited} edited, {version.removed} removed.")
    return redirect(f"{dataset.get_absolute_url()}?diff={version.number}")
