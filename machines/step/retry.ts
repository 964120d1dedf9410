import { z } from "zod";

/** How a step retries a retryable failure. */
export const RetryPolicySchema = z.object({
  /** Attempts in all, the first included; the failure of attempt `max_attempts` is terminal. */
  max_attempts: z.number().int().min(1).default(3),
  /** The wait after attempt 1 fails. */
  backoff_ms: z.number().int().nonnegative().default(200),
  /** No wait is longer than this. */
  max_backoff_ms: z.number().int().nonnegative().default(10_000),
  /** Each later wait is the previous one times this (default 2). */
  multiplier: z.number().min(1).optional(),
});
export type RetryPolicy = z.output<typeof RetryPolicySchema>;

export const DEFAULT_RETRY_POLICY: RetryPolicy = Object.freeze({ max_attempts: 3, backoff_ms: 200, max_backoff_ms: 10_000 });

/**
 * The wait (ms) before the attempt after `attempt` fails: `backoff_ms × multiplier^(attempt−1)`,
 * capped at `max_backoff_ms`, floored to whole ms. Pure: no jitter (randomness would arrive in an
 * event if ever wanted). An attempt below 1 counts as 1.
 */
export function retryDelay(policy: RetryPolicy, attempt: number): number {
  const multiplier = policy.multiplier ?? 2;
  const n = Math.max(1, Math.floor(attempt));
  const delay = policy.backoff_ms * multiplier ** (n - 1);
  return Math.floor(Math.min(policy.max_backoff_ms, Number.isFinite(delay) ? delay : Number.POSITIVE_INFINITY));
}
