"""Messages, tokens and association properties from every generation of GenAI spans.

Each table runs span samples kept in tests/fixtures/spans/ (each file says
whether it was recorded from a real client or written from the convention)
through the OTLP/JSON parser and the extractor, as ingest does.
"""

import json
from pathlib import Path

import pytest

from traces import otlp
from traces.extract import extract

FIXTURES = Path(__file__).parent / "fixtures" / "spans"


def extracted(fixture: str) -> list[dict]:
    spans = json.loads((FIXTURES / f"{fixture}.json").read_text())["spans"]
    body = json.dumps({"resourceSpans": [{"scopeSpans": [{"scope": {"name": "fixture"}, "spans": spans}]}]}).encode()
    parsed = otlp.parse(body, "application/json")
    assert parsed.rejected == 0, parsed.reasons
    return [extract(span) for span in parsed.spans]


def user(text):
    return {"role": "user", "content": text}


def system(text):
    return {"role": "system", "content": text}


def call(call_id, name, arguments):
    return {"id": call_id, "name": name, "arguments": arguments}


def check(row, prompt, completion, tokens):
    assert row["prompt"] == prompt
    assert row["completion"] == completion
    assert (row["input_tokens"], row["output_tokens"]) == tokens


# -- gen_ai.prompt.N.* / gen_ai.completion.N.* -------------------------------------

INDEXED = [
    (
        0,
        [system("You are a travel agent."), user("Find a hotel in Porto")],
        [{"role": "assistant", "finish_reason": "tool_calls", "content": "", "tool_calls": [call("call_h1", "find_hotel", '{"city": "Porto"}')]}],
        (31, 12),
    ),
    (
        1,
        [
            user("Find a hotel in Porto"),
            {"role": "assistant", "content": "", "tool_calls": [call("call_h1", "find_hotel", '{"city": "Porto"}')]},
            {"role": "tool", "tool_call_id": "call_h1", "content": "Hotel Infante, 120 EUR"},
            user("Book it\n[image_url]"),  # content blocks serialised as JSON: text kept, an image named
        ],
        [{"role": "assistant", "content": "Booked Hotel Infante."}],
        (40, 6),  # a doubleValue and a string
    ),
    (2, [user("Why is the sky blue?")], [{"role": "assistant", "content": "Rayleigh scattering."}], (9, 4)),
]


# Recorded: OpenLLMetry 0.62's ollama instrumentation, which still writes this generation.
RECORDED_INDEXED = [
    (
        0,
        [system("You answer weather questions."), user("What is the weather in Lisbon?")],
        [{"role": "assistant", "content": ""}],  # it records no tool calls of a completion
        (24, 8),
    ),
    (
        1,
        [
            system("You answer weather questions."),
            user("What is the weather in Lisbon?"),
            {"role": "assistant", "content": "", "tool_calls": [call("", "get_weather", '{"city": "Lisbon"}')]},
            {"role": "tool", "content": "Sunny, 24 °C"},
        ],
        [{"role": "assistant", "content": "It is sunny in Lisbon."}],
        (48, 8),
    ),
]


@pytest.mark.parametrize(
    "fixture, index, prompt, completion, tokens",
    [("gen_ai_prompt_indexed", *row) for row in INDEXED] + [("ollama_0_62", *row) for row in RECORDED_INDEXED],
)
def test_indexed_gen_ai_prompt_and_completion(fixture, index, prompt, completion, tokens):
    row = extracted(fixture)[index]
    check(row, prompt, completion, tokens)
    assert not [k for k in row["attributes"] if k.startswith(("gen_ai.prompt.", "gen_ai.completion."))]


# -- gen_ai.input.messages / gen_ai.output.messages / gen_ai.system_instructions ----

