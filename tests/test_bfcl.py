"""bfcl: its rows per category, its functions as OpenAI tools, BFCL's AST match on hand-made replies, and an eval of it end to end."""

import asyncio
import hashlib
import json
from collections import Counter

import pytest
from click.testing import CliRunner
from django.conf import settings

from belvedir_cli.main import cli
from evals.actions import create_eval
from evals.benchmarks import bfcl
from evals.benchmarks.base import Row, tool_reply
from evals.benchmarks.bfcl_checker import check, standardize, tool_name
from evals.client import completion_of as _parse
from evals.models import Deployment, Eval, Sample
from evals.tasks import run_eval

from .fakes.openai_server import FakeOpenAI

# The fake model servers listen on loopback, which production refuses (the suite's default).
pytestmark = pytest.mark.usefixtures("loopback_deployments")

ROWS = {
    "simple_python": 400,
    "multiple": 200,
    "parallel": 200,
    "parallel_multiple": 200,
    "irrelevance": 240,
    "live_simple": 258,
    "live_multiple": 1053,
    "live_parallel": 16,
    "live_parallel_multiple": 24,
    "live_irrelevance": 884,
    "live_relevance": 16,
}

# Shaped as BFCL's docs are (simple_python_0, with a float and an optional unit).
AREA = {
    "name": "geometry.triangle_area",
    "description": "Calculate the area of a triangle.",
    "parameters": {
        "type": "dict",
        "properties": {
            "base": {"type": "integer", "description": "The base."},
            "height": {"type": "float", "description": "The height."},
            "unit": {"type": "string", "description": "The unit."},
        },
        "required": ["base", "height"],
    },
}
AREA_ANSWER = [{"geometry.triangle_area": {"base": [10], "height": [5.0], "unit": ["units", "cm", ""]}}]
WEATHER = {
    "name": "weather.get",
    "description": "Get the weather of a city.",
    "parameters": {"type": "dict", "properties": {"city": {"type": "string", "description": "The city."}}, "required": ["city"]},
}


def call(name: str, **arguments) -> dict:
    return {"name": name, "arguments": json.dumps(arguments)}


def simple(*calls) -> bool:
    return check("simple_python", [AREA], list(calls), AREA_ANSWER).right


def first_answer(answers: list[dict]) -> list[dict]:
    """The call of each answer with the first possible value of each parameter (optional ones left out)."""

    def first(values):
        return next(build(v) for v in values if v != "")

    def build(value):
        if isinstance(value, dict) and all(isinstance(v, list) for v in value.values()):
            return {key: first(values) for key, values in value.items() if any(v != "" for v in values)}
        return [build(v) for v in value] if isinstance(value, list) else value

    return [
        {"name": tool_name(name), "arguments": json.dumps({p: first(v) for p, v in params.items() if any(x != "" for x in v)})}
        for answer in answers
        for name, params in answer.items()
    ]


def test_the_rows_per_category_with_unique_ids_and_the_version_of_their_files():
    rows = bfcl.BENCHMARK.rows()
    assert Counter(row.categories["category"] for row in rows) == ROWS
    assert len({row.id for row in rows}) == len(rows) == sum(ROWS.values())
    assert Counter(row.categories["group"] for row in rows) == {"non_live": 1240, "live": 2251}
    # Every question scored by AST match has its possible answers; irrelevance rows have none.
    assert all(bool(row["answers"]) == (row.categories["category"] not in bfcl.RELEVANCE) for row in rows)
    recorded = json.loads((settings.BENCHMARK_DATA_DIR / "manifest.json").read_text())["files"]
    for name in bfcl.files():
        assert recorded[name] == hashlib.sha256((settings.BENCHMARK_DATA_DIR / name).read_bytes()).hexdigest()
    assert bfcl.BENCHMARK.version() == "sha256:" + hashlib.sha256("".join(f"{n} {recorded[n]}\n" for n in bfcl.files()).encode()).hexdigest()
    simple = next(row for row in rows if row.id == "simple_python_0")
    assert simple.input.startswith("Find the area of a triangle") and json.loads(simple.reference)[0]["calculate_triangle_area"]["base"] == [10]
    assert bfcl.BENCHMARK.prompt(simple) == [{"role": "user", "content": simple.input}]


