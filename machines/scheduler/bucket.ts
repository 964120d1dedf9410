import { z } from "zod";

/**
 * A provider (model, tool) rate limit. Plain data: the caller keeps the buckets beside the
 * scheduler state and passes them to `next`, which returns them updated.
 */
export const TokenBucketSchema = z.object({
  capacity: z.number().nonnegative(),
  refill_per_ms: z.number().nonnegative(),
  /** May be negative: a take larger than `capacity` leaves a debt (see `tryTake`). */
  tokens: z.number(),
  updated_at: z.number(),
});
export type TokenBucket = z.output<typeof TokenBucketSchema>;

export type TakeResult = { ok: true; bucket: TokenBucket } | { ok: false; bucket: TokenBucket; ready_at: number };

/** Floating-point slack, in tokens, so that a take at exactly `ready_at` succeeds. */
const EPSILON = 1e-9;

/** A full bucket that refills `capacity` tokens per `window_ms` (e.g. 60_000 for "N per minute"). */
export function newBucket(capacity: number, window_ms: number, now: number): TokenBucket {
  return { capacity, refill_per_ms: window_ms > 0 ? capacity / window_ms : 0, tokens: capacity, updated_at: now };
}

/**
 * The bucket as of `now`: tokens refilled for the elapsed time, never above `capacity`. A `now`
 * before `updated_at` changes nothing (time never runs backwards for a bucket).
 */
export function refill(bucket: TokenBucket, now: number): TokenBucket {
  if (!(now > bucket.updated_at)) return bucket;
  const tokens = Math.min(bucket.capacity, bucket.tokens + (now - bucket.updated_at) * bucket.refill_per_ms);
  return { ...bucket, tokens, updated_at: now };
}

/**
 * Take `n` tokens at `now`. A request up to `capacity` needs `n` tokens in the bucket; a larger
 * one waits for a full bucket and leaves the difference as a debt that later refills repay, so
 * the long-run rate never exceeds `refill_per_ms`. On refusal `ready_at` is the earliest time
 * the same request would succeed (Infinity if the bucket never refills).
 */
export function tryTake(bucket: TokenBucket, n: number, now: number): TakeResult {
  const current = refill(bucket, now);
  if (!(n > 0)) return { ok: true, bucket: current };
  const need = Math.min(n, current.capacity);
  if (current.tokens + EPSILON >= need) return { ok: true, bucket: { ...current, tokens: current.tokens - n } };
  if (!(current.refill_per_ms > 0)) return { ok: false, bucket: current, ready_at: Number.POSITIVE_INFINITY };
  // The first whole ms at which the take succeeds, by the very arithmetic `refill` uses (so
  // rounding can never make `ready_at` too early or one ms late).
  const enough = (t: number): boolean => refill(current, t).tokens + EPSILON >= need;
  let ready_at = current.updated_at + Math.ceil((need - current.tokens) / current.refill_per_ms);
  if (!(ready_at <= Number.MAX_SAFE_INTEGER)) return { ok: false, bucket: current, ready_at: Number.POSITIVE_INFINITY };
  while (!enough(ready_at)) ready_at += 1;
  while (ready_at - 1 > now && enough(ready_at - 1)) ready_at -= 1;
  return { ok: false, bucket: current, ready_at };
}
