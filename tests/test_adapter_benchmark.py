"""A fine-tuned model benchmarked on CPU by the platform's own contract, in a real sandbox (gVisor where the engine has it).

The Models page's *Run benchmark* starts a run of the local-model preset's
driver (drivers/local-model/, as its repository holds it). The sandbox gets
the local model and its runtime mounted read-only and the adapter through
ADAPTER_URL (the platform, through the egress proxy), serves base and
adapter side by side and scores both. The adapter is real and built to
answer C (tests/adapters.py); every question's answer is C, so its score
must rise while the base model's stays what it is without any adapter.
"""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from belvedir.localmodel import files
from belvedir.sandbox.models import SandboxHost
from billing.models import Account, LedgerEntry
from finetunes.models import FineTunedModel
from harnesses import drivers
from harnesses.actions import start_run
from harnesses.execution import execute_run
from harnesses.models import Run

from .adapters import letter_adapter, zipped
from .harness_fixtures import fund, harness, make_repo

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]

QUESTIONS = [
    ("Which of these is a colour?", ["Seven", "Tuesday", "Blue", "Paris"]),
    ("Which animal says woof?", ["Cat", "Cow", "Dog", "Fish"]),
    ("What is 2 + 2?", ["3", "5", "4", "22"]),
    ("Which planet is the largest?", ["Mars", "Venus", "Jupiter", "Mercury"]),
    ("What do bees make?", ["Milk", "Silk", "Honey", "Wool"]),
    ("Which is a fruit?", ["Carrot", "Potato", "Apple", "Onion"]),
]
TASKS = "\n".join(json.dumps({"question": q, "choices": c, "answer": "C"}) for q, c in QUESTIONS)


@pytest.fixture
def local_model_harness(settings, egress, tmp_path, project, owner):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.HARNESS_ALLOW_LOCAL_REPOS = True
    # Transactional tests flush the host the migrations made.
    SandboxHost.objects.get_or_create(name="local", defaults={"url": settings.SANDBOX_DOCKER_URL})
    fund(project, 5000)
    source = drivers.SOURCE / "local-model"
    driver = {path.name: path.read_text() for path in source.glob("*") if path.is_file()}
    driver["belvedir_driver.py"] = (drivers.SOURCE / "_shared" / "belvedir_driver.py").read_text()
    make_repo(tmp_path / "repo", driver)
    return harness(project, owner, tmp_path / "repo", name="local model", tasks=TASKS, local_model=True, time_limit_seconds=600)


def finished(run: Run) -> Run:
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "succeeded", (run.status_message, run.log_tail)
    return run


def test_an_adapter_benchmarked_on_cpu_moves_its_score_and_leaves_the_base_as_it_is(local_model_harness, owner_client, owner, settings, tmp_path, api):
    weights = files.model_path(settings.LOCAL_MODEL_DIR)
    adapter = letter_adapter(weights, tmp_path / "answers-c.gguf", "C")
    upload = owner_client.post("/models/", {"name": "smol-c", "base_model": files.MODEL_ID, "adapter": SimpleUploadedFile("smol-c.zip", zipped(adapter))})
    model = FineTunedModel.objects.get(name="smol-c")
    assert upload.status_code == 302 and model.adapter_format == "gguf"

    response = owner_client.post(f"/models/{model.pk}/runs/", {"harness": local_model_harness.pk})
    run = finished(Run.objects.get(harness=local_model_harness))
    assert response.url == run.get_absolute_url()
    # The same harness without an adapter: the base model served alone.
    base_alone = finished(start_run(local_model_harness, owner))

    assert run.model_label == "smol-c" and run.price_cents == local_model_harness.price_cents
    assert [task["reason"].split("; ")[1] for task in run.results["tasks"]] == ["base chose A, adapter chose C"] * len(QUESTIONS)
    assert run.score == 1.0 and run.base_score == base_alone.score == 0.0
    assert base_alone.results["model"] == files.MODEL_ID and "base_score" not in base_alone.results
    # The model's panel: the adapter's score and the base's side by side.
    page = owner_client.get(model.get_absolute_url()).content.decode()
    row = page[page.index(f"#{run.pk}</a>") :].split("</tr>")[0]
    assert "<td>1.0</td><td>0.0</td>" in row
    assert [(b["run"], b["score"], b["base_score"]) for b in api.get(f"/api/v1/models/{model.pk}/benchmarks").json()] == [(run.pk, 1.0, 0.0)]


def test_a_run_whose_local_model_is_not_installed_fails_to_launch_naming_the_fix_and_is_refunded_once(local_model_harness, owner, project, settings, tmp_path):
    settings.LOCAL_MODEL_DIR = tmp_path / "no-models"
    before = Account.balance_for(project)
    run = start_run(local_model_harness, owner)
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "launch_failed" and "run `python manage.py install_local_model`" in run.status_message
    assert Account.balance_for(project) == before
    assert LedgerEntry.objects.filter(kind="refund", reference=f"run:{run.pk}").count() == 1


def test_the_model_and_its_runtime_are_mounted_read_only(local_model_harness, owner):
    local_model_harness.run_command = "grep ' /opt/belvedir/' /proc/mounts; python3 -c 'import os; print(sorted(os.listdir(\"/opt/belvedir/app/localmodel\")))'"
    local_model_harness.save()
    run = start_run(local_model_harness, owner)
    execute_run(run.pk)
    run.refresh_from_db()
    mounts = {
        fields[1]: fields[3].split(",") for line in run.log_tail.splitlines() if len(fields := line.split()) == 6 and fields[1].startswith("/opt/belvedir/")
    }
    assert set(mounts) == {"/opt/belvedir/model/" + files.FILENAME, "/opt/belvedir/python", "/opt/belvedir/app/localmodel"}, (run.status_message, run.log_tail)
    assert all("ro" in options for options in mounts.values()), mounts
    assert "'runtime.py'" in run.log_tail and "'server.py'" in run.log_tail