def test_a_function_doc_becomes_a_tool_as_bfcls_openai_handler_converts_it():
    doc = {
        "name": "maps.route.plan",
        "description": "Plan a route.",
        "parameters": {
            "type": "dict",
            "properties": {
                "stops": {"type": "array", "items": {"type": "dict", "properties": {"lat": {"type": "float", "description": "Latitude."}}}},
                "origin": {"type": "tuple", "items": {"type": "float"}, "description": "Where from."},
                "options": {"type": "dict", "properties": {"avoid_tolls": {"type": "boolean", "description": "Tolls."}}, "description": "Options."},
                "grid": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}, "description": "A grid."},
                "payload": {"type": "any", "description": "Anything."},
                "speed": {"type": "float", "description": "Speed."},
            },
            "required": ["stops"],
        },
    }
    tool = bfcl.to_tool(doc)
    assert tool["type"] == "function" and doc["parameters"]["type"] == "dict"  # the row's doc is left as it was
    function = tool["function"]
    assert function["name"] == "maps_route_plan" and function["description"] == "Plan a route. Note that the provided function is in Python 3 syntax."
    assert function["parameters"]["type"] == "object" and function["parameters"]["required"] == ["stops"]
    properties = function["parameters"]["properties"]
    assert properties["stops"]["items"] == {
        "type": "object",
        "properties": {"lat": {"type": "number", "format": "float", "description": "Latitude. This is a float type value."}},
    }
    assert properties["origin"] == {"type": "array", "items": {"type": "number"}, "description": "Where from."}
    assert properties["options"]["type"] == "object" and properties["options"]["properties"]["avoid_tolls"]["type"] == "boolean"
    assert properties["grid"]["items"] == {"type": "array", "items": {"type": "integer"}}
    assert properties["payload"]["type"] == "string"
    assert properties["speed"] == {"type": "number", "format": "float", "description": "Speed. This is a float type value."}


def test_a_right_call_matches_in_any_argument_order_with_an_int_for_a_float_and_an_optional_left_out():
    assert simple(call("geometry_triangle_area", base=10, height=5.0, unit="units"))
    assert simple({"name": "geometry_triangle_area", "arguments": '{"unit": "cm", "height": 5.0, "base": 10}'})
    assert simple(call("geometry_triangle_area", base=10, height=5))
    # Strings compared as BFCL does: case, spaces and ",./-_*^" aside.
    assert simple(call("geometry_triangle_area", base=10, height=5, unit="C.M."))


@pytest.mark.parametrize(
    "reply, why",
    [
        (call("weather_get", city="Paris"), "wrong function"),
        # The name as offered: the dotted name was never a tool.
        (call("geometry.triangle_area", base=10, height=5), "the dotted name"),
        (call("geometry_triangle_area", base=10), "a required argument missing"),
        (call("geometry_triangle_area", base=10, height=5, colour="red"), "an unknown argument"),
        (call("geometry_triangle_area", base="10", height=5), "a string for an int"),
        (call("geometry_triangle_area", base=10.0, height=5), "a float for an int"),
        (call("geometry_triangle_area", base=True, height=5), "a bool for an int"),
        (call("geometry_triangle_area", base=11, height=5), "a value not among the answers"),
        (call("geometry_triangle_area", base=10, height=5, unit="inches"), "a string not among the answers"),
        ({"name": "geometry_triangle_area", "arguments": '{"base": 10, "height": '}, "arguments that are not JSON"),
        ({"name": "geometry_triangle_area", "arguments": "[10, 5]"}, "arguments that are no object"),
    ],
)
def test_a_wrong_call_does_not_match(reply, why):
    assert not simple(reply), why


def test_no_call_or_two_calls_do_not_match_a_simple_question():
    assert not simple()
    assert not simple(call("geometry_triangle_area", base=10, height=5), call("geometry_triangle_area", base=10, height=5))


