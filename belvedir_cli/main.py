import json
import sys
import time
from pathlib import Path

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from . import datasets, jobs, members, monitors, review, suites, tasks, traces
from .client import DEFAULT_BASE_URL, ApiError, Client, save_config
from .terminal import client, console, id_by_name, json_option, output, read_config_file
from .upload import MultipartFile

EXIT_FAILED = 1  # the eval or run failed; for `evals compare --fail-if-worse`, B is significantly worse or either failed
FAILED = {"failed", "error"}
RUN_ENDED = {"succeeded", "failed", "timed_out", "cancelled", "launch_failed", "error"}
EVAL_ENDED = {"succeeded", "failed", "cancelled"}


@click.group()
@click.pass_context
def cli(ctx):
    """Belvedir from the terminal: harness runs, evals, models, traces, members, balance."""
    ctx.ensure_object(dict)


@cli.command()
@click.option("--api-key", prompt=True, hide_input=True)
@click.option("--base-url", default=DEFAULT_BASE_URL, prompt=True, show_default=True)
@json_option
def login(api_key, base_url):
    """Store an API key and server URL in your config directory (mode 600)."""
    me = Client(api_key, base_url).get("me")
    path = save_config(api_key, base_url)
    output({"saved_to": str(path), "user": me["user"]["username"], "project": me["project"]["name"]})


@cli.command()
@json_option
def whoami():
    """The key's user, project and balance."""
    me = client().get("me")
    output(
        me if click.get_current_context().obj["json"] else {"user": me["user"]["username"], "project": me["project"]["name"], "balance": f"${me['balance']}"}
    )


@cli.command()
@json_option
def balance():
    """The balance and recent ledger entries."""
    body = client().get("balance")
    if click.get_current_context().obj["json"]:
        return output(body)
    click.echo(f"Balance: ${body['balance']}")
    output(body["entries"], ["created_at", "kind", "amount_cents", "balance_after_cents", "memo"])


@cli.group()
def coupons():
    """Coupon codes."""


@coupons.command("redeem")
@click.argument("code")
@json_option
def coupons_redeem(code):
    body = client().post("coupons/redeem", {"code": code})
    output(body if click.get_current_context().obj["json"] else {"credited": f"${body['credited_cents'] / 100:.2f}", "balance": f"${body['balance']}"})


@cli.group()
def benchmarks():
    """The benchmark catalog."""


@benchmarks.command("list")
@json_option
def benchmarks_list():
    """Each benchmark's rows, metric, modes, categories, licence, source and version (a data file's SHA-256)."""
    catalog = client().get("benchmarks")
    if click.get_current_context().obj.get("json"):
        output(catalog)
        return
    rows = [
        {
            **b,
            "rows": b["rows"] if b["available"] else "not installed",
            "categories": ", ".join(b["categories"]),
            "modes": ", ".join(b["modes"]),
            "version": (b["version"] or "")[:19],
        }
        for b in catalog
    ]
    output(rows, ["name", "rows", "metric", "modes", "categories", "licence", "source", "version"])
    for b in catalog:
        if not b["available"]:
            click.echo(f"{b['name']}: {b['problem']}")


@cli.group()
def scorers():
    """The scorers a dataset eval or an evaluator names: {"name": ..., "options": {...}}."""


@scorers.command("list")
@json_option
def scorers_list():
    """Each scorer, whether it asks a judge, and its options (type, default)."""
    found = client().get("scorers")
    if click.get_current_context().obj.get("json"):
        output(found)
        return
    rows = [
        {**s, "judge": "yes" if s["needs_judge"] else "", "options": ", ".join(f"{k} ({o['type']}, default {o['default']!r})" for k, o in s["options"].items())}
        for s in found
    ]
    output(rows, ["name", "judge", "options", "description"])


@cli.group()
def deployments():
    """Model deployments (OpenAI-compatible endpoints)."""


