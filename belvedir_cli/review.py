"""`bv review`: review queues, where they stand, how far people agree, and their labels."""

import json

import click

from .terminal import client, id_by_name, json_option, output, read_config_file


def _queue_id(name_or_id: str) -> int:
    return id_by_name("review-queues", name_or_id, "No review queue named {name}: `bv review list` shows them.")


@click.group()
def review():
    """Review queues: people label sessions, samples and trials against a rubric; their labels calibrate the judges."""


@review.command("list")
@json_option
def review_list():
    rows = [{**q, **{k: q["progress"][k] for k in ("items", "done", "labels")}} for q in client().all("review-queues")]
    output(rows, ["id", "name", "items", "done", "labels", "overlap", "judge_key"])


@review.command("create")
@click.option(
    "-f",
    "config_file",
    type=click.Path(dir_okay=False),
    required=True,
    help="YAML: name, overlap, blind, scores (the rubric), instructions; or judge and target_width.",
)
@json_option
def review_create(config_file):
    """Make a queue from a YAML file (a `judge` key makes one that calibrates that judge)."""
    created = client().post("review-queues", read_config_file(config_file))
    output({**created, **created["progress"]}, ["id", "name", "items", "overlap", "judge_key", "target_width"])


@review.command("show")
@click.argument("queue")
@json_option
def review_show(queue):
    """Progress per queue and per reviewer, agreement between people, and the judge's κ for a calibrating queue."""
    pk = _queue_id(queue)
    found = client().get(f"review-queues/{pk}/progress")
    agreed = client().get(f"review-queues/{pk}/agreement")
    if click.get_current_context().obj.get("json"):
        output({"progress": found, "agreement": agreed})
        return
    output(found, ["items", "done", "labels", "labels_wanted", "stop_reason"])
    output(found["reviewers"], ["reviewer", "labels", "skips", "median_seconds"], title="Reviewers")
    rows = [
        {
            "score": s["name"],
            "alpha": s["alpha"],
            "alpha_ci": s["alpha_ci"],
            "pairs": "; ".join(f"{p['a']}·{p['b']} κ {p['kappa']:.2f} (n {p['n']})" for p in s["pairs"] if p["kappa"] is not None),
        }
        for s in agreed["scores"]
    ]
    output(rows, ["score", "alpha", "alpha_ci", "pairs"], title="Agreement")
    if "judge" in agreed:
        output(agreed["judge"], ["key", "kappa", "low", "high", "width", "n", "target_width"], title="The judge against people")


@review.command("eval")
@click.argument("queue")
@click.option("--score", required=True, help="A numeric or boolean score of the rubric.")
@click.option("--eval", "eval_id", type=int, help="The eval whose samples are graded, when the queue holds several's.")
@json_option
def review_eval(queue, score, eval_id):
    """A human-graded eval of the queue's labels, on the rows of the eval they label: compare it with `bv evals compare`."""
    made = client().post(f"review-queues/{_queue_id(queue)}/eval", {"score": score, **({"eval": eval_id} if eval_id else {})})
    output(made, ["eval", "score", "rows", "url"])


@review.command("export")
@click.argument("queue")
@click.option("--dataset", is_flag=True, help="Make the labels the next version of the queue's dataset instead of printing them.")
def review_export(queue, dataset):
    """The labels as JSON lines (one labelled item a line, with every label and the consensus), or a dataset version."""
    pk = _queue_id(queue)
    if dataset:
        made = client().post(f"review-queues/{pk}/dataset", {})
        click.echo(f"dataset {made['dataset']} version {made['version']}: {made['rows']} rows")
        return
    for entry in client().get(f"review-queues/{pk}/labels")["items"]:
        click.echo(json.dumps(entry, ensure_ascii=False, sort_keys=True))
