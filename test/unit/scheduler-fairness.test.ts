import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  emptyScheduler,
  enqueue,
  next,
  release,
  schedulerViolations,
  type SchedulerConfig,
  type SchedulerState,
  type Ticket,
} from "../../machines/scheduler/index.js";
import { T0, cycler, lookup } from "./scheduler-support.js";

const config: SchedulerConfig = { slots: 8, interactive_reserve: 0, migration_cap: 0, aging_ms: 60_000 };

interface Tally {
  leases: Record<string, number>;
  cost: Record<string, number>;
}

/**
 * Saturation: each tenant in `demand` keeps `backlog` tickets queued (a lease is replaced at
 * once); a decision is made whenever a slot is free, and when none is, one running ticket is
 * released (`pick(n)` chooses which of the `n` running, oldest first). Stops after `leases` leases.
 */
function saturate(opts: {
  weights: Record<string, number>;
  demand: readonly string[];
  leases: number;
  pick: (running: number) => number;
  cost?: (tenant: string) => number;
  state?: SchedulerState;
  running?: Ticket[];
  backlog?: number;
}): { tally: Tally; state: SchedulerState; running: Ticket[] } {
  const tenants = lookup(Object.fromEntries(Object.entries(opts.weights).map(([t, weight]) => [t, { weight, max_concurrency: 1_000 }])));
  const backlog = opts.backlog ?? 40;
  let s = opts.state ?? emptyScheduler();
  const running = opts.running ?? [];
  const tally: Tally = { leases: {}, cost: {} };
  let n = s.seq;
  let now = T0;
  const submit = (tenant: string): void => {
    s = enqueue(s, {
      id: `${tenant}-${n++}`,
      tenant,
      project: "p",
      class: "automation",
      priority: 5,
      deadline: null,
      enqueued_at: now,
      cost: opts.cost?.(tenant) ?? 1,
    });
  };
  for (const t of opts.demand) for (let i = 0; i < backlog; i++) submit(t);
  let total = 0;
  while (total < opts.leases) {
    now += 1;
    const d = next(s, { now, config, tenants, buckets: {} });
    s = d.state;
    if (d.decision === "lease") {
      total++;
      tally.leases[d.ticket.tenant] = (tally.leases[d.ticket.tenant] ?? 0) + 1;
      tally.cost[d.ticket.tenant] = (tally.cost[d.ticket.tenant] ?? 0) + d.ticket.cost;
      running.push(d.ticket);
      submit(d.ticket.tenant);
    } else {
      expect(d.reason).toBe("no_free_slot");
      const [done] = running.splice(opts.pick(running.length) % running.length, 1);
      s = release(s, done as Ticket);
    }
  }
  return { tally, state: s, running };
}

function shares(counts: Record<string, number>): Record<string, number> {
  const sum = Object.values(counts).reduce((a, b) => a + b, 0);
  return Object.fromEntries(Object.entries(counts).map(([k, v]) => [k, v / sum]));
}

function expectShares(counts: Record<string, number>, weights: Record<string, number>, tolerance = 0.1): void {
  const got = shares(counts);
  const sum = Object.values(weights).reduce((a, b) => a + b, 0);
  for (const [tenant, w] of Object.entries(weights)) {
    const want = w / sum;
    expect(Math.abs((got[tenant] ?? 0) - want) / want, `${tenant}: share ${got[tenant]} vs ${want}`).toBeLessThan(tolerance);
  }
}

const weights = { a: 1, b: 2, c: 4 };

describe("weighted fair share (seed 000: tenant weighted fair share by cost)", () => {
  it("1:2:4 weights with equal costs and FIFO releases: lease shares follow the weights", () => {
    const { tally, state } = saturate({ weights, demand: ["a", "b", "c"], leases: 7_000, pick: () => 0 });
    expectShares(tally.leases, weights, 0.01);
    expect(schedulerViolations(state)).toEqual([]);
  });

  it("holds whatever order slots free in (property: releases in random order)", () => {
    fc.assert(
      fc.property(fc.array(fc.nat({ max: 1_000 }), { minLength: 1, maxLength: 50 }), (picks) => {
        const cycle = cycler();
        const { tally } = saturate({ weights, demand: ["a", "b", "c"], leases: 7_000, pick: () => cycle(picks) });
        expectShares(tally.leases, weights);
      }),
      { numRuns: 8 },
    );
  });

  it("with unequal costs, shares of cost (not of leases) follow the weights (property)", () => {
    const costs = fc.array(fc.integer({ min: 1, max: 20 }), { minLength: 1, maxLength: 30 });
    fc.assert(
      fc.property(costs, costs, costs, fc.array(fc.nat({ max: 1_000 }), { minLength: 1, maxLength: 50 }), (ca, cb, cc, picks) => {
        const cycle = cycler();
        const table: Record<string, number[]> = { a: ca, b: cb, c: cc };
        const cursor: Record<string, number> = { a: 0, b: 0, c: 0 };
        const cost = (t: string): number => {
          const list = table[t] ?? [1];
          const i = cursor[t] ?? 0;
          cursor[t] = i + 1;
          return list[i % list.length] ?? 1;
        };
        const { tally } = saturate({ weights, demand: ["a", "b", "c"], leases: 7_000, pick: () => cycle(picks), cost });
        expectShares(tally.cost, weights);
      }),
      { numRuns: 8 },
    );
  });

  it("a tenant that was idle re-enters at the current minimum: no banked credit, no burst", () => {
    const equal = { a: 1, b: 1, c: 1 };
    const tenants = lookup({ a: { weight: 1, max_concurrency: 10 } });
    // a leases one long-running ticket (so its low virtual time is remembered), then queues nothing.
    let s = enqueue(emptyScheduler(), { id: "a-long", tenant: "a", project: "p", class: "automation", priority: 5, deadline: null, enqueued_at: T0 });
    const first = next(s, { now: T0, config, tenants, buckets: {} });
    expect(first.decision).toBe("lease");
    s = first.state;
    // b and c share the rest of the fleet for 3,000 leases while a is idle.
    const warm = saturate({ weights: equal, demand: ["b", "c"], leases: 3_000, pick: () => 0, state: s });
    expect(warm.tally.leases.a).toBeUndefined();
    expect(warm.state.tenants.a?.vtime).toBe(1);
    // Now a arrives with a deep backlog: over the next 300 leases it gets its third, not all of them.
    const after = saturate({ weights: equal, demand: ["a"], leases: 300, pick: () => 0, state: warm.state, running: warm.running, backlog: 400 });
    const a = after.tally.leases.a ?? 0;
    expect(a).toBeGreaterThanOrEqual(95);
    expect(a).toBeLessThanOrEqual(105);
  });
});
