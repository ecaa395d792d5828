"""`bv jobs`: agents × deployments × tasks × attempts on a task set, followed, compared and exported."""

import re
import sys
import time
from pathlib import Path

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .terminal import client, console, json_option, output

EXIT_WORSE = 1  # `jobs compare --fail-if-worse`: B is significantly worse than A, or either job failed
EXIT_FAILED = 1  # `jobs run --wait`: the job failed (its trials errored past the share a job may lose) or was cancelled
JOB_ENDED = {"finished", "failed", "cancelled"}


@click.group()
def jobs():
    """Jobs: agents run on a task set's tasks, each trial in its own sandbox, scored by the task's verifier."""


@jobs.command("run")
@click.argument("task_set")
@click.option("--agent", "agents", multiple=True, required=True, help="An agent (oracle, nop, …); repeat for several.")
@click.option("--deployment", "deployments", multiple=True, help="A deployment (name or id) for agents that call a model; repeat for several.")
@click.option("--task", "tasks", multiple=True, help="Only this task; repeat for several. All of the version's by default.")
@click.option("--version", type=int, help="The task set's version number; the latest by default.")
@click.option("--attempts", type=click.IntRange(1, 100), default=1, show_default=True, help="Trials of each task by each contestant.")
@click.option("--budget", required=True, help="Dollars its trials may be charged in all, e.g. 5 or 2.50.")
@click.option("--runtime", type=click.Choice(["auto", "runc", "runsc"]), default="auto", show_default=True)
@click.option("--deny-host", "deny_hosts", multiple=True, help="A host no agent may reach (a benchmark's site); a trial that did is flagged.")
@click.option("--name", default="", help="A name for the job.")
@click.option("--agent-command", "agent_commands", multiple=True, help="AGENT=COMMAND: how an agent named pip:PACKAGE or npm:PACKAGE is run once installed.")
@click.option("--wait", is_flag=True, help="Follow its progress until it ends, then print its results.")
@json_option
def jobs_run(task_set, agents, deployments, tasks, version, attempts, budget, runtime, deny_hosts, name, agent_commands, wait):
    """Start a job on TASK_SET (name or id)."""
    payload = {
        "task_set": task_set,
        "agents": list(agents),
        "deployments": list(deployments),
        "tasks": list(tasks),
        "attempts": attempts,
        "budget": budget,
        "runtime": runtime,
        "deny_hosts": list(deny_hosts),
        "name": name,
        "agent_commands": dict(pair(text) for text in agent_commands),
    }
    if version:
        payload["version"] = version
    job = client().post("jobs", payload)
    if wait:
        follow(job)
        ended = client().get(f"jobs/{job['id']}")
        print_job(ended)
        if ended["status"] != "finished":
            sys.exit(EXIT_FAILED)
        return
    output(job, ["id", "name", "status", "task_set", "version", "agents", "attempts", "budget_cents"])


# pip:NAME[==VERSION] or npm:NAME[@VERSION], then `=` and the command (a pip version's own `==` is not the separator).
AGENT_COMMAND = re.compile(r"(?P<agent>pip:[^\s=]+(?:==[^\s=]+)?|npm:[^\s=]+)\s*=\s*(?P<command>\S.*)")


def pair(text: str) -> tuple[str, str]:
    found = AGENT_COMMAND.fullmatch(text.strip())
    if not found:
        raise click.BadParameter(f"{text!r}: give AGENT=COMMAND, e.g. pip:my-agent==1.0=my-agent --task $AGENT_INSTRUCTION_FILE.", param_hint="--agent-command")
    return found["agent"], found["command"]


def follow(job: dict) -> dict:
    interactive = sys.stdout.isatty() and not click.get_current_context().obj.get("json")
    if interactive:
        columns = [TextColumn("job #{task.fields[id]}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[detail]}"), TimeElapsedColumn()]
        with Progress(*columns, console=console()) as progress:
            bar = progress.add_task("job", total=job["progress"]["total"], id=job["id"], detail="")
            while job["status"] not in JOB_ENDED:
                time.sleep(1)
                job = client().get(f"jobs/{job['id']}")
                p = job["progress"]
                progress.update(bar, completed=p["ended"], detail=f"{p['running']} running, {p['errored']} errored")
        return job
    last = None
    while True:
        p = job["progress"]
        line = f"job {job['id']}: {job['status']} {p['ended']}/{p['total']} ({p['running']} running, {p['errored']} errored)"
        if line != last:
            click.echo(line, err=True)
            last = line
        if job["status"] in JOB_ENDED:
            return job
        time.sleep(1)
        job = client().get(f"jobs/{job['id']}")


