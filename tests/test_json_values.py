"""Hostile JSON values get a 400 naming what is wrong, never a 500; what is accepted comes back as it was sent."""

import itertools
import json

import pytest
from django.db import DataError, transaction
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from belvedir.core import jsonvalues
from evals.models import Deployment, Suite
from harnesses.models import Harness
from traces.evaluators import EvaluatorError, check_scorer, scorer_of_kind

pytestmark = pytest.mark.django_db

DEEP = '{"a": ' * 5000 + "1" + "}" * 5000
DEEPER = "[" * 100_000 + "]" * 100_000


def post(api, url, body, method="post"):
    return getattr(api, method)(url, data=body if isinstance(body, str) else json.dumps(body), content_type="application/json")


def refused(response, *words):
    assert response.status_code == 400, (response.status_code, response.content[:300])
    text = response.content.decode()
    for word in words:
        assert word in text, text
    return text


def trajectory(name="t", **body):
    return {"name": name, "kind": "trajectory", "config": {"max_steps": 3}, **body}


# -- the check itself --------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ({"a": float("nan")}, "finite"),
        ([1, float("inf")], "finite"),
        ({"seed": 10**30}, "64-bit"),
        ({"k\x00": 1}, "NUL"),
        ({"k": ["a\x00b"]}, "NUL"),
        ({"k": "\ud800"}, "surrogate"),
        ({1: "a"}, "not text"),
        ({"d": {1, 2}}, "not a JSON value"),
        ({"a": "x" * 100_001}, "larger than 100,000"),
    ],
)
def test_the_check_refuses_what_cannot_be_stored_and_says_where(value, says):
    with pytest.raises(jsonvalues.JsonValueError, match=says) as caught:
        jsonvalues.check(value, "options")
    assert caught.value.message.startswith("options")


def test_the_check_walks_5000_levels_without_recursing():
    with pytest.raises(jsonvalues.JsonValueError, match="deeper than 32"):
        jsonvalues.check(nested(5000, 1))
    with pytest.raises(jsonvalues.JsonValueError, match="deeper than 32"):
        jsonvalues.check(nested(33, 1))
    assert jsonvalues.check(nested(32, 1)) == nested(32, 1)  # 32 levels below the top are allowed


@pytest.mark.parametrize("text", [DEEP, DEEPER, "[NaN]", "[Infinity]", "[-Infinity]", "[1e999]", '{"a": 1' + "0" * 40 + "}"])
def test_loads_refuses_with_its_own_error_never_a_recursion_error(text):
    with pytest.raises(jsonvalues.JsonValueError):
        jsonvalues.loads(text)


# -- the API ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ('{"max_cost": NaN}', "NaN"),
        ('{"max_cost": 1e999}', "finite"),
        ('{"max_cost": "nan"}', "from 0 to 1,000,000"),  # text: past the parser, float() reads it
        ('{"max_cost": "inf"}', "from 0 to 1,000,000"),
        ('{"max_cost": -1}', "from 0 to 1,000,000"),
        ('{"max_steps": -1}', "from 0 to 1,000,000"),
        ('{"max_tool_errors": 10000000}', "from 0 to 1,000,000"),
        ('{"max_steps": 1000000000000000000000000000000}', "64-bit"),
        ('{"max_steps": "1000000000000000000000000000000"}', "from 0 to 1,000,000"),
        ('{"max_steps": true}', "whole numbers"),
    ],
)
def test_a_trajectory_evaluators_limits_are_finite_and_not_negative(api, config, says):
    refused(post(api, "/api/v1/evaluators", '{"name": "t", "kind": "trajectory", "config": ' + config + "}"), says)
    assert check_scorer(scorer_of_kind("trajectory", {"max_steps": 0, "max_cost": "2.5"}), None, None)["options"] == {"max_steps": 0, "max_cost": 2.5}


def test_a_seed_beyond_its_column_is_refused_on_evaluators_and_evals(api, project):
    Deployment.objects.create(project=project, name="dep", base_url="https://api.example.com/v1", model="m")
    refused(post(api, "/api/v1/evaluators", trajectory(seed=10**30)), "seed", "64-bit")
    refused(post(api, "/api/v1/evaluators", trajectory(seed=2**63)), "seed")
    refused(post(api, "/api/v1/evals", {"benchmark": "gsm8k", "deployment": "dep", "seed": 10**30}), "seed", "64-bit")
    assert post(api, "/api/v1/evaluators", trajectory(seed=2**63 - 1)).json()["seed"] == 2**63 - 1


