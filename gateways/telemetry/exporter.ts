import type { Attributes, HrTime, Link, SpanContext, SpanKind, SpanStatus } from "@opentelemetry/api";
import type { Resource } from "@opentelemetry/resources";
import type { ReadableSpan, SpanExporter } from "@opentelemetry/sdk-trace-base";
import type { SpanRecord } from "../../actors/index.js";
import type { TraceExporter, TracesConfig } from "./config.js";
import type { OtelSdk } from "./sdk.js";

/**
 * The OpenTelemetry SDK behind a node's span sink. A record is already an ended span, with the
 * times the run recorded and the ids the run derived (actors/run/spans.ts), so it does not go
 * through the SDK's tracer (whose sampler, context, id generator, attribute checks and clock a
 * span started and ended at once never needs): it is handed, as the {@link ReadableSpan} the SDK's
 * span processors take, straight to the SDK's `BatchSpanProcessor` (`OTEL_BSP_*` honoured), whose
 * batches the SDK's OTLP/HTTP exporter serialises and sends (docs/traces.md): as protobuf unless
 * the config asks for JSON. A full queue drops spans, never blocks a step.
 */
export function otlpExporter(sdk: OtelSdk, config: TracesConfig, node: string): TraceExporter {
  const { SpanKind, SpanStatusCode, TraceFlags } = sdk.api;
  const shared: Shared = {
    kinds: { internal: SpanKind.INTERNAL, server: SpanKind.SERVER, client: SpanKind.CLIENT },
    ok: { code: SpanStatusCode.UNSET },
    error: SpanStatusCode.ERROR,
    sampled: TraceFlags.SAMPLED,
    resource: sdk.resources.resourceFromAttributes({ [sdk.semconv.ATTR_SERVICE_NAME]: config.serviceName ?? "runway", "service.instance.id": node }),
    scope: { name: "runway" },
  };
  const exporter = spanExporter(sdk, config);
  // Every run is traced: its spans are emitted by different processes over days, so one sampling
  // decision could not be kept across them (docs/traces.md).
  const processor = new sdk.trace.BatchSpanProcessor(exporter, batching(process.env));
  let dropped = 0;
  return {
    emit(r: SpanRecord): void {
      try {
        processor.onEnd(new RecordSpan(r, shared));
      } catch {
        dropped++;
      }
    },
    dropped: () => dropped,
    flush: () => processor.forceFlush(),
    shutdown: () => processor.shutdown(),
  };
}

/**
 * The SDK's OTLP/HTTP span exporter: `http/json` is `@opentelemetry/exporter-trace-otlp-http`'s;
 * `http/protobuf` (the default) is assembled from the same SDK parts with the SDK's protobuf
 * serializer, as `@opentelemetry/exporter-trace-otlp-proto` does (a batch costs about half the CPU
 * of its JSON and a third of the bytes).
 */
function spanExporter(sdk: OtelSdk, config: TracesConfig): SpanExporter {
  const options = { url: config.url, ...(config.headers ? { headers: config.headers } : {}) };
  if (config.protocol === "http/json") return new sdk.otlp.OTLPTraceExporter(options);
  const { convertLegacyHttpOptions, createOtlpHttpExportDelegate } = sdk.otlpNodeHttp;
  const delegate = createOtlpHttpExportDelegate(
    convertLegacyHttpOptions(options, "TRACES", "v1/traces", { "Content-Type": "application/x-protobuf" }),
    sdk.transformer.ProtobufTraceSerializer,
    "otlp_http_span_exporter",
    sdk.transformer.TraceExporterMetricsHelper,
    undefined,
  );
  return new sdk.otlpBase.OTLPExporterBase<ReadableSpan[]>(delegate);
}

/**
 * The batch span processor's sizes where `OTEL_BSP_*` does not set them: a node ends a span or
 * more a step, thousands a second, and the processor sends one batch at a time, so its queue
 * (the SDK's default 2,048) would drop spans while a batch is on its way; larger batches also
 * make fewer requests.
 */
function batching(env: NodeJS.ProcessEnv): { maxQueueSize?: number; maxExportBatchSize?: number } {
  const queue = env.OTEL_BSP_MAX_QUEUE_SIZE?.trim();
  return {
    ...(queue ? {} : { maxQueueSize: 16_384 }),
    // A queue set smaller than this batch keeps the SDK's batch size (or OTEL_BSP_MAX_EXPORT_BATCH_SIZE's).
    ...(queue || env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE?.trim() ? {} : { maxExportBatchSize: 2_048 }),
  };
}

/** What every span of a node shares: its resource, scope and the SDK's enum values. */
interface Shared {
  kinds: Record<SpanRecord["kind"], SpanKind>;
  ok: SpanStatus;
  error: SpanStatus["code"];
  sampled: number;
  resource: Resource;
  scope: InstrumentationScope;
}

type InstrumentationScope = ReadableSpan["instrumentationScope"];

const NONE: never[] = [];

/** Epoch milliseconds as OpenTelemetry's `[seconds, nanoseconds]`. */
function hrTimeOf(ms: number): HrTime {
  const seconds = Math.trunc(ms / 1000);
  return [seconds, Math.round((ms - seconds * 1000) * 1_000_000)];
}

/**
 * One span record as the SDK's exporters read an ended span: its fields read from the record when
 * the batch is serialised (once each), nothing built while the step runs but this wrapper.
 */
class RecordSpan implements ReadableSpan {
  readonly links: Link[] = NONE;
  readonly events: ReadableSpan["events"] = NONE;
  readonly ended = true;
  readonly droppedAttributesCount = 0;
  readonly droppedEventsCount = 0;
  readonly droppedLinksCount = 0;
  constructor(
    private readonly r: SpanRecord,
    private readonly shared: Shared,
  ) {}
  get name(): string {
    return this.r.name;
  }
  get kind(): SpanKind {
    return this.shared.kinds[this.r.kind];
  }
  spanContext(): SpanContext {
    return { traceId: this.r.trace_id, spanId: this.r.span_id, traceFlags: this.shared.sampled };
  }
  get parentSpanContext(): SpanContext | undefined {
    const r = this.r;
    return r.parent_span_id === undefined
      ? undefined
      : { traceId: r.trace_id, spanId: r.parent_span_id, traceFlags: this.shared.sampled, isRemote: r.remote_parent === true };
  }
  get startTime(): HrTime {
    return hrTimeOf(this.r.start);
  }
  get endTime(): HrTime {
    return hrTimeOf(Math.max(this.r.end, this.r.start));
  }
  get duration(): HrTime {
    return hrTimeOf(Math.max(this.r.end - this.r.start, 0));
  }
  get status(): SpanStatus {
    return this.r.error === undefined ? this.shared.ok : { code: this.shared.error, message: this.r.error };
  }
  get attributes(): Attributes {
    return this.r.attributes;
  }
  get resource(): Resource {
    return this.shared.resource;
  }
  get instrumentationScope(): InstrumentationScope {
    return this.shared.scope;
  }
}