def interval(found: dict) -> str:
    if found["value"] is None:
        return "—"
    return f"{found['value']:.3f} ({found['ci'][0]:.3f}–{found['ci'][1]:.3f})"


def print_job(job: dict):
    if click.get_current_context().obj.get("json"):
        return output(job)
    p = job["progress"]
    click.echo(f"Job #{job['id']} {job['status']}: {p['ended']}/{p['total']} trials ended, {p['errored']} errored, charged ${job['charged_cents'] / 100:.2f}")
    if job.get("status_message"):
        click.echo(job["status_message"], err=True)
    rows = []
    for entry in job["results"]:
        row = {"contestant": entry["contestant"], "mean_reward": interval(entry["mean_reward"]), "solved": f"{entry['solved']}/{entry['succeeded']}"}
        row.update({f"pass@{k}": interval(v) for k, v in entry["pass_at_k"].items()})
        row.update({f"pass^{k}": interval(v) for k, v in entry["pass_hat_k"].items() if k != "1"})
        row["errored"], row["flagged"] = entry["errored"], entry["flagged"]
        rows.append(row)
    output(rows, list(rows[0]) if rows else None)


@jobs.command("list")
@json_option
def jobs_list():
    """The project's jobs, newest first."""
    rows = [{**j, "trials": f"{j['progress']['ended']}/{j['progress']['total']}", "agents": ", ".join(j["agents"])} for j in client().all("jobs", at_most=100)]
    output(rows, ["id", "name", "status", "task_set", "version", "agents", "attempts", "trials", "charged_cents"])


@jobs.command("show")
@click.argument("job_id", type=int)
@click.option("--set-aside-flagged", is_flag=True, help="Leave flagged trials out of the results.")
@json_option
def jobs_show(job_id, set_aside_flagged):
    """A job's progress and results: pass@k and pass^k with intervals, per contestant."""
    print_job(client().get(f"jobs/{job_id}", **({"set_aside_flagged": "1"} if set_aside_flagged else {})))


@jobs.command("trials")
@click.argument("job_id", type=int)
@click.option("--status", type=click.Choice(["queued", "running", "succeeded", "errored", "skipped"]))
@json_option
def jobs_trials(job_id, status):
    """A job's trials."""
    rows = client().all(f"jobs/{job_id}/trials", **({"status": status} if status else {}))
    output(rows, ["id", "task", "contestant", "attempt", "status", "reward", "flagged", "error"])


@jobs.command("trial")
@click.argument("trial_id", type=int)
@json_option
def jobs_trial(trial_id):
    """One trial: its reward, phases, flags, tokens and where its agent's spans are in Traces."""
    trial = client().get(f"trials/{trial_id}")
    if click.get_current_context().obj["json"]:
        return output(trial)
    reward = "" if trial["reward"] is None else f", reward {trial['reward']}"
    click.echo(f"Trial #{trial['id']} of job #{trial['job']}: {trial['task']} by {trial['contestant']}, attempt {trial['attempt']}: {trial['status']}{reward}")
    if trial["error"]:
        click.echo(f"Error: {trial['error']}")
    click.echo(f"Agent: exit {trial['agent_exit']} in {trial['agent_seconds']} s; verifier: exit {trial['verifier_exit']} in {trial['verifier_seconds']} s")
    click.echo(f"Tokens: {trial['input_tokens']} in, {trial['output_tokens']} out; {len(trial['trajectory'].get('steps') or [])} model turns")
    for reason in trial["flag_reasons"] + [f"The agent {said} through egress." for said in trial["egress_flags"]]:
        click.echo(f"Flagged: {reason}")
    session = trial["trace_session"]
    click.echo(
        f"Traces: session {session['session_id']}, {session['span_count']} spans (bv traces show {session['session_id']})" if session else "Traces: none"
    )


