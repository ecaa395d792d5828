"""A model agent's own trace key: what puts a trial's spans in Traces, as the trial's session.

A trial whose agent calls a model gets an ingest key of its own when its phase starts, as a harness run does
(traces/run_keys.py, which this app tells about trials in its AppConfig.ready()). The key writes only the session
`trial-<id>`, which is linked to the trial; the trace workers mask in what it sends the key itself and the
deployment's API key; and it dies with the trial however the trial ends (its worker, the reaper), after which it
writes nothing even unrevoked: only a running trial's key names a session.
"""

from belvedir.core.models import ApiKey
from belvedir.redaction import Redactor
from traces import run_keys
from traces.models import TraceSession

from .models import TRACE_SESSION_PREFIX, Trial

KIND = "trial"
KEY_ENV = "BELVEDIR_API_KEY"


def issue(trial: Trial) -> tuple[dict[str, str], str] | None:
    """The agent's environment for its new key (the platform's URL, the key, its session) and the raw key; None when
    the job's creator is gone (a key is a user's), and the agent then runs untraced (its trajectory file still counts)."""
    user = trial.job.created_by if trial.job_id else None
    if user is None:
        return None
    project = trial.task.version.task_set.project
    key, raw = ApiKey.issue(project=project, user=user, name=f"trial #{trial.pk}", scope=ApiKey.Scope.INGEST, per_run=True)
    Trial.objects.filter(pk=trial.pk).update(api_key=key, secret_env={KEY_ENV: raw})
    return run_keys.workload_env(raw, trial.trace_session_id), raw


def revoke(trial: Trial):
    """The trial's key revoked, read from its row (the caller's copy may predate the key); repeating it is harmless."""
    if key_id := Trial.objects.filter(pk=trial.pk).values_list("api_key_id", flat=True).first():
        ApiKey.objects.get(pk=key_id).revoke()


def trace_session(trial: Trial):
    """The session its key's spans made in Traces, None before any arrived (or for an agent given no key)."""
    return TraceSession.objects.filter(trial=trial).first()


def redact_rows(trial_id: int, rows: list[dict], source: bytes | None = None) -> list[dict]:
    """A trial key's batch of span rows with the trial's secrets masked: its key and its deployment's API key."""
    found = Trial.objects.filter(pk=trial_id).values_list("secret_env", "deployment__api_key").first()
    if found is None:
        return rows
    secret_env, deployment_key = found
    return Redactor([*secret_env.values(), deployment_key or ""]).values(rows, source)


def register():
    run_keys.register(
        KIND,
        prefix=TRACE_SESSION_PREFIX,
        of_key=lambda key_id: Trial.objects.filter(api_key_id=key_id, status=Trial.Status.RUNNING).values_list("pk", flat=True).first(),
        among=lambda project_id, ids: Trial.objects.filter(task__version__task_set__project_id=project_id, pk__in=ids).values_list("pk", flat=True),
        redact=redact_rows,
    )
