// One agent task sent with OpenTelemetry's own JavaScript OTLP exporter, as a
// Node.js agent would: node export.mjs BASE_URL API_KEY json|proto SESSION_ID
// The exporter sends its body with Transfer-Encoding: chunked (no Content-Length).
import { OTLPTraceExporter as JsonExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { OTLPTraceExporter as ProtoExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { context, diag, DiagConsoleLogger, DiagLogLevel, trace } from "@opentelemetry/api";

// Export failures (a 400, a refused connection) go to stderr for the test to show.
diag.setLogger(new DiagConsoleLogger(), DiagLogLevel.WARN);

const [baseUrl, apiKey, protocol, sessionId] = process.argv.slice(2);
const Exporter = protocol === "proto" ? ProtoExporter : JsonExporter;
const exporter = new Exporter({ url: `${baseUrl}/api/v1/traces`, headers: { Authorization: `Bearer ${apiKey}` } });
const provider = new BasicTracerProvider({
  resource: resourceFromAttributes({ "service.name": `js-${protocol}` }),
  spanProcessors: [new SimpleSpanProcessor(exporter)],
});
const tracer = provider.getTracer("js-agent");
const association = {
  "traceloop.association.properties.session_id": sessionId,
  "traceloop.association.properties.user_id": "js-user",
  "traceloop.association.properties.plan": "pro",
};

const workflow = tracer.startSpan("book_flight.workflow", {
  attributes: { ...association, "traceloop.span.kind": "workflow", "traceloop.entity.name": "book_flight" },
});
const llm = tracer.startSpan(
  "openai.chat",
  {
    attributes: {
      ...association,
      "traceloop.span.kind": "llm",
      "gen_ai.provider.name": "openai",
      "gen_ai.request.model": "gpt-4o-mini",
      "gen_ai.system_instructions": JSON.stringify([{ type: "text", content: "You book flights." }]),
      "gen_ai.input.messages": JSON.stringify([
        { role: "user", parts: [{ type: "text", content: "Book me a flight to Lisbon" }] },
      ]),
      "gen_ai.output.messages": JSON.stringify([
        {
          role: "assistant",
          finish_reason: "tool_call",
          parts: [{ type: "tool_call", id: "call_1", name: "search_flights", arguments: { to: "LIS" } }],
        },
      ]),
      // A JavaScript number that is a whole number goes out as intValue; the
      // other count arrives as a string, as some SDKs send it.
      "gen_ai.usage.input_tokens": 21,
      "gen_ai.usage.output_tokens": "9",
    },
  },
  trace.setSpan(context.active(), workflow),
);
llm.end();
workflow.end();
await provider.forceFlush();
await provider.shutdown();
console.log("EXPORTED");
