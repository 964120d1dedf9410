import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  emptyScheduler,
  enqueue,
  metrics,
  next,
  release,
  schedulerViolations,
  type SchedulerConfig,
  type SchedulerState,
  type Ticket,
  type TicketClass,
} from "../../machines/scheduler/index.js";
import { T0, cycler, lookup } from "./scheduler-support.js";

const AGING = 1_000;

describe("aging (seed 000: priority/deadline, and aging)", () => {
  it("a waiting ticket gains one level per aging_ms and then beats fresh top-priority work of its own tenant", () => {
    const config: SchedulerConfig = { slots: 1, interactive_reserve: 0, migration_cap: 0, aging_ms: AGING };
    const tenants = lookup({ a: { weight: 1, max_concurrency: 10 } });
    let s = enqueue(emptyScheduler(), { id: "old", tenant: "a", project: "p", class: "automation", priority: 0, deadline: null, enqueued_at: T0 });
    for (let k = 0; k < 40; k++) {
      const now = T0 + (k * AGING) / 2;
      s = enqueue(s, { id: `fresh${k}`, tenant: "a", project: "p", class: "automation", priority: 9, deadline: null, enqueued_at: now });
      const d = next(s, { now, config, tenants, buckets: {} });
      if (d.decision !== "lease") throw new Error("expected a lease");
      s = release(d.state, d.ticket);
      if (d.ticket.id === "old") {
        // At 9 × aging_ms its effective priority (0 + 9) ties the fresh 9s, and it is older.
        expect(now - T0).toBe(9 * AGING);
        return;
      }
    }
    throw new Error("the old ticket was never leased");
  });

  it("a lease after a wait past the starvation threshold counts one starvation event", () => {
    const config: SchedulerConfig = { slots: 1, interactive_reserve: 0, migration_cap: 0, aging_ms: AGING };
    const tenants = lookup({ a: { weight: 1, max_concurrency: 10 } });
    let s = emptyScheduler();
    s = enqueue(s, { id: "late", tenant: "a", project: "p", class: "automation", priority: 0, deadline: null, enqueued_at: T0 });
    s = enqueue(s, { id: "fresh", tenant: "a", project: "p", class: "automation", priority: 0, deadline: null, enqueued_at: T0 + 10 * AGING });
    expect(metrics(s, T0 + 11 * AGING).oldest_wait_ms_by_tenant_class).toEqual({ a: { automation: 11 * AGING } });
    let d = next(s, { now: T0 + 11 * AGING, config, tenants, buckets: {} });
    expect(d).toMatchObject({ decision: "lease", ticket: { id: "late" } });
    s = release(d.state, (d as { ticket: Ticket }).ticket);
    expect(metrics(s, T0 + 11 * AGING).starvation_events).toBe(1);
    d = next(s, { now: T0 + 11 * AGING, config, tenants, buckets: {} });
    expect(d).toMatchObject({ decision: "lease", ticket: { id: "fresh" } });
    expect(metrics(d.state, T0 + 11 * AGING)).toMatchObject({ starvation_events: 1, leases: 2 });
  });
});

describe("no starvation (property)", () => {
  const workItem = fc.record({
    tenant: fc.constantFrom("low", "mid", "flood"),
    class: fc.constantFrom<TicketClass>("interactive", "approval_resume", "automation"),
    priority: fc.integer({ min: 0, max: 9 }),
    deadline: fc.option(fc.integer({ min: 0, max: 1_000 }), { nil: null }),
    cost: fc.integer({ min: 1, max: 5 }),
  });

  /**
   * Bound on decisions: the low tenant (weight 1 of 12) gets at least every ~12th lease; its own
   * fresh priority-9 flood stops outranking an old ticket after 10 aging periods (100 steps at
   * 100 ms a step, 1 flood ticket a step), so at most ~100 flood tickets and the ≤ 40 work tickets
   * go before it: (100 + 40) × 12 ≈ 1,700 leases. One slot frees per step.
   */
  const MAX_STEPS = 3_000;

  it("under a sustained priority-9 flood, every ticket of a random workload is leased within a bounded number of decisions", () => {
    fc.assert(
      fc.property(
        fc.array(workItem, { minLength: 1, maxLength: 40 }),
        fc.integer({ min: 2, max: 6 }),
        fc.integer({ min: 0, max: 1 }),
        fc.array(fc.nat({ max: 1_000 }), { minLength: 1, maxLength: 50 }),
        (work, slots, reserve, picks) => {
          const cycle = cycler();
          const config: SchedulerConfig = { slots, interactive_reserve: reserve, migration_cap: 1, aging_ms: AGING };
          const tenants = lookup({
            low: { weight: 1, max_concurrency: 100 },
            mid: { weight: 3, max_concurrency: 100 },
            flood: { weight: 8, max_concurrency: 100 },
          });
          let s: SchedulerState = emptyScheduler();
          let now = T0;
          let n = 0;
          const pending = new Set<string>();
          for (const w of work) {
            const id = `w${n++}`;
            pending.add(id);
            s = enqueue(s, { ...w, id, project: "p", deadline: w.deadline === null ? null : T0 + w.deadline, enqueued_at: now });
          }
          const running: Ticket[] = [];
          let decisions = 0;
          for (let step = 0; pending.size > 0; step++) {
            expect(step, `still waiting: ${[...pending].join(", ")}`).toBeLessThan(MAX_STEPS);
            now += AGING / 10;
            for (const tenant of ["flood", "low"]) {
              s = enqueue(s, { id: `f${n++}`, tenant, project: "p", class: "automation", priority: 9, deadline: null, enqueued_at: now });
            }
            if (running.length > 0) s = release(s, running.splice(cycle(picks) % running.length, 1)[0] as Ticket);
            for (;;) {
              const d = next(s, { now, config, tenants, buckets: {} });
              s = d.state;
              decisions++;
              if (d.decision !== "lease") break;
              running.push(d.ticket);
              pending.delete(d.ticket.id);
            }
          }
          expect(decisions).toBeLessThan(2 * MAX_STEPS + slots);
          expect(schedulerViolations(s)).toEqual([]);
        },
      ),
      { numRuns: 25 },
    );
  });
});