@pytest.mark.parametrize(
    ("url", "body", "where"),
    [
        ("/api/v1/evaluators", {"name": "t", "kind": "code", "config": {"check": "contains", "expected": "a\x00"}}, "body.config.expected"),
        ("/api/v1/evaluators", trajectory(metadata={"k\x00": "v"}), "body.metadata"),
        ("/api/v1/evaluators", {"name": "t", "kind": "code", "config": {"check": "contains", "expected": "\ud800"}}, "surrogate"),
        ("/api/v1/suites", {"name": "s", "entries": [{"benchmark": "gsm8k", "options": {"a\x00": 1}}]}, "body.entries[0].options"),
        ("/api/v1/datasets/rows-from-traces", {"new_dataset": "d", "filters": {"user": ["x\x00"]}}, "body.filters.user[0]"),
        ("/api/v1/evals", {"benchmark": "gsm8k", "deployment": "dep", "generation": {"stop\x00": 1}}, "body.generation"),
    ],
)
def test_nul_in_a_json_key_or_value_is_refused_naming_where(api, project, url, body, where):
    Deployment.objects.create(project=project, name="dep", base_url="https://api.example.com/v1", model="m")
    refused(post(api, url, body), where)


@pytest.mark.parametrize(
    ("url", "prefix", "suffix"),
    [
        ("/api/v1/evaluators", '{"name": "t", "kind": "trajectory", "config": ', "}"),
        ("/api/v1/suites", '{"name": "s", "entries": [{"benchmark": "gsm8k", "options": ', "}]}"),
        ("/api/v1/evals", '{"benchmark": "gsm8k", "deployment": "dep", "benchmark_options": ', "}"),
    ],
)
@pytest.mark.parametrize("depth", [40, 900, 5000])
def test_options_nested_thousands_deep_are_refused(api, project, url, prefix, suffix, depth):
    Deployment.objects.create(project=project, name="dep", base_url="https://api.example.com/v1", model="m")
    refused(post(api, url, prefix + '{"a": ' * depth + "1" + "}" * depth + suffix), "nested deeper than 32")


def test_domain_functions_check_what_the_dashboard_sends_too(project, owner):
    from evals.suites.actions import SuiteError, save_suite

    with pytest.raises(SuiteError, match="NUL"):
        save_suite(project, owner, "s", [{"benchmark": "gsm8k", "options": {"a": "\x00"}}])
    with pytest.raises(SuiteError, match="finite"):
        save_suite(project, owner, "s", [{"benchmark": "gsm8k", "options": {"a": float("inf")}}])
    with pytest.raises(EvaluatorError, match="NUL"):
        check_scorer(scorer_of_kind("code", {"check": "contains", "expected": "a\x00"}), None, None)


@pytest.mark.parametrize("body", ["[1, 2]", '"x"', "null"])
@pytest.mark.parametrize(
    "url",
    ["/api/v1/secrets", "/api/v1/evaluators", "/api/v1/suites", "/api/v1/evals", "/api/v1/datasets", "/api/v1/harnesses", "/api/v1/deployments"],
)
def test_a_body_of_the_wrong_shape_is_a_400_everywhere(api, url, body):
    refused(post(api, url, body), "The body must be a JSON object")


def test_a_harness_patch_with_an_env_var_without_a_name_is_refused(api, project):
    harness = Harness.objects.create(project=project, name="h", repo_url="https://github.com/a/b", install_command="true", run_command="true")
    for var in ({"value": "x"}, {"name": "A"}, {}):
        refused(post(api, f"/api/v1/harnesses/{harness.pk}", {"env_vars": [var]}, method="patch"), "required")
    response = post(api, f"/api/v1/harnesses/{harness.pk}", {"env_vars": [{"name": "A", "value": "1"}]}, method="patch")
    assert response.status_code == 200
    assert response.json()["env_vars"] == [{"name": "A", "value": "1", "secret": False}]


# -- fuzzed --------------------------------------------------------------------

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
any_text = st.text(st.characters(exclude_categories=()), max_size=12)  # NUL and lone surrogates included
numbers = st.integers(min_value=-(2**70), max_value=2**70) | st.floats()  # NaN and infinities included
scalars = st.none() | st.booleans() | numbers | any_text


def nested(depth, leaf):
    for key in range(depth):
        leaf = {str(key): leaf} if key % 2 else [leaf]
    return leaf


json_values = st.recursive(scalars, lambda children: st.lists(children, max_size=4) | st.dictionaries(any_text, children, max_size=4), max_leaves=25)
deep_values = st.builds(nested, st.integers(min_value=25, max_value=40), scalars)
options = st.dictionaries(any_text, json_values | deep_values, max_size=4)


