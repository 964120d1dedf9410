import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  emptyScheduler,
  enqueue,
  next,
  release,
  schedulerViolations,
  type Decision,
  type SchedulerConfig,
  type SchedulerState,
  type TenantPolicy,
  type Ticket,
  type TicketClass,
} from "../../machines/scheduler/index.js";
import { T0 } from "./scheduler-support.js";

const open: TenantPolicy = { weight: 1, max_concurrency: 10_000 };
const tenants = (): TenantPolicy => open;

function ticket(id: string, tenant: string, cls: TicketClass, enqueued_at = T0, priority = 5) {
  return { id, tenant, project: "p", class: cls, priority, deadline: null, enqueued_at };
}

function queuedOf(s: SchedulerState, tenant: string, cls: TicketClass): number {
  return s.tenants[tenant]?.queued[cls] ?? 0;
}

describe("interactive reserve (seed 000: reserved interactive capacity first)", () => {
  it("non-interactive work stops at the reserve; interactive takes the last free slots", () => {
    const config: SchedulerConfig = { slots: 10, interactive_reserve: 2, migration_cap: 0, aging_ms: 60_000 };
    let s = emptyScheduler();
    for (let i = 0; i < 2_000; i++) s = enqueue(s, ticket(`a${i}`, "a", "automation"));
    const decide = (): Decision => {
      const d = next(s, { now: T0, config, tenants, buckets: {} });
      s = d.state;
      return d;
    };
    const leased: Ticket[] = [];
    for (let d = decide(); d.decision === "lease"; d = decide()) leased.push(d.ticket);
    expect(leased).toHaveLength(8); // 2 free slots left, reserved
    for (let i = 0; i < 3; i++) s = enqueue(s, ticket(`b${i}`, "b", "interactive"));
    expect([decide(), decide()].map((d) => (d.decision === "lease" ? d.ticket.id : d.reason))).toEqual(["b0", "b1"]);
    expect(decide()).toMatchObject({ decision: "idle", reason: "no_free_slot" });
    s = release(s, leased[0] as Ticket);
    expect(decide()).toMatchObject({ decision: "lease", ticket: { id: "b2" } });
    s = release(s, leased[1] as Ticket);
    expect(decide()).toMatchObject({ decision: "idle", reason: "nothing_leasable" }); // 1 free ≤ reserve
    expect(schedulerViolations(s)).toEqual([]);
  });

  it("every interactive ticket of B is leased before any further A ticket beyond the reserve (property, order of decisions)", () => {
    const action = fc.oneof(
      fc.record({ kind: fc.constant("submit" as const), cls: fc.constantFrom<TicketClass>("interactive", "approval_resume") }),
      fc.record({ kind: fc.constant("release" as const), pick: fc.nat() }),
      fc.record({ kind: fc.constant("decide" as const) }),
    );
    const setup = fc.integer({ min: 2, max: 12 }).chain((slots) => fc.tuple(fc.constant(slots), fc.integer({ min: 1, max: slots - 1 })));
    fc.assert(
      fc.property(setup, fc.array(action, { minLength: 1, maxLength: 300, size: "max" }), ([slots, reserve], actions) => {
        const config: SchedulerConfig = { slots, interactive_reserve: reserve, migration_cap: 0, aging_ms: 60_000 };
        let s = emptyScheduler();
        for (let i = 0; i < 2_000; i++) s = enqueue(s, ticket(`a${i}`, "a", "automation"));
        const running: Ticket[] = [];
        let now = T0;
        let b = 0;
        for (const act of actions) {
          now += 10;
          if (act.kind === "submit") s = enqueue(s, ticket(`b${b++}`, "b", act.cls, now));
          else if (act.kind === "release") {
            if (running.length === 0) continue;
            const [done] = running.splice(act.pick % running.length, 1);
            s = release(s, done as Ticket);
          } else {
            const before = s;
            const free = slots - before.running;
            const bWaiting = queuedOf(before, "b", "interactive") + queuedOf(before, "b", "approval_resume");
            const d = next(s, { now, config, tenants, buckets: {} });
            s = d.state;
            if (bWaiting > 0 && free >= 1) expect(d.decision === "lease" && d.ticket.tenant).toBe("b");
            if (d.decision === "lease") {
              running.push(d.ticket);
              if (d.ticket.tenant === "a") {
                expect(bWaiting).toBe(0);
                expect(slots - s.running).toBeGreaterThanOrEqual(reserve); // never the last reserved free slots
              }
            }
          }
        }
        expect(schedulerViolations(s)).toEqual([]);
      }),
      { numRuns: 100 },
    );
  });
});

