"""An agent task traced by traceloop-sdk's `openai` instrumentation, driving the official `openai` client.

python traceloop_agent.py BASE_URL API_KEY OPENAI_URL SESSION_ID [--record FILE]

One workflow: the model is asked the user's question, calls a tool, gets its
answer back, and replies. With --record, spans go to FILE as OTLP/JSON instead
of to the server (how tests/fixtures/spans/openllmetry_0_62.json was made).
"""

import json
import sys

from openai import OpenAI
from traceloop.sdk import Traceloop
from traceloop.sdk.decorators import tool, workflow

QUESTION = "What is the weather in Lisbon?"
TOOLS = [
    {
        "type": "function",
        "function": {"name": "get_weather", "description": "Weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
    }
]


@tool(name="get_weather")
def get_weather(city: str) -> str:
    return f"Sunny, 24 °C in {city}"


@workflow(name="weather_question")
def weather_question(client: OpenAI, question: str) -> str:
    messages = [{"role": "system", "content": "You answer weather questions."}, {"role": "user", "content": question}]
    first = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS)
    call = first.choices[0].message.tool_calls[0]
    messages += [first.choices[0].message.model_dump(exclude_none=True), {"role": "tool", "tool_call_id": call.id, "content": get_weather(**json.loads(call.function.arguments))}]
    return client.chat.completions.create(model="gpt-4o-mini", messages=messages).choices[0].message.content


def main():
    base_url, api_key, openai_url, session_id = sys.argv[1:5]
    record = sys.argv[6] if sys.argv[5:6] == ["--record"] else None
    exporter = None
    if record:
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        exporter = InMemorySpanExporter()
    Traceloop.init(
        app_name="traceloop-agent", api_endpoint=f"{base_url}/api", headers={"Authorization": f"Bearer {api_key}"},
        disable_batch=True, telemetry_enabled=False, exporter=exporter,
    )
    Traceloop.set_association_properties({"session_id": session_id, "user_id": "traceloop-user", "tier": "gold"})
    answer = weather_question(OpenAI(base_url=openai_url, api_key="sk-fake"), QUESTION)
    print("ANSWER", answer, flush=True)
    if record:
        with open(record, "w") as out:
            json.dump([_otlp_json(s) for s in exporter.get_finished_spans()], out, indent=1, ensure_ascii=False)


def _otlp_json(span) -> dict:
    """A ReadableSpan as OTLP/JSON, the way a JSON exporter would send it."""
    def value(v):
        if isinstance(v, bool):
            return {"boolValue": v}
        if isinstance(v, int):
            return {"intValue": str(v)}
        if isinstance(v, float):
            return {"doubleValue": v}
        if isinstance(v, (list, tuple)):
            return {"arrayValue": {"values": [value(x) for x in v]}}
        return {"stringValue": str(v)}

    def attributes(items):
        return [{"key": k, "value": value(v)} for k, v in (items or {}).items()]

    return {
        "traceId": f"{span.context.trace_id:032x}",
        "spanId": f"{span.context.span_id:016x}",
        "parentSpanId": f"{span.parent.span_id:016x}" if span.parent else "",
        "name": span.name,
        "kind": span.kind.value + 1,
        "startTimeUnixNano": str(span.start_time),
        "endTimeUnixNano": str(span.end_time),
        "attributes": attributes(span.attributes),
        "events": [{"name": e.name, "timeUnixNano": str(e.timestamp), "attributes": attributes(e.attributes)} for e in span.events],
        "status": {"code": span.status.status_code.value},
    }


if __name__ == "__main__":
    main()
