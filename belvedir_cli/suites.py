"""`bv suites`: many benchmarks against many deployments as one run, and the gate across them."""

import sys
import time

import click

from .terminal import client, json_option, output, read_config_file

EXIT_WORSE = 1  # `suites compare --fail-if-worse`: a benchmark is significantly worse after correction
SUITE_ENDED = {"succeeded", "failed", "ended"}


@click.group()
def suites():
    """Suites: benchmarks run together against one or more deployments, compared with corrected verdicts."""


@suites.command("list")
@json_option
def suites_list():
    """The built-in suites (core, quick) and the project's own."""
    rows = [{**s, "benchmarks": ", ".join(e["benchmark"] for e in s["entries"])} for s in client().get("suites")]
    output(rows, ["name", "builtin", "description", "benchmarks"])


@suites.command("create")
@click.argument("name")
@click.option(
    "-f", "config_file", type=click.Path(dir_okay=False), required=True, help="YAML with `benchmarks:` (names or {benchmark, sample_limit, mode, options})."
)
@json_option
def suites_create(name, config_file):
    """Save a suite of your own from a YAML file."""
    config = read_config_file(config_file)
    output(client().post("suites", {"name": name, "description": config.get("description", ""), "entries": config.get("benchmarks")}), ["id", "name"])


@suites.command("run")
@click.argument("suite", required=False)
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False),
    help="A suite run's YAML: suite or benchmarks, deployments, judge, max_cost, epochs, force, cache.",
)
@click.option("--deployment", "deployments", multiple=True, help="A deployment (name or id); repeat for several.")
@click.option("--judge", help="The judge deployment for judged benchmarks (mt_bench).")
@click.option("--same-rows-as", type=int, help="Score each benchmark's rows of this earlier suite run.")
@click.option("--max-cost", help="Budget in dollars for the whole suite run.")
@click.option("--epochs", type=click.IntRange(1, 10), help="Ask every row this many times (noise floor, flips).")
@click.option("--force", is_flag=True, help="Run every cell, even one a finished eval of the project already answers (otherwise reused at no cost).")
@click.option("--cache", type=click.Choice(["auto", "always", "bypass"]), help="Each eval's response cache mode (default auto).")
@click.option("--wait", is_flag=True, help="Follow progress until every eval of the run ends.")
@json_option
def suites_run(suite, config_file, deployments, judge, same_rows_as, max_cost, epochs, force, cache, wait):
    """Run SUITE (core, quick, or yours) or a --config file against one or more deployments.

    A cell (benchmark x deployment) that a finished eval of the project already answered, with the same
    benchmark data, rows, deployment and settings, is reused: shown as such, at no cost. --force runs it again.
    """
    payload = read_config_file(config_file) if config_file else {}
    given = {
        "suite": suite,
        "deployments": list(deployments),
        "judge": judge,
        "same_rows_as": same_rows_as,
        "max_cost": max_cost,
        "epochs": epochs,
        "force": force,
        "cache": cache,
    }
    payload.update({key: value for key, value in given.items() if value})
    if isinstance(payload.get("benchmarks"), list) and "suite" not in payload:
        payload.setdefault("name", "config")
    if not payload.get("deployments") or not (payload.get("suite") or payload.get("benchmarks")):
        raise click.UsageError("Give a SUITE (or --config with suite or benchmarks) and at least one --deployment.")
    run = client().post("suite-runs", payload)
    if wait:
        run = follow(run)
    show_run(run)
    if wait and run["status"] != "succeeded":
        sys.exit(EXIT_WORSE)


@suites.command("show")
@click.argument("run_id", type=int)
@json_option
def suites_show(run_id):
    """A suite run: benchmark x deployment table of scores, intervals, errors and costs."""
    show_run(client().get(f"suite-runs/{run_id}"))


@suites.command("compare")
@click.argument("a", type=int)
@click.argument("b", type=int)
@click.option("--deployment-a", help="A's deployment, when run A ran on several.")
@click.option("--deployment-b", help="B's deployment, when run B ran on several.")
@click.option("--set-aside-flaky", is_flag=True, help="Leave out rows that flipped within either deployment's own epochs (listed).")
@click.option("--fail-if-worse", is_flag=True, help="Exit 1 when any benchmark is significantly worse after correction; 0 otherwise; 2 on error.")
@json_option
def suites_compare(a, b, deployment_a, deployment_b, set_aside_flaky, fail_if_worse):
    """Suite run B against A, benchmark by benchmark on paired rows, the verdicts corrected (Holm) for testing them all."""
    params = {"deployment_a": deployment_a, "deployment_b": deployment_b, "set_aside_flaky": "1" if set_aside_flaky else None}
    body = client().get(f"suite-runs/{a}/compare/{b}", **{k: v for k, v in params.items() if v})
    if click.get_current_context().obj["json"]:
        output(body)
    else:
        print_comparison(body)
    if fail_if_worse and body["gate"] == "fail":
        sys.exit(EXIT_WORSE)