@jobs.command("compare")
@click.argument("a", type=int)
@click.argument("b", type=int)
@click.option("--contestant-a", help="A's contestant, when job A has several.")
@click.option("--contestant-b", help="B's contestant, when job B has several.")
@click.option("--set-aside-flagged", is_flag=True, help="Leave flagged trials out (listed).")
@click.option("--fail-if-worse", is_flag=True, help="Exit 1 when B is significantly worse than A; 0 otherwise; 2 on error.")
@json_option
def jobs_compare(a, b, contestant_a, contestant_b, set_aside_flagged, fail_if_worse):
    """Job B against job A, paired by task: delta with its interval, McNemar or a paired t, the tasks that moved."""
    params = {"contestant_a": contestant_a, "contestant_b": contestant_b, "set_aside_flagged": "1" if set_aside_flagged else None}
    body = client().get(f"jobs/{a}/compare/{b}", **{k: v for k, v in params.items() if v})
    if click.get_current_context().obj["json"]:
        output(body)
    else:
        ci = body["delta_ci"]
        delta = "—" if body["delta"] is None else f"{body['delta']:+.3f}"
        click.echo(f"A: job #{body['a']['id']} {body['a']['contestant']}: mean reward {body['a']['mean_reward']}")
        click.echo(f"B: job #{body['b']['id']} {body['b']['contestant']}: mean reward {body['b']['mean_reward']}")
        click.echo(f"Delta B - A: {delta} (95% CI {f'{ci[0]:.3f}–{ci[1]:.3f}' if ci else '—'}, {body['method']}) on {body['n']} tasks; p = {body['p_value']}")
        click.echo(f"Verdict: {body['verdict']} (gate: {body['gate']})")
        if body["failed"]:
            click.echo(f"Job {' and '.join(f'#{pk}' for pk in body['failed'])} failed: a gate on it passes nothing.", err=True)
        for row in body["tasks"][:10]:
            click.echo(f"  {row['task']}: {row['a']:.3f} -> {row['b']:.3f} ({row['way']})")
        for key, label in (
            ("changed_tasks", "left out, files changed"),
            ("unpaired_tasks", "left out, unscored on a side"),
            ("set_aside_trials", "flagged trials set aside"),
        ):
            if body[key]:
                click.echo(f"{label}: {', '.join(map(str, body[key]))}")
    if fail_if_worse and body["gate"] == "fail":
        sys.exit(EXIT_WORSE)


@jobs.command("retry-errors")
@click.argument("job_id", type=int)
@json_option
def jobs_retry_errors(job_id):
    """Try a job's errored trials again (new trials of the same slots, each charged at its start)."""
    output(client().post(f"jobs/{job_id}/retry-errors", {}), ["id", "status", "retried"])


@jobs.command("cancel")
@click.argument("job_id", type=int)
@json_option
def jobs_cancel(job_id):
    """Stop a job: trials not started are skipped, never charged."""
    output(client().post(f"jobs/{job_id}/cancel", {}), ["id", "status", "skipped"])


@jobs.command("export")
@click.argument("job_id", type=int)
@click.option("-o", "--output", "path", type=click.Path(dir_okay=False, path_type=Path), help="Where to write the zip (job-ID.zip by default).")
def jobs_export(job_id, path):
    """The job in Harbor's job layout, Terminal-Bench 2's rules checked in its result.json."""
    path = path or Path(f"job-{job_id}.zip")
    with client().stream(f"jobs/{job_id}/export") as response, path.open("wb") as out:
        for chunk in response.iter_bytes():
            out.write(chunk)
    click.echo(f"Wrote {path}", err=True)


@jobs.command("regrade")
@click.argument("job_id", type=int)
@click.option("--task-set-version", "version", type=int, required=True, help="The version of the job's task set whose tests grade.")
@click.option("--wait", is_flag=True, help="Follow it until it ends, then print the comparison and the trials that moved.")
@json_option
def jobs_regrade(job_id, version, wait):
    """Grade a job's trials again by another version's tests, from the outputs they kept: no agent runs again, each
    trial keeps its old reward beside the new one, and the two are compared paired."""
    regrade = client().post(f"jobs/{job_id}/regrade", {"version": version})
    counts = regrade["comparison"]["counts"]
    click.echo(f"Regrade #{regrade['id']} of job #{job_id} by version {version}: {counts['queued']} to grade, {counts['skipped']} skipped.", err=True)
    while wait and regrade["status"] == "running":
        time.sleep(1)
        regrade = client().get(f"regrades/{regrade['id']}")
    if click.get_current_context().obj.get("json") or not wait:
        return output(regrade)
    found = regrade["comparison"]
    ci = found["delta_ci"]
    delta = f"{found['delta']:+.3f} ({ci[0]:+.3f} to {ci[1]:+.3f})" if found["delta"] is not None and ci else "—"
    click.echo(f"Regrade #{regrade['id']} {regrade['status']}: {found['n']} graded, new − old reward {delta}, {found['verdict']}")
    output(found["moved"], ["task", "contestant", "attempt", "old", "new"], title="Trials whose reward moved")