def test_an_optional_argument_left_out_only_where_the_answers_allow_it():
    answers = [{"geometry.triangle_area": {"base": [10], "height": [5.0], "unit": ["units"]}}]
    assert not check("simple_python", [AREA], [call("geometry_triangle_area", base=10, height=5)], answers).right
    assert check("simple_python", [AREA], [call("geometry_triangle_area", base=10, height=5, unit="units")], answers).right


def test_lists_and_dicts_are_compared_with_their_strings_standardized():
    doc = {
        "name": "order",
        "description": "Order items.",
        "parameters": {
            "type": "dict",
            "properties": {
                "items": {"type": "array", "items": {"type": "string"}, "description": "Items."},
                "address": {"type": "dict", "properties": {"city": {"type": "string"}, "zip": {"type": "string"}}, "description": "Where."},
            },
            "required": ["items", "address"],
        },
    }
    answers = [{"order": {"items": [["Apple pie", "tea"]], "address": [{"city": ["New York", "NYC"], "zip": ["10001", ""]}]}}]
    assert check("simple_python", [doc], [call("order", items=["apple-pie", "TEA"], address={"city": "nyc"})], answers).right
    # A list is an ordered answer; a dict's keys must be among the answer's.
    assert not check("simple_python", [doc], [call("order", items=["tea", "apple pie"], address={"city": "NYC"})], answers).right
    assert not check("simple_python", [doc], [call("order", items=["apple pie", "tea"], address={"city": "NYC", "state": "NY"})], answers).right
    assert not check("simple_python", [doc], [call("order", items=["apple pie", "tea"], address={"zip": "10001"})], answers).right
    assert standardize("April 1, 2024") == standardize("april 1 2024") == "april12024"


def test_multiple_needs_the_right_function_among_those_offered():
    answers = [{"weather.get": {"city": ["Paris"]}}]
    assert check("multiple", [AREA, WEATHER], [call("weather_get", city="paris")], answers).right
    assert not check("multiple", [AREA, WEATHER], [call("geometry_triangle_area", base=10, height=5)], answers).right


def test_parallel_calls_match_the_answers_one_to_one_in_any_order():
    answers = [{"weather.get": {"city": ["Paris"]}}, {"weather.get": {"city": ["Rome"]}}, {"geometry.triangle_area": AREA_ANSWER[0]["geometry.triangle_area"]}]
    paris, rome, area = call("weather_get", city="Paris"), call("weather_get", city="Rome"), call("geometry_triangle_area", base=10, height=5)
    functions = [WEATHER, AREA]
    assert check("parallel_multiple", functions, [paris, rome, area], answers).right
    assert check("parallel_multiple", functions, [area, rome, paris], answers).right
    assert not check("parallel_multiple", functions, [paris, area], answers).right
    assert not check("parallel_multiple", functions, [paris, paris, area], answers).right
    assert not check("parallel_multiple", functions, [paris, rome, area, area], answers).right


def test_a_call_fitting_two_answers_still_matches_one_to_one():
    # parallel_96's shape: the first call fits both answers, the second only the first; the official checker's greedy match refuses it.
    doc = {**AREA, "name": "area"}
    answers = [{"area": {"base": [10], "height": [5.0], "unit": ["cm", ""]}}, {"area": {"base": [10], "height": [5.0], "unit": ["m", ""]}}]
    assert check("parallel", [doc], [call("area", base=10, height=5), call("area", base=10, height=5, unit="cm")], answers).right


def test_irrelevance_is_right_without_a_call_and_relevance_with_one():
    prose = []
    assert check("irrelevance", [WEATHER], prose, None).right
    assert not check("irrelevance", [WEATHER], [call("weather_get", city="Paris")], None).right
    assert not check("live_irrelevance", [WEATHER], [call("weather_get")], None).right
    # As the official checker decodes it: a call whose arguments are not a JSON object is no call.
    assert check("irrelevance", [WEATHER], [{"name": "weather_get", "arguments": "{city: Paris"}], None).right
    assert check("live_relevance", [WEATHER], [call("weather_get", city="Paris")], None).right
    assert not check("live_relevance", [WEATHER], prose, None).right