@suites.command("retry-errors")
@click.argument("run_id", type=int)
@json_option
def suites_retry(run_id):
    """Ask again only the errored samples of every eval of the run."""
    output(client().post(f"suite-runs/{run_id}/retry-errors", {}), None)


@suites.command("cancel")
@click.argument("run_id", type=int)
@json_option
def suites_cancel(run_id):
    output(client().post(f"suite-runs/{run_id}/cancel", {}), None)


def follow(run: dict) -> dict:
    last = None
    while True:
        p = run["progress"]
        line = f"suite run {run['id']}: {run['status']}, {p['succeeded']} of {p['evals']} evals done, {p['active']} going"
        if line != last:
            click.echo(line, err=True)
            last = line
        if run["status"] in SUITE_ENDED:
            return client().get(f"suite-runs/{run['id']}")
        time.sleep(1)
        run = client().get(f"suite-runs/{run['id']}")


def show_run(run: dict):
    if click.get_current_context().obj["json"]:
        output(run)
        return
    click.echo(f"Suite run #{run['id']} ({run['suite_name']}) on {', '.join(run['deployments'])}: {run['status']}")
    if reused := run["progress"].get("reused"):
        click.echo(f"{reused} of {run['progress']['evals']} cells reused from finished evals (nothing asked, $0); --force runs them again.")
    for note in run.get("notes") or []:
        click.echo(f"Note: {note}")
    rows = []
    for row in run.get("table", []):
        entry = {"benchmark": row["benchmark"]}
        for name, cell in row["cells"].items():
            entry[name] = describe(cell)
        rows.append(entry)
    output(rows, ["benchmark", *run["deployments"]])


def describe(cell: dict | None) -> str:
    if cell is None:
        return ""
    if cell["score"] is None:
        return f"{cell['status']} {cell['done']}/{cell['total']}"
    ci = f" [{cell['score_ci'][0]:.3f}, {cell['score_ci'][1]:.3f}]" if cell["score_ci"] else ""
    errors = f", {cell['errors']} errors" if cell["errors"] else ""
    cost = f", ${float(cell['cost']):.4f}" if cell["cost"] else ""
    reused = f", reused from eval #{cell['reused_from']}" if cell.get("reused_from") else ""
    return f"{cell['score']:.3f}{ci}{errors}{cost}{reused}" + ("" if cell["status"] == "succeeded" else f" ({cell['status']})")


def print_comparison(body: dict):
    a, b = body["a"], body["b"]
    click.echo(f"A: suite run #{a['id']} ({a['suite']}) on {a['deployment']}; B: suite run #{b['id']} ({b['suite']}) on {b['deployment']}")
    rows = [
        {
            "benchmark": r["benchmark"],
            "n": r["n"],
            "A": fmt(r["a"]["score"], ".3f"),
            "B": fmt(r["b"]["score"], ".3f"),
            "delta": fmt(r["delta"], "+.3f"),
            "95% CI": f"{r['delta_ci'][0]:+.3f}–{r['delta_ci'][1]:+.3f}" if r["delta_ci"] else "",
            "p": fmt(r["sequential"]["p"], ".3g") + " †" if r.get("gate_test") == "sequential" else fmt(r["p_value"], ".3g"),
            "p (Holm)": fmt(r["p_adjusted"], ".3g"),
            "verdict": r["corrected_verdict"] + (" *" if r.get("judge") and not r["judge"]["calibrated"] else ""),
        }
        for r in body["benchmarks"]
    ]
    output(rows, ["benchmark", "n", "A", "B", "delta", "95% CI", "p", "p (Holm)", "verdict"], title="B - A per benchmark, corrected for multiplicity (Holm)")
    if any(r.get("judge") and not r["judge"]["calibrated"] for r in body["benchmarks"]):
        click.echo("* judge not calibrated: fewer than 30 human labels")
    for r in body["benchmarks"]:
        if r.get("gate_test") == "sequential":
            click.echo(f"† {r['benchmark']}: {r['sequential']['summary']} (the gate uses this always-valid p)")
    if body["not_compared"]:
        click.echo(f"Not compared (run by one side only): {', '.join(body['not_compared'])}")
    if body["failed"]:
        click.echo(f"Failed on either side (the gate fails): {', '.join(body['failed'])}")
    click.echo(f"Summary: {body['summary']}")
    click.echo(f"Gate: {body['gate']}")


def fmt(value, spec) -> str:
    return "—" if value is None else format(value, spec)