@deployments.command("list")
@json_option
def deployments_list():
    output(client().get("deployments"), ["id", "name", "base_url", "model", "api_style", "max_in_flight", "cache_ttl_seconds"])


@deployments.command("create")
@click.option("--name", required=True)
@click.option("--base-url", required=True)
@click.option("--model", required=True)
@click.option("--api-key", default="", envvar="DEPLOYMENT_API_KEY")
@click.option("--style", type=click.Choice(["chat", "completions"]), default="chat")
@click.option("--max-in-flight", type=int, default=100)
@click.option("--cache-ttl", type=click.IntRange(0), help="Seconds its answers stay in the response cache (default 7 days; 0 caches nothing).")
@json_option
def deployments_create(name, base_url, model, api_key, style, max_in_flight, cache_ttl):
    payload = {"name": name, "base_url": base_url, "model": model, "api_key": api_key, "api_style": style, "max_in_flight": max_in_flight}
    if cache_ttl is not None:
        payload["cache_ttl_seconds"] = cache_ttl
    output(client().post("deployments", payload), ["id", "name", "base_url", "model"])


@deployments.command("clear-cache")
@click.argument("deployment_id", type=int)
@json_option
def deployments_clear_cache(deployment_id):
    """Remove a deployment's answers from the response cache: its next evals ask it again."""
    output(client().post(f"deployments/{deployment_id}/clear-cache", {}), ["id", "removed"])


@cli.group()
def evals():
    """Evals of deployments on benchmarks and datasets."""


@evals.command("run")
@click.argument("benchmark", required=False)
@click.option("--deployment", help="Deployment name or id.")
@click.option("--n", "sample_limit", type=int, help="Score N rows (a deterministic subset).")
@click.option("-f", "config_file", type=click.Path(dir_okay=False), help="A YAML or JSON eval config.")
@click.option("--same-rows-as", "same_rows_as", type=int, help="Score exactly the rows of this earlier eval (its benchmark or dataset, limit and seed).")
@click.option("--samples-per-problem", type=click.IntRange(1, 20), help="humaneval: n completions per problem, for pass@k.")
@click.option("--max-cost", help="Budget in dollars: the eval stops as cancelled when its token cost reaches it.")
@click.option(
    "--mode",
    type=click.Choice(["generative", "loglikelihood"]),
    help="generative (default), or loglikelihood: multiple choice ranked by prompt logprobs, on a completions deployment (vLLM).",
)
@click.option(
    "--option",
    "options",
    multiple=True,
    metavar="NAME=VALUE",
    help="A benchmark option (`bv benchmarks list --json` lists them), e.g. --option challenge_tests=true; repeatable. VALUE is read as JSON when it parses.",
)
@click.option("--judge", help="A judged benchmark's judge deployment (mt_bench), name or id.")
@click.option("--epochs", type=click.IntRange(1, 10), help="Ask every row this many times: per-row pass rates, flips and the noise floor.")
@click.option(
    "--cache",
    type=click.Choice(["auto", "always", "bypass"]),
    help="The response cache: auto (default; sampled requests without a seed are not cached), always, or bypass (ask again, keep the fresh answers).",
)
@click.option(
    "--decide-against",
    "decide_against",
    type=int,
    help="An eval of the same rows (its rows by default): stop once a test valid at every look decides, or finds no difference of 2 points left.",
)
@click.option("--alpha", "decision_alpha", type=click.FloatRange(0.0001, 0.5), help="The decision's α with --decide-against (default 0.05).")
@click.option("--precision", "precision_target", type=click.FloatRange(0.0001, 0.5), help="Stop once the score's 95% interval is at most ± this, e.g. 0.02.")
@click.option("--wait", is_flag=True, help="Follow progress until the eval ends.")
@json_option
def evals_run(
    benchmark,
    deployment,
    sample_limit,
    config_file,
    same_rows_as,
    samples_per_problem,
    max_cost,
    mode,
    options,
    judge,
    epochs,
    cache,
    decide_against,
    decision_alpha,
    precision_target,
    wait,
):
    payload = read_config_file(config_file) if config_file else {}
    if options:
        from_file = payload.get("benchmark_options") or {}
        if not isinstance(from_file, dict):
            raise click.UsageError("benchmark_options in the config must be a mapping of option names to values.")
        payload["benchmark_options"] = {**from_file, **dict(map(benchmark_option, options))}
    given = {
        "benchmark": benchmark,
        "deployment": deployment,
        "sample_limit": sample_limit,
        "same_rows_as": same_rows_as,
        "samples_per_problem": samples_per_problem,
        "max_cost": max_cost,
        "mode": mode,
        "judge": judge,
        "epochs": epochs,
        "cache": cache,
        "decide_against": decide_against,
        "decision_alpha": decision_alpha,
        "precision_target": precision_target,
    }
    payload.update({key: value for key, value in given.items() if value})
    if not payload.get("deployment") or not (
        payload.get("benchmark") or payload.get("dataset_id") or payload.get("same_rows_as") or payload.get("decide_against")
    ):
        raise click.UsageError("Give a BENCHMARK (or -f config, or --same-rows-as ID, or --decide-against ID) and --deployment.")
    ev = client().post("evals", payload)
    if wait:
        ev = follow_eval(ev)
    if ev.get("early_stop", {}).get("reason"):
        click.echo(f"Stopped early: {ev['early_stop']['summary']}", err=True)
    output(with_interval(ev), ["id", "benchmark", "mode", "status", "done_count", "total", "score", "95% CI", "error_count", "cost", "cache_hits"])
    if wait and ev["status"] != "succeeded":
        sys.exit(EXIT_FAILED)


