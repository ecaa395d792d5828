from collections import defaultdict

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import FileResponse, HttpResponseForbidden
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from belvedir.core.charts import Series, line_chart
from belvedir.core.scoping import get_scoped_or_404
from belvedir.sandbox.errors import NoCapacity
from billing.errors import InsufficientBalance
from harnesses.models import Run

from . import formats
from .actions import harness_kind, run_benchmark, upload_model
from .forms import ModelUploadForm, RunBenchmarkForm
from .models import FineTunedModel
from .signing import verify


@login_required
def model_list(request):
    form = ModelUploadForm(request.POST or None, request.FILES or None, project=request.project)
    if request.method == "POST" and form.is_valid():
        model = upload_model(form, request.project, request.user)
        messages.success(request, f"Model {model.name} uploaded.")
        return redirect(model)
    models = FineTunedModel.objects.for_user(request.user, request.project)
    return render(request, "finetunes/list.html", {"models": models, "form": form, "local_base": formats.LOCAL_BASES[-1]})


def benchmarks_chart(runs):
    by_harness = defaultdict(list)
    for run in sorted(runs, key=lambda r: r.created_at):
        by_harness[run.harness.name].append(run)
    return line_chart([Series(name, [(r.created_at, r.score) for r in done], labels=[f"#{r.pk}" for r in done]) for name, done in by_harness.items()])


@login_required
def model_detail(request, pk):
    model = get_scoped_or_404(request, FineTunedModel.objects.for_user(request.user, request.project), pk=pk)
    runs = list(model.benchmark_runs()[:200])
    form = RunBenchmarkForm(model=model)
    return render(request, "finetunes/detail.html", {"model": model, "runs": runs, "chart": benchmarks_chart(runs), "form": form})


@login_required
@require_POST
def model_run(request, pk):
    model = get_scoped_or_404(request, FineTunedModel.objects.for_user(request.user, request.project), pk=pk)
    form = RunBenchmarkForm(request.POST, model=model)
    if not form.is_valid():
        messages.error(request, f"Choose a {harness_kind(model)} of this project.")
        return redirect(model)
    try:
        run = run_benchmark(model, form.cleaned_data["harness"], request.user)
    except (InsufficientBalance, NoCapacity) as exc:
        messages.error(request, f"{exc} Nothing was charged." if isinstance(exc, NoCapacity) else str(exc))
        return redirect(model)
    return redirect(run)


@require_GET
def adapter_download(request, pk, run_id, token):
    """The adapter zip, for a sandbox holding a valid signed URL; 403 otherwise."""
    if not verify(pk, run_id, token):
        return HttpResponseForbidden("This download link is invalid or has expired.")
    model = FineTunedModel.objects.filter(pk=pk).first()
    if model is None or not Run.objects.filter(pk=run_id, project=model.project_id).exists():
        return HttpResponseForbidden("This download link is invalid or has expired.")
    # FileResponse streams the file in blocks: a multi-GB adapter never sits in memory.
    return FileResponse(model.adapter.open("rb"), as_attachment=True, filename=f"{model.name}-adapter.zip")
