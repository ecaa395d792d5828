from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django_q.tasks import async_task

from belvedir.core.masks import unmasked
from belvedir.core.models import ApiKey
from belvedir.sandbox import egress
from belvedir.sandbox.errors import ProjectAtLimit
from belvedir.sandbox.models import ComputeType
from belvedir.sandbox.scheduler import check_gpu_available
from billing.actions import charge_for_run, debt_gate, refund_run, refuse_if_in_debt

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
        charge_for_run(run)
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
    """Move an active run to its final status, once, with all that ends with it.

    One transaction: the final status, the revocation of its API key and
    egress grant, and the refund when asked commit together or not at all,
    so a crash between them never leaves a run ended but unrefunded or its
    key alive. Nothing here talks to Docker: the worker's monitor or the
    reaper stops the sandbox once the end is committed.

    The conditional update is what settles races between the worker, a
    cancel and the reaper: whoever ends the run first wins, the rest no-op.
    """
    with transaction.atomic():
        ended = Run.objects.filter(pk=run.pk, status__in=from_statuses).update(status=status, finished_at=timezone.now(), **fields)
        if ended:
            revoke_run_credentials(run)
            if refund_reason:
                refund_run(run, refund_reason)
    run.refresh_from_db()
    return bool(ended)


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
    """Cancel without refund; the worker's monitor kills the sandbox within seconds."""
    return finish_run(run, Run.Status.CANCELLED, status_message="Cancelled by a user.")


def end_runs_on_lost_host(run_ids: list[str], host) -> int:
    """A health check found the runs' engine silent: end them `error`, refunded (the platform's fault).

    Registered with belvedir.sandbox.health. The worker of each run, if it
    still lives, sees the run ended and stops; whoever ends it first wins.
    """
    ended = 0
    for run in Run.objects.filter(pk__in=[i for i in run_ids if i.isdigit()], status__in=Run.IN_SANDBOX):
        ended += finish_run(
            run,
            Run.Status.ERROR,
            status_message="The sandbox host running this run stopped answering; the run was refunded.",
            refund_reason="sandbox host lost",
            from_statuses=Run.IN_SANDBOX,
        )
    return ended