def benchmark_option(text: str) -> tuple[str, object]:
    """NAME=VALUE, the value as JSON (true, 3, "x") or else the text itself; the server checks it against the option's type."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise click.BadParameter(f"{text!r}: give NAME=VALUE, e.g. challenge_tests=true.", param_hint="--option")
    try:
        return name, json.loads(value)
    except ValueError:
        return name, value


def follow_eval(ev):
    interactive = sys.stdout.isatty() and not click.get_current_context().obj.get("json")
    if interactive:
        columns = [TextColumn("eval #{task.fields[id]}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"), TimeRemainingColumn()]
        with Progress(*columns, console=console()) as progress:
            task = progress.add_task("eval", total=ev["total"] or None, id=ev["id"], rate="")
            while ev["status"] not in EVAL_ENDED:
                time.sleep(1)
                ev = client().get(f"evals/{ev['id']}")
                rate = f"{ev['rate_per_s']:.1f}/s" if ev.get("rate_per_s") else ""
                progress.update(task, total=ev["total"] or None, completed=ev["done_count"], rate=rate)
        return ev
    last = None
    while True:
        line = f"eval {ev['id']}: {ev['status']} {ev['done_count']}/{ev['total']}"
        if line != last:
            click.echo(line, err=True)
            last = line
        if ev["status"] in EVAL_ENDED:
            return ev
        time.sleep(1)
        ev = client().get(f"evals/{ev['id']}")


def interval(bounds) -> str:
    return f"{bounds[0]:.3f}–{bounds[1]:.3f}" if bounds else ""


def with_interval(ev: dict) -> dict:
    """The eval as the API gives it, plus its interval printed for tables (JSON output keeps score_ci)."""
    return ev if click.get_current_context().obj.get("json") else {**ev, "95% CI": interval(ev.get("score_ci"))}


@evals.command("show")
@click.argument("eval_id", type=int)
@json_option
def evals_show(eval_id):
    ev = client().get(f"evals/{eval_id}")
    if click.get_current_context().obj.get("json"):
        output(ev)
        return
    hidden = ("categories", "metrics", "noise", "warnings", "early_stop", "serving_stack")
    output(with_interval({key: value for key, value in ev.items() if key not in hidden}))
    for warning in ev.get("warnings") or []:
        click.echo(f"Warning: {warning}")
    if stop := ev.get("early_stop"):
        click.echo(f"Stopped early: {stop['summary']}" if stop.get("reason") else f"Resumed after it {stop['resumed']['summary']}")
    if noise := ev.get("noise"):
        epochs = ", ".join(f"{score:.3f}" for score in noise["epoch_scores"])
        click.echo(
            f"Epochs: {noise['epochs']} (scores {epochs}); {noise['flipped']} of {noise['n']} rows flipped ({noise['flip_rate']:.1%}); "
            f"noise floor ±{noise['noise_floor']:.4f} (95% CI {interval(noise['noise_floor_ci'])})"
        )
    if ev.get("metrics"):
        rows = [
            {
                **m,
                "name": m["name"] + (" (headline)" if m["headline"] else ""),
                "n": f"{m['n']} {m['unit']}",
                "score": fmt(m["score"], ".3f"),
                "95% CI": interval(m["score_ci"]),
            }
            for m in ev["metrics"]
        ]
        output(rows, ["name", "n", "score", "95% CI"], title="Metrics")
    for axis, entries in (ev.get("categories") or {}).items():
        rows = [{**e, "score": fmt(e["score"], ".3f"), "95% CI": interval(e["score_ci"])} for e in entries]
        output(rows, ["name", "n", "score", "95% CI"], title=f"Score by {axis}")


@evals.command("resume")
@click.argument("eval_id", type=int)
@click.option("--max-cost", help="A new budget in dollars (an eval stopped at its budget needs a higher one).")
@json_option
def evals_resume(eval_id, max_cost):
    """Continue a failed, cancelled, stalled or early-stopped eval on the same rows."""
    output(client().post(f"evals/{eval_id}/resume", {"max_cost": max_cost} if max_cost else {}), ["id", "status", "done_count", "total", "max_cost"])


@evals.command("retry-errors")
@click.argument("eval_id", type=int)
@json_option
def evals_retry(eval_id):
    """Ask again only the rows that errored; earlier attempts are kept and their tokens counted."""
    body = client().post(f"evals/{eval_id}/retry-errors", {})
    output(
        body if click.get_current_context().obj["json"] else {"retried": body["retried"], **body["eval"]}, ["id", "retried", "status", "done_count", "total"]
    )


@evals.command("rescore")
@click.argument("eval_id", type=int)
@json_option
def evals_rescore(eval_id):
    """A new eval scored from EVAL_ID's stored outputs, without asking the deployment again."""
    output(client().post(f"evals/{eval_id}/rescore", {}), ["id", "benchmark", "rescored_from", "status"])