@pytest.mark.parametrize("category", ["simple_python", "multiple", "parallel"])
def test_every_question_is_matched_by_its_first_possible_answer_and_not_without_a_required_argument(category):
    rows = [row for row in bfcl.BENCHMARK.rows() if row.categories["category"] == category]
    for row in rows:
        calls = first_answer(row["answers"])
        assert check(category, row["functions"], calls, row["answers"]).right, row.id
        if category == "parallel":
            assert check(category, row["functions"], calls[::-1], row["answers"]).right, row.id
        doc = next(f for f in row["functions"] if tool_name(f["name"]) == calls[0]["name"])
        if required := doc["parameters"]["required"]:
            arguments = json.loads(calls[0]["arguments"])
            arguments.pop(required[0])
            missing = [{**calls[0], "arguments": json.dumps(arguments)}, *calls[1:]]
            assert not check(category, row["functions"], missing, row["answers"]).right, row.id


def score(row: Row, content: str, calls: list[dict]):
    return asyncio.run(bfcl.BENCHMARK.score(row, tool_reply(content, calls)))


def test_score_reads_the_stored_reply_and_says_what_was_called():
    row = next(row for row in bfcl.BENCHMARK.rows() if row.id == "simple_python_1")  # math.factorial(number=5)
    right = score(row, "", [call("math_factorial", number=5)])
    assert (right.value, right.extracted, right.detail) == (1.0, 'math_factorial({"number": 5})', {})
    prose = score(row, "The factorial of 5 is 120.", [])
    assert prose.value == 0.0 and prose.extracted == "no tool call" and "Wrong number of calls" in prose.detail["reason"]
    # Prose that looks like a call is no call: only the reply's tool_calls count.
    assert score(row, '[{"name": "math_factorial", "arguments": "{\\"number\\": 5}"}]', []).value == 0.0
    broken = score(row, "", [{"name": "math_factorial", "arguments": '{"number": 5'}])
    assert broken.value == 0.0 and "not a JSON object" in broken.detail["reason"]


def test_the_engine_keeps_a_chat_replys_tool_calls():
    deployment = Deployment(api_style=Deployment.Style.CHAT)
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "math_factorial", "arguments": '{"number": 5}'}},
            # Some servers send the arguments parsed: kept as JSON text.
            {"id": "call_2", "type": "function", "function": {"name": "math_hypot", "arguments": {"x": 4, "y": 5}}},
        ],
    }
    parsed = _parse(json.dumps({"choices": [{"message": message}], "usage": {}}).encode(), deployment, 1.0)
    assert parsed.text == "" and parsed.tool_calls == [
        {"name": "math_factorial", "arguments": '{"number": 5}'},
        {"name": "math_hypot", "arguments": '{"x":4,"y":5}'},
    ]
    assert _parse(json.dumps({"choices": [{"message": {"content": "hi"}}]}).encode(), deployment, 1.0).tool_calls == []


# End to end: an eval against the fake server, and one refused on a completions deployment.

ANSWERED = ("simple_python", "parallel")


def reply_for(index):
    def reply(body):
        row = index[json.dumps([body["messages"], [tool["function"]["name"] for tool in body.get("tools", [])]])]
        if row.categories["category"] in ANSWERED:
            # In the reverse order of the answers: parallel calls match in any order.
            calls = first_answer(row["answers"])[::-1]
            return {"role": "assistant", "content": None, "tool_calls": [{"id": f"call_{i}", "type": "function", "function": c} for i, c in enumerate(calls)]}
        return {"role": "assistant", "content": "I cannot help with that."}

    return reply


@pytest.fixture
def fake():
    index = {}
    for row in bfcl.BENCHMARK.rows():
        index[json.dumps([bfcl.BENCHMARK.prompt(row), [tool["function"]["name"] for tool in bfcl.BENCHMARK.request_fields(row).get("tools", [])]])] = row
    with FakeOpenAI(reply=reply_for(index)) as server:
        yield server