PARTS = [
    (
        "openllmetry_0_62",
        0,
        [system("You answer weather questions."), user("What is the weather in Lisbon?")],
        [{"role": "assistant", "content": "", "tool_calls": [call("call_w1", "get_weather", '{"city":"Lisbon"}')], "finish_reason": "tool_call"}],
        (6, 0),
    ),
    (
        "openllmetry_0_62",
        2,
        [
            system("You answer weather questions."),
            user("What is the weather in Lisbon?"),
            {"role": "assistant", "content": "", "tool_calls": [call("call_w1", "get_weather", '{"city":"Lisbon"}')]},
            {"role": "tool", "tool_call_id": "call_w1", "content": "Sunny, 24 °C in Lisbon"},
        ],
        [{"role": "assistant", "content": "It is sunny in Lisbon, 24 °C.", "finish_reason": "stop"}],
        (5, 7),
    ),
    (
        "otel_js_0_223",
        0,
        [system("You book flights."), user("Book me a flight to Lisbon")],
        [{"role": "assistant", "content": "", "tool_calls": [call("call_1", "search_flights", '{"to":"LIS"}')], "finish_reason": "tool_call"}],
        (21, 9),
    ),
    (
        "gen_ai_messages_parts",
        0,
        [
            system("You are a math tutor."),
            user("Plot y = x^2\n[uri image]"),
            {"role": "assistant", "content": "", "tool_calls": [call("c1", "plot", '{"expr":"x^2"}')]},
            {"role": "tool", "tool_call_id": "c1", "content": '{"png":"plot-1.png"}'},
        ],
        [{"role": "assistant", "content": "Here is the parabola.", "reasoning": "The plot is ready.", "finish_reason": "stop"}],
        (120, 35),
    ),
    # Messages sent as OTLP arrays of kvlists instead of JSON text; tokens as strings.
    ("gen_ai_messages_parts", 1, [user("Hi")], [{"role": "assistant", "content": "Hello!", "finish_reason": "stop"}], (3, 2)),
]