@evals.command("compare")
@click.argument("a", type=int)
@click.argument("b", type=int)
@click.option("--fail-if-worse", is_flag=True, help="Exit 1 when B is significantly worse than A (a regression gate); 0 otherwise.")
@click.option("--flips", "show_flips", type=int, default=10, show_default=True, help="How many flipped rows to list.")
@click.option("--set-aside-flaky", is_flag=True, help="Leave out rows that flipped within either eval's own epochs (listed).")
@click.option("--sequential", is_flag=True, help="Also the sequential test (valid at every look) on the prefix both stored; shown when either stopped early.")
@json_option
def evals_compare(a, b, fail_if_worse, show_flips, set_aside_flaky, sequential):
    """Eval B against eval A on the same rows: paired delta with its CI, McNemar p, flips and a verdict.

    When either stopped early, the gate takes the sequential test's verdict: the fixed-n one of a prefix chosen by looking is not valid."""
    params = {"set_aside_flaky": "1" if set_aside_flaky else None, "sequential": "1" if sequential else None}
    body = client().get(f"evals/{a}/compare/{b}", **{k: v for k, v in params.items() if v})
    if click.get_current_context().obj["json"]:
        output(body)
    else:
        print_comparison(body, show_flips)
    found = body.get("sequential")
    verdict = found["verdict"] if found and found["stopped"] else body["verdict"]
    failed = [f"#{body[side]['id']}" for side in ("a", "b") if body[side]["status"] in FAILED]
    if fail_if_worse and failed:
        click.echo(f"Eval {' and '.join(failed)} failed: a gate on it passes nothing.", err=True)
        sys.exit(EXIT_FAILED)
    if fail_if_worse and verdict == "worse":
        sys.exit(EXIT_FAILED)


