import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  emptyScheduler,
  enqueue,
  newBucket,
  next,
  refill,
  release,
  schedulerViolations,
  tryTake,
  type SchedulerConfig,
  type SchedulerState,
  type TenantPolicy,
  type Ticket,
  type TokenBucket,
} from "../../machines/scheduler/index.js";
import { T0 } from "./scheduler-support.js";

const MINUTE = 60_000;
const KEY = "openai/gpt-4o";
const open: TenantPolicy = { weight: 1, max_concurrency: 1_000 };
const tenants = (): TenantPolicy => open;
const config: SchedulerConfig = { slots: 4, interactive_reserve: 0, migration_cap: 0, aging_ms: 60_000 };

function ticket(id: string, tenant: string, enqueued_at: number, provider = true) {
  return {
    id,
    tenant,
    project: "p",
    class: "automation" as const,
    priority: 5,
    deadline: null,
    enqueued_at,
    ...(provider ? { provider: { key: KEY, tokens: 1 } } : {}),
  };
}

/** Most leases in any half-open window [t, t + width) of the sorted times. */
function busiestWindow(times: readonly number[], width: number): number {
  let best = 0;
  let lo = 0;
  for (let hi = 0; hi < times.length; hi++) {
    while ((times[hi] as number) - (times[lo] as number) >= width) lo++;
    best = Math.max(best, hi - lo + 1);
  }
  return best;
}

describe("token buckets", () => {
  it("refill is capped at capacity and never runs backwards", () => {
    const b: TokenBucket = { capacity: 10, refill_per_ms: 0.01, tokens: 0, updated_at: T0 };
    expect(refill(b, T0 + 500).tokens).toBeCloseTo(5);
    expect(refill(b, T0 + 5_000).tokens).toBe(10);
    expect(refill(b, T0 - 1)).toBe(b);
  });

  it("a refused take names the earliest time it would succeed, and it does then (property)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 100 }),
        fc.integer({ min: 1, max: 600_000 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.integer({ min: 1, max: 150 }),
        (capacity, window, fill, n) => {
          const b: TokenBucket = { ...newBucket(capacity, window, T0), tokens: capacity * fill };
          const r = tryTake(b, n, T0);
          if (r.ok) {
            expect(b.tokens + 1e-9).toBeGreaterThanOrEqual(Math.min(n, capacity));
            return;
          }
          expect(r.ready_at).toBeGreaterThan(T0);
          expect(tryTake(r.bucket, n, r.ready_at).ok).toBe(true);
          expect(tryTake(r.bucket, n, r.ready_at - 1).ok).toBe(false);
        },
      ),
    );
  });

  it("a take larger than capacity waits for a full bucket and leaves a debt", () => {
    const b = newBucket(10, MINUTE, T0);
    const r = tryTake(b, 25, T0);
    expect(r).toMatchObject({ ok: true, bucket: { tokens: -15 } });
    const again = tryTake(r.bucket, 1, T0);
    expect(again).toMatchObject({ ok: false, ready_at: T0 + 16 * 6_000 });
  });
});

