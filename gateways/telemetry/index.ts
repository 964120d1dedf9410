import type { TraceExporter, TracesConfig } from "./config.js";
import { otlpExporter } from "./exporter.js";
import { otelSdk } from "./sdk.js";

export { isHttpUrl, tracesFromEnv, tracesUrlOf, type TraceExporter, type TracesConfig } from "./config.js";

/**
 * The node's trace exporter (tracing on). The OpenTelemetry SDK is imported here, on first use,
 * so a node with tracing off never loads it.
 */
export async function startTraceExporter(config: TracesConfig, node: string): Promise<TraceExporter> {
  return otlpExporter(await otelSdk(), config, node);
}