def print_comparison(body: dict, show_flips: int):
    for side in ("a", "b"):
        s = body[side]
        click.echo(f"{side.upper()}: eval #{s['id']} {s['deployment']}: {fmt(s['score'], '.4f')} (95% CI {interval(s['score_ci'])}), n={s['n']}")
    delta = "—" if body["delta"] is None else f"{body['delta']:+.4f}"
    click.echo(f"Paired delta B - A: {delta} (95% CI {interval(body['delta_ci'])}, {body['method']}) on {body['n']} rows")
    if body["mcnemar_p"] is not None:
        click.echo(f"McNemar exact p = {body['mcnemar_p']:.4g}")
    click.echo(f"Flips: right->wrong {body['flips']['right_to_wrong']}, wrong->right {body['flips']['wrong_to_right']}")
    click.echo(f"Minimum detectable effect at this n: {fmt(body['mde'], '.3f')}")
    click.echo(f"Verdict: {body['verdict']}")
    if found := body.get("sequential"):
        click.echo(f"Sequential ({found['method']}): {found['summary']}")
    if body["rows_needed"]:
        click.echo(f"About {body['rows_needed']} paired rows would decide a gap of this size.")
    if noise := body.get("noise"):
        where = "above" if noise["above"] else "within"
        click.echo(f"Noise floor (eval #{noise['eval']}'s epochs): ±{noise['noise_floor']:.4f}; the delta is {where} it.")
    if body.get("set_aside", {}).get("applied"):
        click.echo(f"Set aside {body['set_aside']['count']} rows that flipped within their own epochs: {body['set_aside']['flaky_rows'][:20]}")
    if (judge := body.get("judge")) and not judge["calibrated"]:
        click.echo(f"Warning: {judge['warning']}")
    if (stacks := body.get("serving")) and not stacks["same"]:
        click.echo(f"Warning: {stacks['warning']}")
    for axis, entries in (body.get("by_category") or {}).items():
        rows = [{**e, "a": fmt(e["a"], ".3f"), "b": fmt(e["b"], ".3f"), "delta": fmt(e["delta"], "+.3f"), "95% CI": interval(e["delta_ci"])} for e in entries]
        output(rows, ["name", "n", "a", "b", "delta", "95% CI", "verdict"], title=f"Delta B - A by {axis}")
    flips = body["flipped"][:show_flips]
    if flips:
        output(
            [
                {**f, "input": f["input"][:60], "output_a": f["output_a"][-40:], "output_b": f["output_b"][-40:], "reference": f["reference"][:30]}
                for f in flips
            ],
            ["row_index", "direction", "input", "reference", "output_a", "output_b"],
            title=f"Flipped rows ({len(flips)} of {len(body['flipped'])})",
        )


def fmt(value, spec) -> str:
    return "—" if value is None else format(value, spec)


@evals.command("samples")
@click.argument("eval_id", type=int)
@click.option("--wrong", is_flag=True, help="Only wrong answers.")
@click.option("--errors", is_flag=True, help="Only samples that errored.")
@json_option
def evals_samples(eval_id, wrong, errors):
    params = {"filter": "wrong"} if wrong else {"filter": "errors"} if errors else {}
    output(client().all(f"evals/{eval_id}/samples", **params), ["row_index", "extracted", "reference", "score", "error"])


