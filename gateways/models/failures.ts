import type { ModelFailure } from "./types.js";

/** Longest provider message a failure carries: enough to act on, never a whole HTML error page. */
const MAX_MESSAGE = 1_000;

/**
 * How long the provider asked us to wait: `retry-after-ms` (OpenAI's, milliseconds) wins over
 * `retry-after` (seconds, or an HTTP date measured against `now`). Undefined when neither is
 * usable. Pure: the caller passes the clock.
 */
export function retryAfterMs(headers: { get(name: string): string | null } | undefined, now: number): number | undefined {
  if (!headers) return undefined;
  const ms = headers.get("retry-after-ms");
  if (ms !== null && ms.trim() !== "") {
    const n = Number(ms);
    if (Number.isFinite(n) && n >= 0) return Math.ceil(n);
  }
  const after = headers.get("retry-after");
  if (after === null || after.trim() === "") return undefined;
  const seconds = Number(after);
  if (Number.isFinite(seconds)) return seconds >= 0 ? Math.ceil(seconds * 1000) : undefined;
  const at = Date.parse(after);
  return Number.isFinite(at) ? Math.max(0, at - now) : undefined;
}

const CONTEXT_TOO_LONG =
  /context[_ ]length|context window|maximum context|prompt is too long|too many tokens|input is too long|exceeds? the (model's )?context|input length and `?max_tokens`? exceed/i;

/** What a provider said about a failed request, whatever its wire format. */
export interface HttpFailure {
  status: number | undefined;
  headers?: { get(name: string): string | null } | undefined;
  /** The provider's own message (already redacted by the caller). */
  message: string;
  /** The provider's machine-readable code or type (`context_length_exceeded`, `rate_limit_error`…). */
  code?: string | undefined;
  now: number;
}

/**
 * The one mapping from a provider's HTTP answer to a typed failure, shared by the adapters.
 * A status-less failure is an error event inside a stream: its code decides.
 */
export function classifyHttpFailure(f: HttpFailure): ModelFailure {
  const status = f.status;
  const code = (f.code ?? "").toLowerCase();
  const message = clip(f.message || (status ? `the provider answered ${status}` : "the provider reported an error"));
  const withStatus = status !== undefined ? { status } : {};
  const wait = retryAfterMs(f.headers, f.now);
  const waitField = wait !== undefined ? { retry_after_ms: wait } : {};
  // OpenAI answers an exhausted account 429 with this code: waiting does not help.
  if (code === "insufficient_quota" || code === "billing_error") return { code: "model_auth_failed", message, ...withStatus };
  if (status === 429 || code === "rate_limit_error" || code === "rate_limit_exceeded") return { code: "rate_limited", message, ...withStatus, ...waitField };
  if (code === "context_length_exceeded" || code === "string_above_max_length" || status === 413 || code === "request_too_large")
    return { code: "context_too_long", message, ...withStatus };
  if (status === 401 || status === 403 || status === 402 || code === "authentication_error" || code === "permission_error")
    return { code: "model_auth_failed", message, ...withStatus };
  if (status === 404 || code === "not_found_error" || code === "model_not_found") return { code: "model_not_found", message, ...withStatus };
  if (status === 408 || status === 409) return { code: "transient", reason: status === 408 ? "timeout" : "server_error", message, ...withStatus, ...waitField };
  if (status !== undefined && status >= 500) return { code: "transient", reason: "server_error", message, ...withStatus, ...waitField };
  if (status !== undefined && status >= 400) {
    if (CONTEXT_TOO_LONG.test(message)) return { code: "context_too_long", message, ...withStatus };
    return { code: "model_bad_request", message, ...withStatus };
  }
  if (code === "invalid_request_error") return CONTEXT_TOO_LONG.test(message) ? { code: "context_too_long", message } : { code: "model_bad_request", message };
  // an error event mid-stream (overloaded_error, api_error, server_error…): the server's trouble
  return { code: "transient", reason: "server_error", message, ...withStatus, ...waitField };
}

/** A network-level failure (reset, refused, closed mid-body): undici's and Node's shapes. */
export function isConnectionError(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && /^(ECONNRESET|ECONNREFUSED|EPIPE|ETIMEDOUT|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH|UND_ERR_\w+)$/.test(code))
      return true;
    if (e.name === "TypeError" && /terminated|fetch failed|other side closed/i.test(e.message)) return true;
  }
  return false;
}

export function clip(text: string): string {
  return text.length > MAX_MESSAGE ? `${text.slice(0, MAX_MESSAGE)}…` : text;
}

export function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
