"""An agent task traced by traceloop-sdk's `openai` instrumentation, driving the official `openai` client.

python traceloop_agent.py BASE_URL API_KEY OPENAI_URL SESSION_ID [--record FILE [--events]]

One workflow: the model is asked the user's question, calls a tool, gets its
answer back, and replies. With --record, spans go to FILE as OTLP/JSON instead
of to the server (how tests/fixtures/spans/openllmetry_0_62.json was made).
With --events too, the instrumentation writes messages as GenAI events
(`use_attributes=False`), which it emits as log records; each is kept as a
span event of the span it belongs to, its body's fields as the event's
attributes (tests/fixtures/spans/openllmetry_0_62_events.json).
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
    messages += [
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": get_weather(**json.loads(call.function.arguments))},
    ]
    return client.chat.completions.create(model="gpt-4o-mini", messages=messages).choices[0].message.content


def main():
    base_url, api_key, openai_url, session_id = sys.argv[1:5]
    record = sys.argv[6] if sys.argv[5:6] == ["--record"] else None
    events = record and "--events" in sys.argv
    exporter = logs = None
    if record:
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        exporter = InMemorySpanExporter()
    if events:
        from opentelemetry._logs import set_logger_provider
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor

        logs = InMemoryLogRecordExporter()
        provider = LoggerProvider()
        provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
        set_logger_provider(provider)
    Traceloop.init(
        app_name="traceloop-agent",
        api_endpoint=f"{base_url}/api",
        headers={"Authorization": f"Bearer {api_key}"},
        disable_batch=True,
        telemetry_enabled=False,
        exporter=exporter,
        use_attributes=not events,
    )
    Traceloop.set_association_properties({"session_id": session_id, "user_id": "traceloop-user", "tier": "gold"})
    answer = weather_question(OpenAI(base_url=openai_url, api_key="sk-fake"), QUESTION)
    print("ANSWER", answer, flush=True)
    if record:
        by_span = {}
        for log in logs.get_finished_logs() if logs else []:
            entry = log.log_record
            by_span.setdefault(entry.span_id, []).append(
                {"name": entry.event_name, "timeUnixNano": str(entry.timestamp), "attributes": _attributes({**(entry.attributes or {}), **entry.body})}
            )
        spans = [{**_otlp_json(s), **({"events": by_span[s.context.span_id]} if s.context.span_id in by_span else {})} for s in exporter.get_finished_spans()]
        with open(record, "w") as out:
            json.dump(spans, out, indent=1, ensure_ascii=False)


def _value(v) -> dict:
    if v is None:
        return {}
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, (list, tuple)):
        return {"arrayValue": {"values": [_value(x) for x in v]}}
    if isinstance(v, dict):
        return {"kvlistValue": {"values": _attributes(v)}}
    return {"stringValue": str(v)}


def _attributes(items) -> list[dict]:
    return [{"key": k, "value": _value(v)} for k, v in (items or {}).items()]


def _otlp_json(span) -> dict:
    """A ReadableSpan as OTLP/JSON, the way a JSON exporter would send it."""
    return {
        "traceId": f"{span.context.trace_id:032x}",
        "spanId": f"{span.context.span_id:016x}",
        "parentSpanId": f"{span.parent.span_id:016x}" if span.parent else "",
        "name": span.name,
        "kind": span.kind.value + 1,
        "startTimeUnixNano": str(span.start_time),
        "endTimeUnixNano": str(span.end_time),
        "attributes": _attributes(span.attributes),
        "events": [{"name": e.name, "timeUnixNano": str(e.timestamp), "attributes": _attributes(e.attributes)} for e in span.events],
        "status": {"code": span.status.status_code.value},
    }


if __name__ == "__main__":
    main()