@cli.group()
def harnesses():
    """Harnesses: git repos run in sandboxes."""


@harnesses.command("list")
@json_option
def harnesses_list():
    output(client().all("harnesses"), ["id", "name", "repo_url", "compute_type", "price_cents"])


@harnesses.command("create")
@click.option("-f", "config_file", required=True, type=click.Path(dir_okay=False), help="harness.yaml")
@json_option
def harnesses_create(config_file):
    output(client().post("harnesses", read_config_file(config_file)), ["id", "name", "repo_url", "compute_type"])


def harness_id(name_or_id: str) -> int:
    return id_by_name("harnesses", name_or_id, "No harness named {name} in this project (see `bv harnesses list`).")


@cli.group()
def runs():
    """Harness runs."""


@runs.command("start")
@click.argument("harness")
@click.option("--repeats", type=click.IntRange(1, 20), help="Start N runs at once, each charged as a run (all or none).")
@click.option("--wait", is_flag=True, help="Follow the run until it ends.")
@json_option
def runs_start(harness, repeats, wait):
    if repeats:
        if wait:
            raise click.UsageError("--wait follows one run: leave it out with --repeats and see the harness's scores per model.")
        return output(client().post(f"harnesses/{harness_id(harness)}/runs", {"repeats": repeats}), ["id", "harness_name", "status", "price_cents"])
    run = client().post(f"harnesses/{harness_id(harness)}/runs")
    if wait:
        run = follow_run(run)
    output_run(run)
    if wait and run["status"] != "succeeded":
        sys.exit(EXIT_FAILED)


RUN_COLUMNS = ["id", "harness_name", "status", "score", "model", "price_cents"]


def output_run(run: dict):
    """A run's row, and under it, which of its secrets its output held and where: the warning a person reads (--json has the list)."""
    output(run, RUN_COLUMNS)
    found = run.get("secrets_reached_output") or []
    if not click.get_current_context().obj.get("json") and found:
        report = "; ".join(f"{item['name']} in {', '.join(item['places'])}" for item in found)
        click.echo(f"Warning: a secret reached its output: {report}; it was redacted before storing.")


@runs.command("show")
@click.argument("run_id", type=int)
@json_option
def runs_show(run_id):
    output_run(client().get(f"runs/{run_id}"))


def follow_run(run):
    interactive = sys.stdout.isatty() and not click.get_current_context().obj.get("json")
    started = time.monotonic()
    if interactive:
        with Progress(TextColumn("run #{task.fields[id]}: {task.fields[status]}"), TimeElapsedColumn(), console=console()) as progress:
            task = progress.add_task("run", total=None, id=run["id"], status=run["status"])
            while run["status"] not in RUN_ENDED:
                time.sleep(1)
                run = client().get(f"runs/{run['id']}")
                progress.update(task, status=run["status"])
        return run
    last = None
    while True:
        if run["status"] != last:
            click.echo(f"run {run['id']}: {run['status']} ({time.monotonic() - started:.0f} s)", err=True)
            last = run["status"]
        if run["status"] in RUN_ENDED:
            return run
        time.sleep(1)
        run = client().get(f"runs/{run['id']}")


@runs.command("logs")
@click.argument("run_id", type=int)
@click.option("--follow", is_flag=True, help="Keep printing until the run ends.")
@json_option
def runs_logs(run_id, follow):
    body = client().get(f"runs/{run_id}/log")
    if click.get_current_context().obj["json"]:
        return output(body)
    shown = body["log"]
    click.echo(shown, nl=False)
    while follow and not body["finished"]:
        time.sleep(1)
        body = client().get(f"runs/{run_id}/log")
        log = body["log"]
        # The log is a moving 16 KB tail: print what is new since the last look.
        overlap = next((i for i in range(len(shown)) if log.startswith(shown[i:])), len(shown))
        click.echo(log[len(shown) - overlap :], nl=False)
        shown = log


