// The model gateway's retry policy and failure mapping: pure functions, every row a case.
import { describe, expect, it } from "vitest";
import {
  classifyHttpFailure,
  DEFAULT_RETRY_POLICY,
  MODEL_FAILURE_CODES,
  retryAfterMs,
  retryDecision,
  type ModelFailure,
  type RetryPolicy,
} from "../../gateways/models/index.js";

const policy: RetryPolicy = { max_attempts: 4, base_delay_ms: 100, max_delay_ms: 1_000, max_retry_after_ms: 10_000 };

function failureOf(code: ModelFailure["code"]): ModelFailure {
  return code === "transient" ? { code, reason: "server_error", message: "x" } : ({ code, message: "x" } as ModelFailure);
}

describe("retryDecision", () => {
  it.each([
    ["rate_limited", true],
    ["transient", true],
    ["model_bad_request", false],
    ["model_auth_failed", false],
    ["context_too_long", false],
    ["model_not_found", false],
    ["model_malformed_response", false],
    ["cancelled", false],
  ] as const)("%s retries: %s", (code, retries) => {
    expect(retryDecision(failureOf(code), 1, 0.5, policy).retry).toBe(retries);
  });

  it("covers every failure code", () => {
    expect(new Set(MODEL_FAILURE_CODES).size).toBe(8);
  });

  it("bounds the attempts: the attempt that reaches max_attempts is the last", () => {
    const f = failureOf("transient");
    expect(retryDecision(f, 3, 0.5, policy).retry).toBe(true);
    expect(retryDecision(f, 4, 0.5, policy)).toEqual({ retry: false });
    expect(retryDecision(f, 9, 0.5, policy)).toEqual({ retry: false });
  });

  it("honours retry-after exactly, for rate limits and overloaded servers alike", () => {
    expect(retryDecision({ code: "rate_limited", message: "x", retry_after_ms: 7_000 }, 1, 0.9, policy)).toEqual({ retry: true, delay_ms: 7_000 });
    expect(retryDecision({ code: "transient", reason: "server_error", message: "x", retry_after_ms: 250 }, 2, 0, policy)).toEqual({
      retry: true,
      delay_ms: 250,
    });
  });

  it("does not wait for a retry-after longer than max_retry_after_ms: the caller decides", () => {
    expect(retryDecision({ code: "rate_limited", message: "x", retry_after_ms: 10_001 }, 1, 0.5, policy)).toEqual({ retry: false });
  });

  it("backs off exponentially with jitter between half and all of the ceiling, capped", () => {
    const f = failureOf("rate_limited");
    const delays = (r: number) => [1, 2, 3].map((a) => retryDecision(f, a, r, { ...policy, max_attempts: 10 }));
    expect(delays(0)).toEqual([
      { retry: true, delay_ms: 50 },
      { retry: true, delay_ms: 100 },
      { retry: true, delay_ms: 200 },
    ]);
    expect(delays(1)).toEqual([
      { retry: true, delay_ms: 100 },
      { retry: true, delay_ms: 200 },
      { retry: true, delay_ms: 400 },
    ]);
    expect(retryDecision(f, 9, 1, { ...policy, max_attempts: 10 })).toEqual({ retry: true, delay_ms: 1_000 });
    expect(retryDecision(f, 9, 0, { ...policy, max_attempts: 10 })).toEqual({ retry: true, delay_ms: 500 });
  });

  it("never answers a zero wait without a retry-after", () => {
    for (let a = 1; a < DEFAULT_RETRY_POLICY.max_attempts; a++) {
      const d = retryDecision(failureOf("transient"), a, 0);
      expect(d.retry && d.delay_ms).toBeGreaterThan(0);
    }
  });
});

describe("retryAfterMs", () => {
  const headers = (h: Record<string, string>) => new Headers(h);
  const now = Date.parse("2026-12-06T10:00:00Z");

  it("reads retry-after-ms first, then retry-after in seconds or as an HTTP date", () => {
    expect(retryAfterMs(headers({ "retry-after-ms": "1500.2", "retry-after": "9" }), now)).toBe(1501);
    expect(retryAfterMs(headers({ "retry-after": "2" }), now)).toBe(2_000);
    expect(retryAfterMs(headers({ "retry-after": "0.5" }), now)).toBe(500);
    expect(retryAfterMs(headers({ "retry-after": "Sun, 06 Dec 2026 10:00:30 GMT" }), now)).toBe(30_000);
    expect(retryAfterMs(headers({ "retry-after": "Sun, 06 Dec 2026 09:00:00 GMT" }), now)).toBe(0);
  });

  it("ignores what it cannot read", () => {
    expect(retryAfterMs(undefined, now)).toBeUndefined();
    expect(retryAfterMs(headers({}), now)).toBeUndefined();
    expect(retryAfterMs(headers({ "retry-after": "soon" }), now)).toBeUndefined();
    expect(retryAfterMs(headers({ "retry-after": "-3" }), now)).toBeUndefined();
    expect(retryAfterMs(headers({ "retry-after-ms": "x", "retry-after": "1" }), now)).toBe(1_000);
  });
});

describe("classifyHttpFailure", () => {
  const now = 0;
  it.each([
    [429, undefined, "slow down", "rate_limited"],
    [429, "insufficient_quota", "You exceeded your current quota", "model_auth_failed"],
    [401, undefined, "bad key", "model_auth_failed"],
    [403, "permission_error", "no", "model_auth_failed"],
    [402, undefined, "pay", "model_auth_failed"],
    [404, "model_not_found", "no such model", "model_not_found"],
    [400, "context_length_exceeded", "too long", "context_too_long"],
    [400, undefined, "This model's maximum context length is 4096 tokens", "context_too_long"],
    [400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum", "context_too_long"],
    [413, "request_too_large", "too big", "context_too_long"],
    [400, undefined, "temperature must be at most 2", "model_bad_request"],
    [422, undefined, "unprocessable", "model_bad_request"],
    [408, undefined, "timeout", "transient"],
    [500, undefined, "boom", "transient"],
    [502, undefined, "bad gateway", "transient"],
    [529, "overloaded_error", "Overloaded", "transient"],
    [undefined, "overloaded_error", "Overloaded", "transient"],
    [undefined, "rate_limit_error", "slow", "rate_limited"],
    [undefined, "invalid_request_error", "bad", "model_bad_request"],
  ] as const)("%s %s → %s", (status, code, message, expected) => {
    expect(classifyHttpFailure({ status, code, message, now }).code).toBe(expected);
  });

  it("carries the retry-after of a 429 and of a 5xx", () => {
    const headers = new Headers({ "retry-after": "3" });
    expect(classifyHttpFailure({ status: 429, headers, message: "x", now })).toEqual({
      code: "rate_limited",
      status: 429,
      message: "x",
      retry_after_ms: 3_000,
    });
    expect(classifyHttpFailure({ status: 503, headers, message: "x", now })).toMatchObject({ code: "transient", retry_after_ms: 3_000 });
  });

  it("clips a provider's long message", () => {
    expect(classifyHttpFailure({ status: 500, message: "<html>".repeat(1_000), now }).message.length).toBeLessThan(1_100);
  });
});
