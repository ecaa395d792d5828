"""A model agent's own trace key: what puts a trial's spans in Traces, as the trial's session.

A trial whose agent calls a model gets an ingest key of its own when its phase starts, as a harness run does
(traces/workload_keys.py, which this app tells about trials in its AppConfig.ready()). The key writes only the session
`trial-<id>`, which it links to the trial; the trace workers mask in what it sends every secret the agent was given
(the key, the deployment's API key, its egress token); it reports no outcome (a trial's is its verifier's reward);
and it dies with the trial however the trial ends (its worker, the reaper), after which it
writes nothing even unrevoked: only a running trial's key names a session.
"""

from belvedir.core.models import ApiKey
from belvedir.redaction import Redactor
from traces import workload_keys

from .models import TRACE_SESSION_PREFIX, Trial

KIND = "trial"


def issue(trial: Trial, given: list[str]) -> tuple[dict[str, str], str] | None:
    """A new key for the trial's agent: the environment its tracer reads (the platform's URL, the key, its session)
    and the raw key. `given`: the other secrets the agent gets (the deployment's API key, its egress token), kept
    with the key for the trace workers, which see only the key's hash, to mask in what it sends: exactly what the
    agent was given, even if its deployment changes meanwhile. None when the job's creator is gone (a key is a
    user's): the agent then runs untraced, its trajectory file still its record."""
    user = trial.job.created_by if trial.job_id else None
    if user is None:
        return None
    key, raw = ApiKey.issue(project=trial.job.project, user=user, name=f"trial #{trial.pk}", scope=ApiKey.Scope.INGEST, per_run=True)
    Trial.objects.filter(pk=trial.pk).update(api_key=key, secret_values=[raw, *given])
    return workload_keys.workload_env(raw, trial.own_session), raw


def revoke(trial: Trial):
    """The trial's key revoked, read from its row (the caller's copy may predate the key); repeating it is harmless."""
    if key_id := Trial.objects.filter(pk=trial.pk).values_list("api_key_id", flat=True).first():
        ApiKey.objects.get(pk=key_id).revoke()


def redact_rows(trial_id: int, rows: list[dict], source: bytes | None = None) -> list[dict]:
    """A trial key's batch of span rows with the secrets its agent was given masked; none kept if the trial is gone
    (whose secrets they are is then unknown)."""
    given = Trial.objects.filter(pk=trial_id).values_list("secret_values", flat=True).first()
    return [] if given is None else Redactor(given).values(rows, source)


def register():
    workload_keys.register(
        KIND,
        prefix=TRACE_SESSION_PREFIX,
        field="trial",
        of_key=lambda key_id: Trial.objects.filter(api_key_id=key_id, status=Trial.Status.RUNNING).values_list("pk", flat=True).first(),
        redact=redact_rows,
        reports_outcome=False,
    )
