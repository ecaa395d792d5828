"""`bv monitors`: suites on a schedule against a deployment, their verdicts, and the alerts they open."""

import click

from .terminal import client, id_by_name, json_option, output, read_config_file

RUN_COLUMNS = ["id", "due_at", "verdict", "reason", "suite_run", "baseline"]


def _monitor_id(name_or_id: str) -> int:
    return id_by_name("monitors", name_or_id, "No monitor named {name}: `bv monitors list` shows them.")


@click.group()
def monitors():
    """Monitors: a suite on a cron schedule, each run compared with its baseline; alerts when it regresses."""


def _live_state(monitor: dict) -> str:
    if monitor["metric"] in ("tokens", "duration_p95"):
        return f"held under {monitor['ceiling']:g}"
    if monitor["cusum_h"] is None:
        return "learning its pass rate"
    return "dropped" if monitor["cusum"] > monitor["cusum_h"] else "holding"


@monitors.command("list")
@json_option
def monitors_list():
    rows = []
    for m in client().all("monitors"):
        last = m["last_run"] or {}
        verdict = last.get("verdict", "no run yet") if m["kind"] == "suite" else _live_state(m)
        rows.append({**m, "last_verdict": verdict})
    output(rows, ["id", "name", "kind", "cron", "last_verdict", "open_alerts"])


@monitors.command("create")
@click.option(
    "-f", "config_file", type=click.Path(dir_okay=False), required=True, help="YAML: name, suite, deployment, cron, min_drop, false_alarms_per_month, …"
)
@json_option
def monitors_create(config_file):
    """Create a monitor from a YAML file; prints the webhook's signing secret once when it has a webhook."""
    created = client().post("monitors", read_config_file(config_file))
    output(created, ["id", "name", "cron", "alpha", "next_run_at", *(["webhook_secret"] if "webhook_secret" in created else [])])


@monitors.command("show")
@click.argument("monitor")
@json_option
def monitors_show(monitor):
    """A monitor's settings and its latest runs with their verdicts."""
    pk = _monitor_id(monitor)
    found = client().get(f"monitors/{pk}")
    runs = client().get(f"monitors/{pk}/runs")
    if click.get_current_context().obj.get("json"):
        output({**found, "runs": runs["results"]})
        return
    if found["kind"] == "live":
        output(found, ["id", "name", "metric", "evaluator", "reference_rate", "ceiling", "cusum", "cusum_h", "open_alerts"])
        return
    output(found, ["id", "name", "suite", "deployment", "cron", "alpha", "min_drop", "false_alarms_per_month", "spent_this_month", "open_alerts"])
    output(runs["results"], RUN_COLUMNS, title="Runs")


@monitors.command("run")
@click.argument("monitor")
@json_option
def monitors_run(monitor):
    """Run it now (its schedule is unchanged)."""
    output(client().post(f"monitors/{_monitor_id(monitor)}/run", {}), RUN_COLUMNS)


@monitors.command("alerts")
@click.option("--all", "show_all", is_flag=True, help="Resolved ones too.")
@json_option
def monitors_alerts(show_all):
    """Open alerts (--all for every one)."""
    rows = client().all("alerts") if show_all else client().all("alerts", state="open")
    output(rows, ["id", "monitor", "kind", "state", "title", "repeats", "opened_at"])


@monitors.command("ack")
@click.argument("alert_id", type=int)
@json_option
def monitors_ack(alert_id):
    """Acknowledge an alert: someone is on it."""
    output(client().post(f"alerts/{alert_id}/ack", {}), ["id", "state", "title"])
