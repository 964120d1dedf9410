import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  emptyScheduler,
  enqueue,
  next,
  release,
  schedulerViolations,
  ticketsOf,
  type SchedulerConfig,
  type SchedulerState,
  type TenantPolicy,
  type Ticket,
} from "../../machines/scheduler/index.js";
import { T0, lookup } from "./scheduler-support.js";

const config: SchedulerConfig = { slots: 12, interactive_reserve: 0, migration_cap: 0, aging_ms: 60_000 };

function ticket(id: string, tenant: string, project: string, priority = 5) {
  return { id, tenant, project, class: "automation" as const, priority, deadline: null, enqueued_at: T0 };
}

function drain(s: SchedulerState, tenants: (t: string) => TenantPolicy | undefined): { state: SchedulerState; ids: string[] } {
  const ids: string[] = [];
  for (;;) {
    const d = next(s, { now: T0, config, tenants, buckets: {} });
    s = d.state;
    if (d.decision !== "lease") return { state: s, ids };
    ids.push(d.ticket.id);
  }
}

describe("tenant and project caps (seed 000: project/user quotas)", () => {
  it("a tenant at its cap is skipped, not blocking: others take the remaining slots", () => {
    const tenants = lookup({ a: { weight: 100, max_concurrency: 2 }, b: { weight: 1, max_concurrency: 100 } });
    let s = emptyScheduler();
    for (let i = 0; i < 50; i++) s = enqueue(s, ticket(`a${i}`, "a", "p"));
    for (let i = 0; i < 50; i++) s = enqueue(s, ticket(`b${i}`, "b", "p"));
    const { state, ids } = drain(s, tenants);
    expect(ids.filter((id) => id.startsWith("a"))).toEqual(["a0", "a1"]);
    expect(ids).toHaveLength(12);
    expect(state.tenants.a?.leased).toHaveLength(2);
  });

  it("a project at its cap is skipped inside its tenant: the tenant's other projects go on, in priority order", () => {
    const tenants = lookup({ a: { weight: 1, max_concurrency: 100, project_max_concurrency: { hot: 1 } } });
    let s = emptyScheduler();
    for (let i = 0; i < 5; i++) s = enqueue(s, ticket(`hot${i}`, "a", "hot", 9));
    for (let i = 0; i < 3; i++) s = enqueue(s, ticket(`cold${i}`, "a", "cold", 1));
    const { ids } = drain(s, tenants);
    expect(ids).toEqual(["hot0", "cold0", "cold1", "cold2"]);
  });

  it("a class share caps the tenant's leases of that class at ceil(share × slots), never below one; other classes and tenants take the rest", () => {
    const tenants = lookup({ a: { weight: 1, max_concurrency: 100, class_shares: { automation: 0.25 } }, b: { weight: 1, max_concurrency: 100 } });
    let s = emptyScheduler();
    for (let i = 0; i < 10; i++) s = enqueue(s, ticket(`a${i}`, "a", "p"));
    for (let i = 0; i < 10; i++) s = enqueue(s, ticket(`b${i}`, "b", "p"));
    const { state, ids } = drain(s, tenants);
    // 12 slots: a's automation holds at most ceil(0.25 × 12) = 3 of them; b takes the rest.
    expect(ids.filter((id) => id.startsWith("a"))).toHaveLength(3);
    expect(ids.filter((id) => id.startsWith("b"))).toHaveLength(9);
    expect(state.tenants.a?.leased.filter((t) => t.class === "automation")).toHaveLength(3);
    // A release frees a share slot for the next of a's automation tickets.
    const released = release(state, state.tenants.a!.leased[0]!);
    const d = next(released, { now: T0, config, tenants, buckets: {} });
    expect(d.decision === "lease" && d.ticket.tenant).toBe("a");
  });

  it("a share of 0 still lets one lease of the class through (a share caps, never starves)", () => {
    const tenants = lookup({ a: { weight: 1, max_concurrency: 100, class_shares: { automation: 0 } } });
    let s = emptyScheduler();
    for (let i = 0; i < 4; i++) s = enqueue(s, ticket(`a${i}`, "a", "p"));
    expect(drain(s, tenants).ids).toEqual(["a0"]);
  });

  it("caps are never exceeded, whatever the order of work and releases (property)", () => {
    const policy = fc.record({
      weight: fc.integer({ min: 1, max: 5 }),
      max_concurrency: fc.integer({ min: 0, max: 8 }),
      project_max_concurrency: fc.dictionary(fc.constantFrom("p0", "p1", "p2"), fc.integer({ min: 0, max: 4 })),
    });
    const action = fc.oneof(
      {
        weight: 3,
        arbitrary: fc.record({
          kind: fc.constant("submit" as const),
          tenant: fc.constantFrom("a", "b", "c"),
          project: fc.constantFrom("p0", "p1", "p2"),
          priority: fc.integer({ min: 0, max: 9 }),
        }),
      },
      { weight: 2, arbitrary: fc.record({ kind: fc.constant("release" as const), pick: fc.nat() }) },
      { weight: 3, arbitrary: fc.record({ kind: fc.constant("decide" as const) }) },
    );
    fc.assert(
      fc.property(policy, policy, policy, fc.array(action, { maxLength: 400, size: "max" }), (pa, pb, pc, actions) => {
        const map: Record<string, TenantPolicy> = { a: pa, b: pb, c: pc };
        const tenants = lookup(map);
        let s = emptyScheduler();
        const running: Ticket[] = [];
        let n = 0;
        for (const act of actions) {
          if (act.kind === "submit") s = enqueue(s, ticket(`t${n++}`, act.tenant, act.project, act.priority));
          else if (act.kind === "release") {
            if (running.length > 0) s = release(s, running.splice(act.pick % running.length, 1)[0] as Ticket);
          } else {
            const d = next(s, { now: T0, config, tenants, buckets: {} });
            s = d.state;
            if (d.decision === "lease") running.push(d.ticket);
            else if (d.reason === "nothing_leasable") {
              // Idle with a free slot: every queued ticket is held by its tenant's or its project's cap.
              for (const [name, t] of Object.entries(s.tenants)) {
                const p = map[name] as TenantPolicy;
                if (t.leased.length >= p.max_concurrency) continue;
                for (const level of t.lanes.automation) {
                  for (const q of ticketsOf(level))
                    expect((t.running_by_project[q.ticket.project] ?? 0) >= (p.project_max_concurrency?.[q.ticket.project] ?? Infinity)).toBe(true);
                }
              }
            }
          }
          for (const [name, t] of Object.entries(s.tenants)) {
            const p = map[name] as TenantPolicy;
            expect(t.leased.length).toBeLessThanOrEqual(p.max_concurrency);
            for (const [project, count] of Object.entries(t.running_by_project))
              expect(count).toBeLessThanOrEqual(p.project_max_concurrency?.[project] ?? Infinity);
          }
          expect(s.running).toBeLessThanOrEqual(config.slots);
        }
        expect(schedulerViolations(s)).toEqual([]);
      }),
      { numRuns: 200 },
    );
  });
});
