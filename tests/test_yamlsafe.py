"""YAML a person writes (the suite form, config files, `bv -f`) is read without anchors or aliases, and within a size."""

import html
import json

import pytest

from belvedir_cli import yamlsafe
from evals import actions
from evals.actions import EvalConfigError
from evals.models import Suite
from evals.suites import actions as suites

from .test_cli import bv  # noqa: F401 (the fixture)

# Each line is nine of the one before: 9**6 "lol"s, 3.7 MB of JSON from 300 bytes.
LAUGHS = """- benchmark: gsm8k
  options:
    a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]
    b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
    c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
    d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
    e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
    f: [*e, *e, *e, *e, *e, *e, *e, *e, *e]
"""
REFUSED = "defines an anchor (&a) on line 3: anchors and aliases are not accepted"


@pytest.mark.django_db
def test_it_refuses_the_billion_laughs_on_the_suite_form_and_stores_nothing(owner_client):
    response = owner_client.post("/evals/suites/", {"define": "1", "name": "laughs", "entries": LAUGHS})
    assert response.status_code == 200 and html.escape(REFUSED) in response.content.decode()
    assert not Suite.objects.exists()


@pytest.mark.django_db
def test_an_ordinary_suite_form_still_saves(owner_client):
    entries = "- gsm8k\n- {benchmark: mmlu, sample_limit: 200}\n- {benchmark: mbpp, sample_limit: 100, options: {challenge_tests: false}}\n"
    assert owner_client.post("/evals/suites/", {"define": "1", "name": "mine", "entries": entries}).status_code == 302
    assert [e["benchmark"] for e in Suite.objects.get(name="mine").entries] == ["gsm8k", "mmlu", "mbpp"]


@pytest.mark.parametrize("parse, error", [(suites.parse_config, suites.SuiteError), (actions.parse_config, EvalConfigError)])
def test_the_config_parsers_refuse_aliases_and_read_ordinary_yaml(parse, error):
    with pytest.raises(error, match=r"uses an alias \(\*a\) on line 2"):
        parse("suite: [1]\nbenchmarks: *a\n")
    with pytest.raises(error, match=r"defines an anchor \(&a\) on line 3"):
        parse("benchmarks:\n  - gsm8k\n  - &a mmlu\n")
    if parse is suites.parse_config:
        assert parse("suite: quick\ndeployments: [gpt, 'local model']\nepochs: 3\n") == {"suite": "quick", "deployments": ["gpt", "local model"], "epochs": 3}
    else:
        fields = "benchmark: gsm8k\ndeployment: gpt\nsample_limit: 5\nbenchmark_options: {shots: 8}\n"
        assert parse(fields) == {"benchmark": "gsm8k", "deployment": "gpt", "sample_limit": 5, "benchmark_options": {"shots": 8}}


def test_the_loader_bounds_size_and_depth_before_the_parser_recurses(tmp_path):
    with pytest.raises(yamlsafe.YAMLRefused, match=r"is 262,145 bytes \(limit 262,144\)"):
        yamlsafe.load("#" * (256 * 1024 + 1))
    with pytest.raises(yamlsafe.YAMLRefused, match="nests more than 50 levels deep"):
        yamlsafe.load("[" * 20_000 + "]" * 20_000)  # RecursionError inside PyYAML's composer without the bound
    big = tmp_path / "big.yaml"
    big.write_text("x: 1\n" + "#" * (1 << 20))
    with pytest.raises(yamlsafe.YAMLRefused, match="is over 262,144 bytes"):
        yamlsafe.load_file(big)
    assert yamlsafe.load('{"json": [1, 2]}') == {"json": [1, 2]}  # JSON is YAML


@pytest.mark.django_db(transaction=True)
def test_bv_refuses_a_config_file_with_aliases_and_sends_nothing(bv, tmp_path):  # noqa: F811
    laughs = tmp_path / "laughs.yaml"
    laughs.write_text("benchmarks:\n" + "".join("  " + line + "\n" for line in LAUGHS.splitlines()))
    result = bv("suites", "create", "laughs", "-f", str(laughs))
    assert result.exit_code == 2 and "defines an anchor (&a) on line 4" in result.output, result.output
    assert not Suite.objects.exists()
    plain = tmp_path / "plain.yaml"
    plain.write_text("benchmarks: [gsm8k, {benchmark: mmlu, sample_limit: 20}]\n")
    assert bv("suites", "create", "plain", "-f", str(plain)).exit_code == 0
    assert Suite.objects.get().name == "plain"


@pytest.mark.django_db
def test_a_suite_is_capped_in_entries_and_size(api):
    many = [{"benchmark": "gsm8k"}] * 101
    response = api.post("/api/v1/suites", {"name": "many", "entries": many}, format="json")
    assert response.status_code == 400 and "at most 100 benchmarks, not 101" in json.dumps(response.json())
    heavy = [{"benchmark": "gsm8k", "options": {"x": "lol " * 20_000}}]
    response = api.post("/api/v1/suites", {"name": "heavy", "entries": heavy}, format="json")
    assert response.status_code == 400 and "(limit 65,536): keep their options short" in json.dumps(response.json())
    assert not Suite.objects.exists()