@pytest.mark.parametrize("fixture, index, prompt, completion, tokens", PARTS)
def test_input_and_output_messages_made_of_parts(fixture, index, prompt, completion, tokens):
    row = extracted(fixture)[index]
    check(row, prompt, completion, tokens)
    assert not {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions"} & set(row["attributes"])
    assert row["attributes"]["gen_ai.request.model"]


# -- span events ---------------------------------------------------------------------

EVENTS = [
    (
        0,
        [
            system("You are a concise assistant."),
            user("What's the weather in Paris?"),
            {"role": "assistant", "content": "", "tool_calls": [call("call_p1", "get_weather", '{"location": "Paris"}')]},
            {"role": "tool", "content": "rainy, 57°F", "tool_call_id": "call_p1"},
        ],
        [{"role": "assistant", "content": "It's rainy and 57°F in Paris.", "finish_reason": "stop"}],
        (52, 18),
    ),
    (
        1,
        [user("Look up order 42")],
        # gen_ai.choice with its message as JSON text and the tool calls beside it.
        [{"role": "assistant", "content": "", "tool_calls": [call("toolu_1", "lookup_order", '{"id":42}')], "finish_reason": "tool_use"}],
        (30, 11),
    ),
    (2, [user("Summarise this ticket")], [{"role": "assistant", "content": "The printer is out of toner."}], (None, None)),
    (
        3,
        [system("Think step by step."), user("Is 91 prime?")],
        [{"role": "assistant", "content": "No: 7 x 13.", "reasoning": "91 = 7 x 13", "finish_reason": "stop"}],
        (None, None),
    ),
]


# Recorded: OpenLLMetry 0.62 writing events instead of attributes.
RECORDED_EVENTS = [
    (
        0,
        [system("You answer weather questions."), user("What is the weather in Lisbon?")],
        [{"role": "assistant", "content": "", "tool_calls": [call("call_w1", "get_weather", '{"city": "Lisbon"}')], "finish_reason": "tool_calls"}],
        (6, 0),
    ),
    (
        2,
        [
            system("You answer weather questions."),
            user("What is the weather in Lisbon?"),
            {"role": "assistant", "content": "", "tool_calls": [call("call_w1", "get_weather", '{"city": "Lisbon"}')]},
            {"role": "tool", "content": "Sunny, 24 °C in Lisbon"},  # this instrumentation's tool event has no call id
        ],
        [{"role": "assistant", "content": "It is sunny in Lisbon, 24 °C.", "finish_reason": "stop"}],
        (5, 7),
    ),
]


@pytest.mark.parametrize(
    "fixture, index, prompt, completion, tokens", [("gen_ai_events", *row) for row in EVENTS] + [("openllmetry_0_62_events", *row) for row in RECORDED_EVENTS]
)
def test_message_events(fixture, index, prompt, completion, tokens):
    check(extracted(fixture)[index], prompt, completion, tokens)


# -- traceloop.entity.input / traceloop.entity.output ---------------------------------

ENTITIES = [
    (
        "openllmetry_0_62",
        3,
        [{"role": "input", "content": '{"args": ["OpenAI", "What is the weather in Lisbon?"], "kwargs": {}}'}],
        [{"role": "output", "content": "It is sunny in Lisbon, 24 °C."}],
    ),
    (
        "openllmetry_0_62",
        1,
        [{"role": "input", "content": '{"args": [], "kwargs": {"city": "Lisbon"}}'}],
        [{"role": "output", "content": "Sunny, 24 °C in Lisbon"}],
    ),
]


@pytest.mark.parametrize("fixture, index, prompt, completion", ENTITIES)
def test_workflow_and_task_input_and_output(fixture, index, prompt, completion):
    row = extracted(fixture)[index]
    # Not "user": a decorated function's arguments are not the user's prompt.
    check(row, prompt, completion, (None, None))
    assert row["span_kind"] in {"workflow", "task", "tool"}
    assert not {"traceloop.entity.input", "traceloop.entity.output"} & set(row["attributes"])


# -- llm.prompts / llm.completions ------------------------------------------------------

LLM_PROMPTS = [
    (0, [user("Tell me a joke about OpenTelemetry")], [{"role": "assistant", "content": "Why did the span cross the road?", "finish_reason": "stop"}], (15, 9)),
    (1, [user("Say hello in French")], [{"role": "assistant", "content": "Bonjour"}], (5, 2)),
]


@pytest.mark.parametrize("index, prompt, completion, tokens", LLM_PROMPTS)
def test_llm_prompts_and_completions(index, prompt, completion, tokens):
    row = extracted("llm_prompts")[index]
    check(row, prompt, completion, tokens)
    assert not [k for k in row["attributes"] if k.startswith(("llm.prompts", "llm.completions"))]


# -- across generations -------------------------------------------------------------------


def test_association_properties_become_the_sessions_user_and_metadata():
    rows = extracted("openllmetry_0_62")
    assert {(r["session_id"], r["user_id"]) for r in rows} == {("rec-session", "traceloop-user")}
    assert all(r["association"] == {"tier": "gold"} for r in rows)
    js = extracted("otel_js_0_223")[0]
    assert (js["user_id"], js["association"]) == ("js-user", {"plan": "pro"})


@pytest.mark.parametrize(
    "value, expected",
    [
        ({"intValue": "12"}, 12),
        ({"doubleValue": 12.0}, 12),
        ({"stringValue": "12"}, 12),
        ({"stringValue": "12.0"}, 12),
        ({"stringValue": "many"}, None),
        ({"intValue": "-3"}, 0),
    ],
)
def test_token_counts_arrive_as_ints_doubles_or_strings(value, expected):
    span = {
        "traceId": "1" * 32,
        "spanId": "2" * 16,
        "name": "llm",
        "startTimeUnixNano": "1",
        "endTimeUnixNano": "2",
        "attributes": [{"key": "gen_ai.usage.input_tokens", "value": value}],
    }
    parsed = otlp.parse(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode(), "application/json")
    assert extract(parsed.spans[0])["input_tokens"] == expected


def test_the_first_generation_with_messages_wins_and_the_others_stay_attributes():
    span = {
        "name": "both",
        "start": 1,
        "end": 2,
        "events": [],
        "attributes": {"gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "indexed", "gen_ai.input.messages": '[{"role": "user", "parts": []}]'},
    }
    row = extract(span)
    assert row["prompt"] == [user("indexed")]
    assert "gen_ai.input.messages" in row["attributes"]


def test_malformed_message_json_keeps_the_attribute_and_yields_no_messages():
    span = {"name": "bad", "start": 1, "end": 2, "events": [], "attributes": {"gen_ai.input.messages": "[{not json", "gen_ai.output.messages": '{"role": "x"}'}}
    row = extract(span)
    assert (row["prompt"], row["completion"]) == ([], [])
    assert row["attributes"]["gen_ai.input.messages"] == "[{not json"


def test_where_keys_go_is_the_same_from_the_cache_and_after_it_is_cleared(monkeypatch):
    from traces import messages

    attributes = {
        "gen_ai.prompt.0.role": "user",
        "gen_ai.prompt.0.content": "hi",
        "gen_ai.prompt.x.content": "not indexed",  # a special prefix, but neither
        "gen_ai.completion.0.content": "hello",
        "traceloop.association.properties.tenant": "acme",
        "http.method": "POST",
    }
    expected = (
        [user("hi")],
        [{"content": "hello"}],
        {"gen_ai.prompt.x.content": "not indexed", "traceloop.association.properties.tenant": "acme", "http.method": "POST"},
        {"tenant": "acme"},
    )
    messages._PLACES.clear()
    first = messages.split(dict(attributes), [])
    assert set(attributes) <= set(messages._PLACES), "every key is remembered, those that are neither too"
    # From the cache, and with a cache so small that it is cleared on the way.
    second = messages.split(dict(attributes), [])
    monkeypatch.setattr(messages, "MAX_PLACES", 2)
    messages._PLACES.clear()
    third = messages.split(dict(attributes), [])
    assert len(messages._PLACES) <= 2
    assert first == second == third == expected