def same(sent, got):
    """JSON equality, numbers by their float (jsonb writes 1e20 as 100000000000000000000)."""
    if isinstance(sent, dict):
        return isinstance(got, dict) and sent.keys() == got.keys() and all(same(v, got[k]) for k, v in sent.items())
    if isinstance(sent, list):
        return isinstance(got, list) and len(sent) == len(got) and all(map(same, sent, got))
    if isinstance(sent, int | float) and not isinstance(sent, bool):
        return isinstance(got, int | float) and not isinstance(got, bool) and float(sent) == float(got)
    return sent == got


def expected(value) -> bool:
    """What may be stored, by the rules written out here, independently of belvedir/core/jsonvalues (the code under
    test): finite numbers, integers within a bigint, text keys, no NUL or lone surrogate in any text, at most
    MAX_DEPTH levels and MAX_SIZE characters (numbers, booleans and nulls counted as jsonvalues documents them)."""
    size, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > 32:
            return False
        if isinstance(item, str):
            if "\x00" in item or any(0xD800 <= ord(c) <= 0xDFFF for c in item):
                return False
            size += len(item)
        elif isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str) or "\x00" in key or any(0xD800 <= ord(c) <= 0xDFFF for c in key):
                    return False
                size += len(key)
                stack.append((child, depth + 1))
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, bool) or item is None:
            size += 1
        elif isinstance(item, int):
            if not -(2**63) <= item <= 2**63 - 1:
                return False
            size += 8
        elif isinstance(item, float):
            if item != item or item in (float("inf"), float("-inf")):
                return False
            size += 8
        else:
            return False
    return size <= 100_000


def storable(value) -> bool:
    """The code under test's answer."""
    try:
        jsonvalues.check(value)
    except jsonvalues.JsonValueError:
        return False
    return True


@FUZZ
@given(json_values | deep_values)
@example(float("nan"))
@example({"a\x00": 1})
@example("\ud800")
@example(2**63)
@example(nested(5000, 1))
@example(nested(32, 1))
@example(nested(33, 1))
def test_the_check_accepts_exactly_what_json_and_postgresql_keep(project, value):
    value = {"v": value}  # a JSON null at the top would be SQL's NULL
    assert storable(value) == expected(value)  # both ways: a check refusing every float fails here too
    if storable(value):
        text = json.dumps(value, allow_nan=False)  # raises on NaN or infinity: the check let one through
        assert same(value, json.loads(text))
        row = Suite.objects.create(project=project, name=f"s{next(_names)}", entries=value)
        assert same(value, Suite.objects.get(pk=row.pk).entries)  # PostgreSQL refuses NUL and lone surrogates: a DataError here


@pytest.mark.parametrize("value", [{"v": "a\x00b"}, {"v": "\ud800"}, {"a\x00": 1}], ids=["NUL", "lone surrogate", "NUL key"])
def test_postgresql_itself_refuses_what_the_check_refuses(project, value):
    """The refusals are PostgreSQL's own rules, not the check's taste: storing one unchecked is a DataError."""
    assert not storable(value) and not expected(value)
    with pytest.raises(DataError), transaction.atomic():
        Suite.objects.create(project=project, name=f"s{next(_names)}", entries=value)


_names = itertools.count()


@FUZZ
@given(options)
@example({"deep": nested(29, 1)})
@example({"deep": nested(30, 1)})
def test_suite_options_fuzzed_are_kept_exactly_or_refused_never_a_500(api, value):
    body = {"name": f"s{next(_names)}", "entries": [{"benchmark": "gsm8k", "options": value}]}
    response = post(api, "/api/v1/suites", json.dumps(body))  # NaN and Infinity spelled as Python writes them
    assert storable(body) == expected(body)
    if expected(body):
        assert response.status_code == 201, response.content[:300]
        assert same(value, response.json()["entries"][0]["options"])
        assert same(value, api.get(f"/api/v1/suites/{response.json()['id']}").json()["entries"][0]["options"])
    else:
        assert response.status_code == 400, response.content[:300]


@FUZZ
@given(json_values | deep_values, json_values)
def test_evaluator_configs_fuzzed_are_kept_exactly_or_refused_never_a_500(api, wanted, extra):
    body = {"name": f"e{next(_names)}", "kind": "code", "config": {"check": "contains", "expected": wanted, "extra": extra}}
    response = post(api, "/api/v1/evaluators", json.dumps(body))
    assert storable(body) == expected(body)
    if expected(body) and str(wanted).strip():
        assert response.status_code == 201, response.content[:300]
        assert same({"check": "contains", "expected": wanted}, response.json()["config"])
        assert same(wanted, api.get(f"/api/v1/evaluators/{response.json()['id']}").json()["config"]["expected"])
    else:
        assert response.status_code == 400, response.content[:300]
