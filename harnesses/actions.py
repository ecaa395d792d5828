from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django_q.tasks import async_task

from belvedir.core.masks import unmasked
from belvedir.core.models import ApiKey
from belvedir.sandbox import egress
from belvedir.sandbox.errors import ProjectAtLimit
from belvedir.sandbox.models import ComputeType
from belvedir.sandbox.scheduler import check_gpu_available
from billing import workloads
from billing.actions import debt_gate, refuse_if_in_debt

from .models import HarnessEnvVar, Run


@transaction.atomic
def save_harness(harness, env_vars: list[dict] | None = None):
    """Save a harness and, unless None, replace its variables: what the New/Edit pages and the API both do.

    A variable's value of MASK keeps the secret stored under its name, whether
    or not it stays secret (un-ticking "secret" must not turn the mask into the
    value); MASK for anything else raises MaskWithoutSecret, and nothing is saved.
    """
    secrets = {v.name: v.value for v in harness.env_vars.all() if v.secret} if harness.pk else {}
    harness.save()
    if env_vars is not None:
        rows = [
            HarnessEnvVar(harness=harness, name=v["name"], secret=v["secret"], value=unmasked(v["value"], secrets.get(v["name"]), v["name"])) for v in env_vars
        ]
        harness.env_vars.all().delete()
        HarnessEnvVar.objects.bulk_create(rows)
    return harness


@debt_gate("a harness run: its price on the ledger and its sandbox")
def start_run(harness, user, *, env_for=None) -> Run:
    """Charge the run's price, then queue it once the charge is committed.

    A GPU run first checks that such a GPU is free: with none, NoCapacity is
    raised before anything is charged. InsufficientBalance propagates and
    nothing is queued: the run row is rolled back with the failed charge.
    `env_for(run)` may return (env, secret_env) for the run, e.g. a signed
    URL that names the run.
    """
    # First, and not left to the charge: a run priced at nothing (RUN_PRICE_*_CENTS=0) still takes a sandbox
    # and its deployment's tokens, and a charge of 0 passes a balance below zero.
    refuse_if_in_debt(harness.project)
    if harness.compute_type == ComputeType.GPU:
        check_gpu_available(harness.gpu_type)
    with transaction.atomic():
        harness.project.lock()
        active = Run.objects.filter(project=harness.project, status__in=Run.ACTIVE).count()
        if active >= settings.PROJECT_MAX_ACTIVE_RUNS:
            raise ProjectAtLimit(f"This project already has {active} runs queued or running, its limit; start this one when one ends. Nothing was charged.")
        run = Run.objects.create(
            project=harness.project,
            harness=harness,
            compute_type=harness.compute_type,
            price_cents=harness.price_cents,
            created_by=user,
        )
        if env_for:
            run.extra_env, run.secret_env = env_for(run)
            run.save(update_fields=["extra_env", "secret_env"])
        workloads.charge(RUNS, run, run.price_cents, memo=f"Run #{run.pk} ({run.compute_type.upper()})", user=run.created_by)
        transaction.on_commit(lambda: enqueue_run(run))
    return run


def enqueue_run(run: Run):
    # Paid runs have their own queue (the default cluster): evals never wait ahead of them.
    async_task("harnesses.tasks.execute_run", run.pk, task_name=f"run-{run.pk}", cluster=settings.RUN_QUEUE)


MAX_REPEATS = 20


def start_runs(harness, user, repeats: int) -> list[Run]:
    """`repeats` runs at once, each charged as a normal run; all or none, so a short balance starts none."""
    if not 1 <= repeats <= MAX_REPEATS:
        raise ValueError(f"repeats must be between 1 and {MAX_REPEATS}.")
    with transaction.atomic():
        # Each start_run is a savepoint inside this transaction; their enqueues wait for its commit.
        return [start_run(harness, user) for _ in range(repeats)]


def finish_run(run: Run, status: str, *, refund_reason: str = "", from_statuses=Run.ACTIVE, **fields) -> bool:
    """Move an active run to its final status, once, with all that ends with it: its key and egress grant revoked and,
    when `refund_reason` says the platform failed it, its charge given back, in one transaction (billing.workloads).

    Nothing here talks to Docker: the worker's monitor or the reaper stops the sandbox once the end is committed."""
    return workloads.end(RUNS, run, status, refund_reason=refund_reason, from_statuses=from_statuses, **fields)


def revoke_run_credentials(run: Run):
    """However the run ended (worker, cancel, reaper), its API key and egress grant die with it.

    The key is read from the row, not the caller's copy: a worker may have
    issued it after the caller loaded the run. Repeating it is harmless,
    which the worker does at its end for a key issued after a cancel.
    """
    key_id = Run.objects.filter(pk=run.pk).values_list("api_key_id", flat=True).first()
    if key_id:
        ApiKey.objects.get(pk=key_id).revoke()
    egress.revoke_grant(run.owner)


def cancel_run(run: Run) -> bool:
    """Cancel: a queued run is refunded (nothing ran); a started one is charged, and its worker's monitor kills the
    sandbox within seconds."""
    return workloads.cancel(RUNS, run, "Cancelled by a user.")


RUNS = workloads.PaidKind(
    name="run",
    model=Run,
    waiting=(Run.Status.QUEUED,),
    running=Run.IN_SANDBOX,
    errored=Run.Status.ERROR,
    cancelled=Run.Status.CANCELLED,
    message_field="status_message",
    faulted=Q(status__in=(Run.Status.ERROR, Run.Status.LAUNCH_FAILED)),
    project=lambda run: run.project,
    # A worker heartbeats its run (execution.py): one silent past HARNESS_STALE_SECONDS has died.
    stale=lambda: Run.objects.filter(heartbeat_at__lt=timezone.now() - timedelta(seconds=settings.HARNESS_STALE_SECONDS)),
    revoke=lambda run: revoke_run_credentials(run),
)
