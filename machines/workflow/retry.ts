/** Retry policy of code and map nodes: deterministic exponential backoff, no jitter (machines take no randomness). */
import type { PlanRetry } from "./plan.js";

/**
 * The delay before the next attempt after `attempt` (1-based) failed, or `undefined` when
 * `max_attempts` is spent: backoff_ms × multiplier^(attempt−1), capped at max_backoff_ms.
 */
export function retryDelay(retry: PlanRetry, attempt: number): number | undefined {
  if (attempt >= retry.max_attempts) return undefined;
  const raw = retry.backoff_ms * retry.multiplier ** Math.max(0, attempt - 1);
  return Math.min(retry.max_backoff_ms, Math.round(raw));
}
