import type { SpanSink } from "../../actors/index.js";

/**
 * Whether and where a node exports its trace spans (docs/traces.md). Off unless an endpoint is
 * given: by the node's option, or by the standard OpenTelemetry variables
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the traces URL as is) and `OTEL_EXPORTER_OTLP_ENDPOINT`
 * (a base URL: `/v1/traces` is added), unless `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`.
 */
export interface TracesConfig {
  /** The OTLP/HTTP traces URL, e.g. `http://127.0.0.1:4318/v1/traces`. */
  url: string;
  /**
   * The payload: `http/protobuf` (the default, OTLP's own, and the cheaper to build) or `http/json`
   * (`OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` / `OTEL_EXPORTER_OTLP_PROTOCOL` when read from the environment).
   */
  protocol?: TracesProtocol;
  /** `service.name` of the spans' resource (default `runway`, or `OTEL_SERVICE_NAME`). */
  serviceName?: string;
  /** Extra request headers (e.g. a collector's API key), from `OTEL_EXPORTER_OTLP_HEADERS` when read from the environment. */
  headers?: Record<string, string>;
}

export type TracesProtocol = "http/protobuf" | "http/json";
const PROTOCOLS: readonly string[] = ["http/protobuf", "http/json"] satisfies TracesProtocol[];

/** The OTLP traces URL an OTLP endpoint setting names: a traces endpoint as is, a base endpoint with `/v1/traces`. */
export function tracesUrlOf(endpoint: string, base: boolean): string {
  return base ? `${endpoint.replace(/\/+$/, "")}/v1/traces` : endpoint;
}

/**
 * The traces setting of the environment (the OpenTelemetry SDK's variables), or undefined when
 * off. A value that is not an http(s) URL is a refusal (the node says why and does not start).
 */
export function tracesFromEnv(env: NodeJS.ProcessEnv = process.env): { config?: TracesConfig; refusal?: string } {
  if ((env.OTEL_SDK_DISABLED ?? "").trim().toLowerCase() === "true") return {};
  if ((env.OTEL_TRACES_EXPORTER ?? "").trim().toLowerCase() === "none") return {};
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  const endpoint = traces || base;
  if (!endpoint) return {};
  const variable = traces ? "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" : "OTEL_EXPORTER_OTLP_ENDPOINT";
  if (!isHttpUrl(endpoint)) return { refusal: `${variable}: an http(s) URL, not ${JSON.stringify(endpoint)}` };
  const protocolVariable = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL?.trim() ? "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL" : "OTEL_EXPORTER_OTLP_PROTOCOL";
  const asked = env[protocolVariable]?.trim().toLowerCase();
  const protocol = asked && isProtocol(asked) ? asked : undefined;
  if (asked && !protocol) return { refusal: `${protocolVariable}: http/protobuf or http/json, not ${JSON.stringify(asked)}` };
  const headers = headersOf(env.OTEL_EXPORTER_OTLP_TRACES_HEADERS ?? env.OTEL_EXPORTER_OTLP_HEADERS);
  const service = env.OTEL_SERVICE_NAME?.trim();
  return {
    config: {
      url: tracesUrlOf(endpoint, !traces),
      ...(protocol ? { protocol } : {}),
      ...(service ? { serviceName: service } : {}),
      ...(headers ? { headers } : {}),
    },
  };
}

function isProtocol(value: string): value is TracesProtocol {
  return PROTOCOLS.includes(value);
}

export function isHttpUrl(value: string): boolean {
  try {
    const u = new URL(value);
    return u.protocol === "http:" || u.protocol === "https:";
  } catch {
    return false;
  }
}

/** `k1=v1,k2=v2` (values URL-encoded), as the OTLP exporter variables write headers. */
function headersOf(raw: string | undefined): Record<string, string> | undefined {
  if (!raw?.trim()) return undefined;
  const out: Record<string, string> = {};
  for (const pair of raw.split(",")) {
    const eq = pair.indexOf("=");
    if (eq <= 0) continue;
    try {
      out[pair.slice(0, eq).trim()] = decodeURIComponent(pair.slice(eq + 1).trim());
    } catch {
      continue;
    }
  }
  return Object.keys(out).length ? out : undefined;
}

/** A node's span sink over OTLP/HTTP, with its lifecycle. */
export interface TraceExporter extends SpanSink {
  /** Spans the SDK refused (never thrown at the caller). */
  dropped(): number;
  /** Sends what is batched now. */
  flush(): Promise<void>;
  /** Sends what is batched and stops. */
  shutdown(): Promise<void>;
}
