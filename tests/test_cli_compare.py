"""`bv evals compare` and its regression gate against a live server: exit 1 only when B is significantly worse."""

import json

import pytest

from .eval_pairs import ROWS, PairedEvals, questions
from .test_cli import bv  # noqa: F401  (the fixture: bv against a live server)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("loopback_deployments")]


@pytest.fixture
def evals(project, owner):
    asked = questions()
    with PairedEvals(project, owner) as pairs:
        good = pairs.run("good")
        # "close" is served by another engine, as its Server header says (the others carry aiohttp's own).
        yield {"good": good, "bad": pairs.run("bad", wrong=asked[:15]), "close": pairs.run("close", wrong=asked[:2], server="sglang/0.4.1")}


def test_the_gate_fails_only_on_a_significant_regression(bv, evals):
    good, bad, close = (str(evals[name].pk) for name in ("good", "bad", "close"))
    worse = bv("evals", "compare", good, bad, "--fail-if-worse")
    assert worse.exit_code == 1, worse.output
    assert "Verdict: worse" in worse.output and "right->wrong 15, wrong->right 0" in worse.output
    better = bv("evals", "compare", bad, good, "--fail-if-worse")
    assert better.exit_code == 0 and "Verdict: better" in better.output
    undecided = bv("evals", "compare", good, close, "--fail-if-worse")
    assert undecided.exit_code == 0 and "Verdict: not decisive" in undecided.output and "paired rows would decide" in undecided.output
    # The stacks differ only there: said beside the verdict, and not where they are the same.
    assert "Warning: Served by different stacks (Server header Python/" in undecided.output and "against sglang/0.4.1)" in undecided.output
    assert "Served by different stacks" not in worse.output
    assert bv("evals", "compare", good, bad).exit_code == 0  # without the flag it only reports


def test_compare_as_json_and_same_rows_from_the_cli(bv, evals, project):
    body = json.loads(bv("evals", "compare", str(evals["good"].pk), str(evals["bad"].pk), "--json").stdout)
    assert body["n"] == ROWS and body["verdict"] == "worse" and len(body["flipped"]) == 15
    assert body["a"]["score_ci"][0] < 1 and body["b"]["score_ci"][1] > 25 / 40
    created = bv("evals", "run", "--deployment", "close", "--same-rows-as", str(evals["good"].pk), "--json")
    assert created.exit_code == 0, created.output
    rerun = json.loads(created.stdout)
    assert (rerun["benchmark"], rerun["seed"], rerun["same_rows_as"]) == ("gsm8k", evals["good"].seed, evals["good"].pk)
    shown = bv("evals", "show", str(evals["bad"].pk))
    low, high = evals["bad"].score_low, evals["bad"].score_high
    assert f"95% CI: {low:.3f}–{high:.3f}" in shown.output
    assert "Server header sglang/0.4.1" in bv("evals", "show", str(evals["close"].pk)).output


def test_evals_on_different_rows_are_an_error_not_a_pass(bv, evals, project, owner):
    from evals.actions import create_eval

    other = create_eval(project, owner, deployment=evals["good"].deployment, benchmark="gsm8k", sample_limit=5)
    refused = bv("evals", "compare", str(evals["good"].pk), str(other.pk), "--fail-if-worse")
    assert refused.exit_code == 2 and "never paired" in refused.output
