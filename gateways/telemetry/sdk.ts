/**
 * The OpenTelemetry SDK, imported on first use: a node with tracing off (the default) never loads
 * it, nor does any CLI command. Only this file imports its packages for their values (the lint's
 * `otel-sdk-on-first-use` rule): a static import would be hoisted into the `runway` bundle's start.
 */
export interface OtelSdk {
  api: typeof import("@opentelemetry/api");
  trace: typeof import("@opentelemetry/sdk-trace-base");
  otlp: typeof import("@opentelemetry/exporter-trace-otlp-http");
  /** The SDK's OTLP exporter parts, for the protobuf payload (what `@opentelemetry/exporter-trace-otlp-proto` assembles). */
  otlpBase: typeof import("@opentelemetry/otlp-exporter-base");
  otlpNodeHttp: typeof import("@opentelemetry/otlp-exporter-base/node-http");
  transformer: typeof import("@opentelemetry/otlp-transformer");
  resources: typeof import("@opentelemetry/resources");
  semconv: typeof import("@opentelemetry/semantic-conventions");
}

let loaded: Promise<OtelSdk> | undefined;

export function otelSdk(): Promise<OtelSdk> {
  loaded ??= Promise.all([
    import("@opentelemetry/api"),
    import("@opentelemetry/sdk-trace-base"),
    import("@opentelemetry/exporter-trace-otlp-http"),
    import("@opentelemetry/otlp-exporter-base"),
    import("@opentelemetry/otlp-exporter-base/node-http"),
    import("@opentelemetry/otlp-transformer"),
    import("@opentelemetry/resources"),
    import("@opentelemetry/semantic-conventions"),
  ]).then(([api, trace, otlp, otlpBase, otlpNodeHttp, transformer, resources, semconv]) => ({
    api,
    trace,
    otlp,
    otlpBase,
    otlpNodeHttp,
    transformer,
    resources,
    semconv,
  }));
  return loaded;
}