describe("migration (seed 000: capped, uses otherwise idle capacity)", () => {
  const config: SchedulerConfig = { slots: 10, interactive_reserve: 2, migration_cap: 3, aging_ms: 60_000 };

  it("uses idle capacity up to its cap when nothing else waits", () => {
    let s = emptyScheduler();
    for (let i = 0; i < 20; i++) s = enqueue(s, ticket(`m${i}`, "a", "migration"));
    const ids: string[] = [];
    for (;;) {
      const d = next(s, { now: T0, config, tenants, buckets: {} });
      s = d.state;
      if (d.decision !== "lease") {
        expect(d.reason).toBe("nothing_leasable");
        break;
      }
      ids.push(d.ticket.id);
    }
    expect(ids).toEqual(["m0", "m1", "m2"]);
    expect(s.running_by_class.migration).toBe(3);
  });

  it("yields to non-migration work: queued migration waits while anything else can be leased", () => {
    let s = emptyScheduler();
    s = enqueue(s, ticket("m0", "a", "migration", T0 - 3_600_000, 9)); // old and urgent: still last
    for (let i = 0; i < 3; i++) s = enqueue(s, ticket(`x${i}`, "b", "automation", T0, 0));
    const order: string[] = [];
    for (let d = next(s, { now: T0, config, tenants, buckets: {} }); d.decision === "lease"; d = next(s, { now: T0, config, tenants, buckets: {} })) {
      s = d.state;
      order.push(d.ticket.id);
    }
    expect(order).toEqual(["x0", "x1", "x2", "m0"]);
  });

  it("never exceeds its cap and is leased only when no other ticket could be (property)", () => {
    const cls = fc.constantFrom<TicketClass>("interactive", "approval_resume", "automation", "migration", "migration");
    const action = fc.oneof(
      fc.record({ kind: fc.constant("submit" as const), cls, tenant: fc.constantFrom("a", "b", "c") }),
      fc.record({ kind: fc.constant("release" as const), pick: fc.nat() }),
      fc.record({ kind: fc.constant("decide" as const) }),
    );
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 4 }),
        fc.integer({ min: 0, max: 3 }),
        fc.array(action, { maxLength: 300, size: "max" }),
        (cap, reserve, actions) => {
          const cfg: SchedulerConfig = { slots: 8, interactive_reserve: reserve, migration_cap: cap, aging_ms: 1_000 };
          let s = emptyScheduler();
          const running: Ticket[] = [];
          let now = T0;
          let n = 0;
          for (const act of actions) {
            now += 100;
            if (act.kind === "submit") s = enqueue(s, ticket(`t${n++}`, act.tenant, act.cls, now, n % 10));
            else if (act.kind === "release") {
              if (running.length === 0) continue;
              s = release(s, running.splice(act.pick % running.length, 1)[0] as Ticket);
            } else {
              const others = Object.values(s.tenants).reduce((sum, t) => sum + t.queued.interactive + t.queued.approval_resume + t.queued.automation, 0);
              const d = next(s, { now, config: cfg, tenants, buckets: {} });
              s = d.state;
              if (d.decision === "lease") {
                running.push(d.ticket);
                if (d.ticket.class === "migration") expect(others).toBe(0);
              }
              if (d.decision === "idle" && d.reason === "nothing_leasable") {
                // Idle with free capacity: only migration beyond its cap, or anything but interactive inside the reserve.
                const free = cfg.slots - s.running;
                if (free > reserve) expect(others === 0 && s.running_by_class.migration >= cap).toBe(true);
              }
            }
            expect(s.running_by_class.migration).toBeLessThanOrEqual(cap);
          }
          expect(schedulerViolations(s)).toEqual([]);
        },
      ),
      { numRuns: 200 },
    );
  });
});