@runs.command("cancel")
@click.argument("run_id", type=int)
@json_option
def runs_cancel(run_id):
    output(client().post(f"runs/{run_id}/cancel"), ["id", "status"])


@cli.group()
def presets():
    """The harness preset catalog."""


@presets.command("list")
@json_option
def presets_list():
    output(client().get("presets"), ["slug", "name", "compute_type", "env_var_names", "needs_tasks", "local_model"])


@cli.group()
def models():
    """Fine-tuned models."""


@models.command("list")
@json_option
def models_list():
    output(client().get("models"), ["id", "name", "base_model", "adapter_size", "adapter_format"])


@models.command("upload")
@click.argument("name")
@click.option("--base", "base_model", required=True, help="The base model's Hugging Face id.")
@click.option("--adapter", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path), help="The LoRA adapter as a zip.")
@click.option("--description", default="")
@json_option
def models_upload(name, base_model, adapter, description):
    """Upload a fine-tuned model (base id + LoRA adapter zip), with a progress bar."""
    body = MultipartFile({"name": name, "base_model": base_model, "description": description}, "adapter", adapter)
    if sys.stderr.isatty() and not click.get_current_context().obj.get("json"):
        columns = [TextColumn(f"{adapter.name}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn()]
        with Progress(*columns, console=Console(stderr=True)) as progress:
            task = progress.add_task("upload", total=body.size)
            model = client().upload("models", body, lambda n: progress.advance(task, n))
    else:
        model = client().upload("models", body)
    output(model, ["id", "name", "base_model", "adapter_size", "adapter_format"])


def _model_id(name: str) -> int:
    found = [m for m in client().get("models") if m["name"] == name or str(m["id"]) == name]
    if not found:
        raise ApiError(f"No model named {name!r} in this project (see `bv models list`).")
    return found[0]["id"]


@models.command("benchmarks")
@click.argument("name")
@json_option
def models_benchmarks(name):
    """Its scored runs; `base_score` is the base model's in the same run, where the harness reports it."""
    output(client().get(f"models/{_model_id(name)}/benchmarks"), ["run", "harness", "score", "base_score", "date"])


@models.command("run")
@click.argument("name")
@click.option("--harness", "harness_id", required=True, type=int, help="A harness that runs this adapter: GPU for PEFT, CPU with the local model for GGUF.")
@json_option
def models_run(name, harness_id):
    """Benchmark a model: start a run of the harness with MODEL, MODEL_LABEL and ADAPTER_URL set (charged at the harness's price)."""
    output(client().post(f"models/{_model_id(name)}/runs", {"harness": harness_id}), RUN_COLUMNS)


@cli.group()
def judges():
    """LLM judges and their calibration cards."""


@judges.command("list")
@json_option
def judges_list():
    """Each judge of the project: its labels, Cohen's kappa with people, its agreement with itself."""
    cards = client().get("judges")
    if click.get_current_context().obj["json"]:
        output(cards)
        return
    rows = [
        {
            **j,
            "kappa": fmt(j["kappa"], ".3f"),
            "95% CI": interval(j["kappa_ci"]),
            "self kappa": fmt(j["self_consistency"]["kappa"], ".3f"),
            "calibrated": "yes" if j["calibrated"] else f"no ({j['needed']} more labels)",
        }
        for j in cards
    ]
    output(rows, ["deployment", "rubric", "n", "kappa", "95% CI", "weights", "self kappa", "calibrated"])


# Command groups kept in their own modules.
cli.add_command(members.members)
cli.add_command(suites.suites)
cli.add_command(traces.traces)
cli.add_command(datasets.datasets)
cli.add_command(tasks.tasks)
cli.add_command(jobs.jobs)
cli.add_command(monitors.monitors)
cli.add_command(review.review)


def main():
    cli(obj={})
