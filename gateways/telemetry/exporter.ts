import type { Attributes } from "@opentelemetry/api";
import type { IdGenerator } from "@opentelemetry/sdk-trace-base";
import type { SpanRecord } from "../../actors/index.js";
import type { TraceExporter, TracesConfig } from "./config.js";
import type { OtelSdk } from "./sdk.js";

/**
 * The OpenTelemetry SDK behind a node's span sink. Each record becomes one SDK span, started and
 * ended at once with the times the run recorded, under the ids the run derived
 * (actors/run/spans.ts): the id generator hands the SDK the record's ids, so a span lost with its
 * node and closed by recovery on another has the id its children already name. Spans are batched
 * (`BatchSpanProcessor`, `OTEL_BSP_*` honoured) and sent as OTLP/HTTP JSON; a full queue drops
 * spans, never blocks a step.
 */
export function otlpExporter(sdk: OtelSdk, config: TracesConfig, node: string): TraceExporter {
  const { ROOT_CONTEXT, SpanKind, SpanStatusCode, TraceFlags, trace } = sdk.api;
  const kinds = { internal: SpanKind.INTERNAL, server: SpanKind.SERVER, client: SpanKind.CLIENT } as const;
  let next = { trace: "", span: "" };
  const ids: IdGenerator = { generateTraceId: () => next.trace, generateSpanId: () => next.span };
  const exporter = new sdk.otlp.OTLPTraceExporter({ url: config.url, ...(config.headers ? { headers: config.headers } : {}) });
  const provider = new sdk.trace.BasicTracerProvider({
    resource: sdk.resources.resourceFromAttributes({ [sdk.semconv.ATTR_SERVICE_NAME]: config.serviceName ?? "runway", "service.instance.id": node }),
    idGenerator: ids,
    // Every run is traced: its spans are emitted by different processes over days, so one
    // sampling decision could not be kept across them (docs/traces.md).
    sampler: new sdk.trace.AlwaysOnSampler(),
    spanProcessors: [new sdk.trace.BatchSpanProcessor(exporter)],
  });
  const tracer = provider.getTracer("runway");
  let dropped = 0;
  return {
    emit(r: SpanRecord): void {
      try {
        next = { trace: r.trace_id, span: r.span_id };
        const parent = r.parent_span_id
          ? trace.setSpanContext(ROOT_CONTEXT, {
              traceId: r.trace_id,
              spanId: r.parent_span_id,
              traceFlags: TraceFlags.SAMPLED,
              isRemote: r.remote_parent === true,
            })
          : ROOT_CONTEXT;
        const attributes: Attributes = r.attributes;
        const span = tracer.startSpan(r.name, { kind: kinds[r.kind], startTime: r.start, attributes, root: !r.parent_span_id }, parent);
        if (r.error !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: r.error });
        span.end(Math.max(r.end, r.start));
      } catch {
        dropped++;
      }
    },
    dropped: () => dropped,
    flush: () => provider.forceFlush(),
    shutdown: () => provider.shutdown(),
  };
}