@pytest.mark.django_db(transaction=True)
def test_a_bfcl_eval_offers_the_tools_and_scores_each_category(api, project, owner, fake):
    deployment = Deployment.objects.create(project=project, name="fake", base_url=fake.url, model="fake-model")
    ev = create_eval(project, owner, deployment=deployment, benchmark="bfcl", sample_limit=150, seed=5)
    run_eval(ev.pk)
    body = api.get(f"/api/v1/evals/{ev.pk}").json()
    assert body["status"] == "succeeded" and body["done_count"] == 150 and body["error_count"] == 0
    sent = [request["body"] for request in fake.requests]
    assert len(sent) == 150 and all(request["tools"] and request["temperature"] == 0 for request in sent)
    assert all("." not in tool["function"]["name"] and tool["function"]["parameters"]["type"] == "object" for r in sent for tool in r["tools"])
    assert list(body["categories"]) == ["category", "group"]
    scores = {entry["name"]: entry for entry in body["categories"]["category"]}
    # Answered right where scripted; prose elsewhere, which is right only where no call was wanted.
    right = {*ANSWERED, "irrelevance", "live_irrelevance"}
    assert {"simple_python", "parallel", "irrelevance", "multiple", "live_multiple"} <= set(scores)
    assert {name: entry["score"] for name, entry in scores.items()} == {name: float(name in right) for name in scores}
    assert sum(entry["n"] for entry in scores.values()) == 150 and all(entry["score_ci"] for entry in scores.values())
    groups = {entry["name"]: entry for entry in body["categories"]["group"]}
    assert set(groups) == {"live", "non_live"} and groups["live"]["n"] + groups["non_live"]["n"] == 150
    parallel = Sample.objects.filter(eval=ev, category__category="parallel").first()
    stored = json.loads(parallel.output)
    assert stored["content"] == "" and len(stored["tool_calls"]) >= 2 and parallel.score == 1.0
    assert parallel.extracted.startswith(stored["tool_calls"][0]["name"] + "(")
    prose = Sample.objects.filter(eval=ev, category__category="multiple").first()
    assert json.loads(prose.output) == {"tool_calls": [], "content": "I cannot help with that."} and prose.extracted == "no tool call"


@pytest.fixture
def completions_deployment(project):
    # Never called: the eval is refused before a request could be made.
    return Deployment.objects.create(project=project, name="legacy", base_url="http://127.0.0.1:9/v1", model="m", api_style=Deployment.Style.COMPLETIONS)


def test_a_bfcl_eval_on_a_completions_deployment_is_refused_by_the_api_and_the_page(api, owner_client, completions_deployment):
    response = api.post("/api/v1/evals", {"benchmark": "bfcl", "deployment": "legacy"}, format="json")
    assert response.status_code == 400
    assert response.json()["detail"].startswith("bfcl calls tools, which needs a chat deployment: legacy uses the completions API")
    posted = owner_client.post("/evals/new/benchmark/", {"benchmark": "bfcl", "deployment": completions_deployment.pk})
    assert posted.status_code == 200 and "bfcl calls tools, which needs a chat deployment" in posted.content.decode()
    assert not Eval.objects.exists()
    # Other benchmarks still run on it.
    assert api.post("/api/v1/evals", {"benchmark": "gsm8k", "deployment": "legacy", "sample_limit": 1}, format="json").status_code == 201


@pytest.mark.django_db(transaction=True)
def test_bv_evals_run_refuses_bfcl_on_a_completions_deployment(live_server, api_key, completions_deployment, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    env = {"BELVEDIR_API_KEY": api_key, "BELVEDIR_BASE_URL": live_server.url}
    refused = CliRunner().invoke(cli, ["evals", "run", "bfcl", "--deployment", "legacy"], env=env, obj={})
    assert refused.exit_code != 0 and "bfcl calls tools, which needs a chat deployment" in refused.output
    assert not Eval.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_bfcl_eval_whose_deployment_became_completions_fails_with_the_reason(project, owner, fake):
    deployment = Deployment.objects.create(project=project, name="fake", base_url=fake.url, model="fake-model")
    ev = create_eval(project, owner, deployment=deployment, benchmark="bfcl", sample_limit=3)
    Deployment.objects.filter(pk=deployment.pk).update(api_style=Deployment.Style.COMPLETIONS)
    run_eval(ev.pk)
    ev.refresh_from_db()
    assert ev.status == "failed" and "needs a chat deployment" in ev.status_message and ev.done_count == 0
    assert fake.requests == []