describe("provider quotas in next (seed 000: token buckets protect provider rate limits)", () => {
  it("a ticket short of quota holds no slot: others are leased, and idle reports wake_at", () => {
    let s = emptyScheduler();
    for (let i = 0; i < 5; i++) s = enqueue(s, ticket(`a${i}`, "a", T0));
    let buckets: Record<string, TokenBucket> = { [KEY]: { ...newBucket(10, MINUTE, T0), tokens: 1 } };
    const d1 = next(s, { now: T0, config, tenants, buckets });
    expect(d1).toMatchObject({ decision: "lease", ticket: { id: "a0" } });
    s = d1.state;
    buckets = { ...d1.buckets };
    const d2 = next(s, { now: T0, config, tenants, buckets });
    expect(d2).toMatchObject({ decision: "idle", reason: "nothing_leasable", wake_at: T0 + 6_000 });
    if (d2.decision !== "idle") throw new Error("unreachable");
    expect(d2.wait_quota.map((w) => w.ticket.id)).toEqual(["a1", "a2", "a3", "a4"]);
    expect(d2.wait_quota.every((w) => w.not_before === T0 + 6_000)).toBe(true);
    expect(d2.state.running).toBe(1);
    s = enqueue(d2.state, ticket("b0", "b", T0, false));
    const d3 = next(s, { now: T0 + 1, config, tenants, buckets });
    expect(d3).toMatchObject({ decision: "lease", ticket: { id: "b0" } });
    const d4 = next(d3.state, { now: T0 + 6_000, config, tenants, buckets });
    expect(d4).toMatchObject({ decision: "lease", ticket: { id: "a1" } });
  });

  it("one tenant's flood cannot take the whole provider quota (invariant 8)", () => {
    let s = emptyScheduler();
    for (let i = 0; i < 100; i++) s = enqueue(s, ticket(`a${i}`, "a", T0));
    let buckets: Record<string, TokenBucket> = { [KEY]: newBucket(10, MINUTE, T0) };
    const leased: string[] = [];
    let now = T0;
    const wide: SchedulerConfig = { ...config, slots: 100 };
    for (let i = 0; i < 40; i++) {
      if (leased.length === 10 && i === 10) s = enqueue(s, ticket("b0", "b", now)); // after a's burst has emptied the bucket
      const d = next(s, { now, config: wide, tenants, buckets });
      s = d.state;
      buckets = { ...d.buckets };
      if (d.decision === "lease") leased.push(d.ticket.id);
      else now = d.wake_at ?? now + 1;
    }
    // The burst of 10 goes to a; b's ticket takes the very next token, ahead of a's 90 others.
    expect(leased.slice(0, 11)).toEqual([...Array.from({ length: 10 }, (_, i) => `a${i}`), "b0"]);
  });

  it("N per minute: when a token never waits for a slot, no 60 s window holds more than N leases of the provider (property)", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 30 }), fc.array(fc.integer({ min: 1, max: 20_000 }), { minLength: 1, maxLength: 50 }), (n, durations) => {
        const times = simulate({ bucket: { ...newBucket(n, MINUTE, T0), tokens: 0 }, durations, slots: 64, clock: "wake_at" });
        expect(busiestWindow(times, MINUTE)).toBeLessThanOrEqual(n);
        // Not starved either: over ten minutes the provider gets all it is allowed (the first token comes at 60 s / N).
        expect(times.length).toBe(10 * n - 1);
      }),
      { numRuns: 40 },
    );
  });

  it("in general (full start, slot contention, decisions at arbitrary times) a window of w ms holds at most capacity + N·w/60 s (property)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 30 }),
        fc.array(fc.integer({ min: 1, max: 20_000 }), { minLength: 1, maxLength: 50 }),
        fc.integer({ min: 2, max: 12 }),
        fc.constantFrom("wake_at" as const, "steps" as const),
        (n, durations, slots, clock) => {
          const times = simulate({ bucket: newBucket(n, MINUTE, T0), durations, slots, clock });
          for (const w of [1_000, 10_000, MINUTE, 5 * MINUTE]) expect(busiestWindow(times, w)).toBeLessThanOrEqual(n + Math.ceil((n * w) / MINUTE));
        },
      ),
      { numRuns: 40 },
    );
  });
});

/**
 * Ten simulated minutes. Tenant a always has provider tickets queued; tenant b keeps plain
 * tickets queued, up to 8 running (7 s each), competing for slots. Each a lease runs for the
 * next of `durations` (cycled). The clock jumps to the next completion and to `wake_at`
 * ("wake_at"), or by the durations themselves ("steps"). Returns the provider lease times.
 */
function simulate(opts: { bucket: TokenBucket; durations: readonly number[]; slots: number; clock: "wake_at" | "steps" }): number[] {
  const policies = (t: string): TenantPolicy => (t === "b" ? { weight: 1, max_concurrency: 8 } : open);
  const cfg: SchedulerConfig = { ...config, slots: opts.slots };
  let s: SchedulerState = emptyScheduler();
  let buckets: Record<string, TokenBucket> = { [KEY]: opts.bucket };
  let now = T0;
  let id = 0;
  let k = 0;
  const duration = (): number => opts.durations[k++ % opts.durations.length] as number;
  let running: { ticket: Ticket; until: number }[] = [];
  const times: number[] = [];
  const top = (): void => {
    while ((s.tenants.a?.queued.automation ?? 0) < 5) s = enqueue(s, ticket(`a${id++}`, "a", now));
    while ((s.tenants.b?.queued.automation ?? 0) < 5) s = enqueue(s, ticket(`b${id++}`, "b", now, false));
  };
  while (now < T0 + 10 * MINUTE) {
    for (const r of running) if (r.until <= now) s = release(s, r.ticket);
    running = running.filter((r) => r.until > now);
    top();
    let wake = Number.POSITIVE_INFINITY;
    for (;;) {
      const d = next(s, { now, config: cfg, tenants: policies, buckets });
      s = d.state;
      buckets = { ...d.buckets };
      if (d.decision === "idle") {
        wake = d.wake_at ?? wake;
        break;
      }
      if (d.ticket.provider) times.push(now);
      running.push({ ticket: d.ticket, until: now + (d.ticket.tenant === "b" ? 7_000 : duration()) });
      top();
    }
    const then = opts.clock === "wake_at" ? wake : now + duration();
    now = Math.max(now + 1, Math.min(then, ...running.map((r) => r.until)));
  }
  expect(schedulerViolations(s)).toEqual([]);
  return times.filter((t) => t < T0 + 10 * MINUTE);
}
