import type { ModelCallOptions, ModelFailure, ModelOutcome, ModelProvider, ModelRequest } from "./types.js";

export interface RetryPolicy {
  /** Requests one turn may make, the first included. */
  max_attempts: number;
  /** First backoff; doubled each attempt, up to `max_delay_ms`. */
  base_delay_ms: number;
  max_delay_ms: number;
  /** A provider asking for a longer wait than this is not waited for here: the failure goes to
   *  the caller, which may park the run instead of holding the turn. */
  max_retry_after_ms: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = Object.freeze({ max_attempts: 4, base_delay_ms: 500, max_delay_ms: 20_000, max_retry_after_ms: 60_000 });

export type RetryDecision = { retry: true; delay_ms: number } | { retry: false };

/**
 * Whether to ask again after `failure` on attempt `attempt` (1 for the first request), and when.
 * Only `rate_limited` and `transient` are retried: the fatal codes would fail the same way, a
 * cancelled call was meant to stop, and a malformed response may already have been paid for.
 * A `retry-after` is honoured exactly; otherwise the wait is exponential with full jitter
 * (`random` in [0, 1): injected, so the function is pure).
 */
export function retryDecision(failure: ModelFailure, attempt: number, random: number, policy: RetryPolicy = DEFAULT_RETRY_POLICY): RetryDecision {
  if (failure.code !== "rate_limited" && failure.code !== "transient") return { retry: false };
  if (attempt >= policy.max_attempts) return { retry: false };
  if (failure.retry_after_ms !== undefined) {
    return failure.retry_after_ms <= policy.max_retry_after_ms ? { retry: true, delay_ms: failure.retry_after_ms } : { retry: false };
  }
  const ceiling = Math.min(policy.max_delay_ms, policy.base_delay_ms * 2 ** Math.max(0, attempt - 1));
  const r = Math.min(Math.max(random, 0), 1);
  // half fixed, half jitter: never zero (a hot loop against a failing server), never in lockstep
  return { retry: true, delay_ms: Math.round(ceiling / 2 + (ceiling / 2) * r) };
}

export interface RetryDeps {
  policy?: RetryPolicy;
  random?: () => number;
  /** Waits `ms`, resolving early (false) when `signal` fires. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<boolean>;
  /** Told of each failed attempt that will be retried (for metrics and logs). */
  onRetry?: (failure: ModelFailure, attempt: number, delay_ms: number) => void;
}

/**
 * One turn, asked again by {@link retryDecision} until it answers or the policy gives up. The
 * last failure is returned as is; an abort during a wait answers `cancelled`.
 */
export async function completeWithRetry(
  provider: ModelProvider,
  request: ModelRequest,
  options: ModelCallOptions = {},
  deps: RetryDeps = {},
): Promise<ModelOutcome> {
  const policy = deps.policy ?? DEFAULT_RETRY_POLICY;
  const random = deps.random ?? Math.random;
  const sleep = deps.sleep ?? abortableSleep;
  for (let attempt = 1; ; attempt++) {
    const outcome = await provider.complete(request, options);
    if (outcome.outcome === "ok") return outcome;
    const decision = retryDecision(outcome.failure, attempt, random(), policy);
    if (!decision.retry) return outcome;
    deps.onRetry?.(outcome.failure, attempt, decision.delay_ms);
    if (!(await sleep(decision.delay_ms, options.signal))) {
      return { outcome: "failed", failure: { code: "cancelled", message: "the call was cancelled while waiting to retry" } };
    }
  }
}

/** Resolves true after `ms`, or false as soon as `signal` fires. */
export function abortableSleep(ms: number, signal?: AbortSignal): Promise<boolean> {
  if (signal?.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const done = (value: boolean) => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      resolve(value);
    };
    const onAbort = () => done(false);
    const timer = setTimeout(() => done(true), ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
