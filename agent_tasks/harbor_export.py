"""A job in Harbor's job layout, and Terminal-Bench 2's submission rules checked before it goes.

The layout is Harbor's documented one: `config.json` and `result.json` for the job, and a folder per trial with
its own `config.json`, `result.json` (the verifier's reward under `verifier_result.rewards`), the agent's and the
verifier's output, and here its egress record (`egress.json`), which Terminal-Bench's "no access to the
benchmark" rule asks for. A job that breaks a rule still exports: `result.json` names each rule and whether it
held, so a reviewer sees why it would be refused.
"""

import io
import json
import re
import zipfile
from collections import Counter

from . import audits
from .egress_record import denied_reaches, egress_records, is_denied
from .models import Job, Trial
from .results import summary

# Terminal-Bench 2's leaderboard: at least this many trials of every task, by every contestant.
MIN_TRIALS_PER_TASK = 5


def trial_name(trial: Trial) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{trial.task.name}__{trial.contestant}__{trial.attempt}")


def rules(job: Job, trials: list[Trial], egress: dict[int, list[dict]]) -> list[dict]:
    """Terminal-Bench 2's submission rules, each with whether this job holds to it and, when not, where it broke."""
    ran = Counter((t.task.name, t.contestant) for t in trials if t.status != Trial.Status.SKIPPED)
    short = sorted(
        f"{task} by {who}: {ran.get((task, who), 0)}"
        for task in {t.task.name for t in trials}
        for who in {t.contestant for t in trials}
        if ran.get((task, who), 0) < MIN_TRIALS_PER_TASK
    )
    held = sorted({f"{trial_name(t)}: {'; '.join(t.limits.get('held', []))}" for t in trials if t.limits.get("held")})
    reached = sorted(
        {f"{trial_name(t)} reached {d['host']}" for t in trials for d in egress.get(t.pk, []) if not d["refused"] and is_denied(d["host"], job.deny_hosts)}
    )
    return [
        {
            "rule": f"At least {MIN_TRIALS_PER_TASK} trials of every task by every contestant",
            "held": not short,
            "broken_by": short[:20],
        },
        {
            "rule": "Each task's own time limits and resources, no overrides",
            "held": not held,
            "broken_by": held[:20],
        },
        {
            "rule": "No agent reached the benchmark's website or repository (each trial's egress record attached)",
            "held": not reached,
            "broken_by": reached[:20],
        },
    ]


def export(job: Job) -> bytes:
    """The job as a zip of Harbor's job layout under `job-<id>/`."""
    trials = list(job.trials.select_related("task", "deployment").defer("task__archive").order_by("attempt", "pk"))
    egress = egress_records(trials)
    for trial in trials:
        trial.egress_flags = denied_reaches(egress[trial.pk], job.deny_hosts)
    checked = rules(job, trials, egress)
    root = f"job-{job.pk}"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:

        def put(path: str, value):
            archive.writestr(f"{root}/{path}", value if isinstance(value, str) else json.dumps(value, indent=2, default=str))

        put("config.json", _job_config(job))
        put(
            "result.json",
            {
                "id": job.pk,
                "started_at": job.created_at,
                "finished_at": job.finished_at,
                "n_total_trials": len(trials),
                "stats": {
                    "n_trials": sum(1 for t in trials if t.status == Trial.Status.SUCCEEDED),
                    "n_errors": sum(1 for t in trials if t.status == Trial.Status.ERRORED),
                    "evals": {entry["contestant"]: entry for entry in summary(job)},
                },
                "terminal_bench_2_rules": checked,
                "submittable": all(rule["held"] for rule in checked),
                # What the newest audit of the job's version found per task (agent_tasks/audits.py); null unaudited.
                "belvedir_audit": audits.summary(job.version),
            },
        )
        for trial in trials:
            name = trial_name(trial)
            put(f"{name}/config.json", _trial_config(job, trial))
            put(f"{name}/result.json", _trial_result(trial))
            put(f"{name}/egress.json", egress[trial.pk])
            if trial.trajectory:
                put(f"{name}/agent/trajectory.json", trial.trajectory)
            put(f"{name}/agent/output.txt", trial.agent_output)
            put(f"{name}/verifier/output.txt", trial.verifier_output)
    return buffer.getvalue()


def _agent(name: str, deployment) -> dict:
    return {"name": name, "model_name": deployment.model if deployment else None}


def _job_config(job: Job) -> dict:
    deployments = list(job.deployments.all())
    return {
        "job_name": str(job),
        "n_attempts": job.attempts,
        "timeout_multiplier": 1.0,
        "agents": [_agent(a, d) for a in job.agents for d in (deployments or [None])],
        "datasets": [{"name": job.version.task_set.name, "version": str(job.version.number), "digest": job.version.digest}],
        "task_names": job.tasks or None,
        "environment": {"type": "belvedir", "runtime": job.runtime},
    }


def _trial_config(job: Job, trial: Trial) -> dict:
    return {
        "task": {"name": trial.task.name, "checksum": trial.task.digest},
        "trial_name": trial_name(trial),
        "agent": _agent(trial.agent, trial.deployment),
        "timeout_multiplier": 1.0,
        "environment": {"type": "belvedir", "runtime": trial.runtime or job.runtime, "limits": trial.limits},
        "job_id": job.pk,
    }


def _trial_result(trial: Trial) -> dict:
    return {
        "task_name": trial.task.name,
        "trial_name": trial_name(trial),
        "task_checksum": trial.task.digest,
        "agent_info": {"name": trial.agent, "model_info": {"name": trial.deployment.model} if trial.deployment else None},
        "agent_result": {
            "exit_code": trial.agent_exit,
            "seconds": trial.agent_seconds,
            "n_input_tokens": trial.input_tokens,
            "n_output_tokens": trial.output_tokens,
            "cost_usd": float(trial.model_cost) if trial.model_cost is not None else None,
            "platform_charge_usd": trial.price_cents / 100,
        },
        "verifier_result": {"rewards": {"reward": trial.reward}} if trial.reward is not None else None,
        "exception_info": {"exception_type": "PlatformError" if trial.platform_fault else "TrialError", "exception_message": trial.error}
        if trial.error
        else None,
        "started_at": trial.started_at,
        "finished_at": trial.finished_at,
        "belvedir": {
            "trial": trial.pk,
            "status": trial.status,
            "flagged": trial.is_flagged,
            "flag_reasons": trial.all_flag_reasons,
            "verifier_exit": trial.verifier_exit,
            "verifier_mode": trial.verifier_mode,
            # SHA-256 of the declared outputs the verifier graded (agent_tasks/outputs.py); "" when none were declared.
            "graded_digest": trial.graded_digest,
        },
    }
