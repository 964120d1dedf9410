import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  ADMISSION_CODES,
  SchedulerConfigSchema,
  TicketSchema,
  admitExpansion,
  childPriority,
  emptyScheduler,
  enqueue,
  metrics,
  next,
  release,
  remove,
  schedulerViolations,
  type ExpansionLimits,
  type ExpansionRequest,
  type SchedulerConfig,
  type SchedulerState,
  type TenantPolicy,
  type TicketInput,
} from "../../machines/scheduler/index.js";
import { T0 } from "./scheduler-support.js";

const config: SchedulerConfig = { slots: 10, interactive_reserve: 0, migration_cap: 1, aging_ms: 60_000 };
const open: TenantPolicy = { weight: 1, max_concurrency: 100 };

function ticket(id: string, tenant: string, over: Partial<TicketInput> = {}): TicketInput {
  return { id, tenant, project: "p", class: "automation", priority: 5, deadline: null, enqueued_at: T0, ...over };
}

function drain(
  s: SchedulerState,
  tenants: (t: string) => TenantPolicy | undefined,
  now = T0,
): { state: SchedulerState; ids: string[]; last: ReturnType<typeof next> } {
  const ids: string[] = [];
  for (;;) {
    const d = next(s, { now, config, tenants, buckets: {} });
    s = d.state;
    if (d.decision !== "lease") return { state: s, ids, last: d };
    ids.push(d.ticket.id);
  }
}

describe("killed, draining and unknown tenants", () => {
  it("lease nothing, keep their tickets queued, and do not block others", () => {
    const policies: Record<string, TenantPolicy> = { k: { ...open, killed: true }, d: { ...open, draining: true }, ok: open };
    const tenants = (t: string) => (Object.hasOwn(policies, t) ? policies[t] : undefined);
    let s = emptyScheduler();
    for (const t of ["k", "d", "ghost", "ok"])
      for (let i = 0; i < 3; i++) s = enqueue(s, ticket(`${t}${i}`, t, { class: i === 0 ? "interactive" : "automation" }));
    const r = drain(s, tenants);
    expect(r.ids).toEqual(["ok0", "ok1", "ok2"]);
    expect(r.last).toMatchObject({ decision: "idle", reason: "nothing_leasable" });
    expect(metrics(r.state, T0).queued_by_tenant_class).toMatchObject({
      k: { interactive: 1, automation: 2 },
      d: { interactive: 1, automation: 2 },
      ghost: { automation: 2 },
    });
    // Resumed: its queue is still there, in order.
    policies.k = open;
    expect(drain(r.state, tenants).ids).toEqual(["k0", "k1", "k2"]);
  });
});

describe("queue operations", () => {
  it("within a tenant: priority, then deadline (null last), then enqueue order", () => {
    let s = emptyScheduler();
    s = enqueue(s, ticket("late", "a", { priority: 5, deadline: T0 + 900 }));
    s = enqueue(s, ticket("none", "a", { priority: 5 }));
    s = enqueue(s, ticket("soon", "a", { priority: 5, deadline: T0 + 100 }));
    s = enqueue(s, ticket("urgent", "a", { priority: 8 }));
    s = enqueue(s, ticket("soon-2", "a", { priority: 5, deadline: T0 + 100 }));
    s = enqueue(s, ticket("low", "a", { priority: 1, deadline: T0 }));
    expect(drain(s, () => open).ids).toEqual(["urgent", "soon", "soon-2", "late", "none", "low"]);
  });

  it("remove drops a queued ticket; unknown and leased ids are no-ops", () => {
    let s = emptyScheduler();
    for (let i = 0; i < 4; i++) s = enqueue(s, ticket(`t${i}`, "a"));
    s = remove(s, "t1");
    expect(remove(s, "nope")).toBe(s);
    const d = next(s, { now: T0, config, tenants: () => open, buckets: {} });
    if (d.decision !== "lease") throw new Error("expected a lease");
    expect(d.ticket.id).toBe("t0");
    expect(remove(d.state, "t0")).toBe(d.state);
    expect(drain(d.state, () => open).ids).toEqual(["t2", "t3"]);
    expect(schedulerViolations(remove(remove(d.state, "t2"), "t3"))).toEqual([]);
  });

  it("enqueue is idempotent by id and release by lease; a drained tenant leaves nothing behind", () => {
    let s = emptyScheduler();
    s = enqueue(s, ticket("x", "a"));
    expect(enqueue(s, ticket("x", "a", { priority: 9 }))).toBe(s);
    expect(enqueue(s, ticket("x", "b"))).toBe(s);
    const d = next(s, { now: T0, config, tenants: () => open, buckets: {} });
    if (d.decision !== "lease") throw new Error("expected a lease");
    expect(d.ticket.cost).toBe(1);
    expect(enqueue(d.state, ticket("x", "a"))).toBe(d.state); // leased: still a duplicate
    const once = release(d.state, d.ticket);
    expect(release(once, d.ticket)).toBe(once);
    expect(release(emptyScheduler(), d.ticket)).toEqual(emptyScheduler());
    expect(once.running).toBe(0);
    expect(schedulerViolations(once)).toEqual([]);
  });

  it("caller-supplied names are only names (constructor, __proto__, toString)", () => {
    let s = emptyScheduler();
    for (const name of ["constructor", "__proto__", "toString"]) s = enqueue(s, ticket(name, name, { project: name }));
    const tenants = (t: string): TenantPolicy => ({ weight: 1, max_concurrency: 5, project_max_concurrency: { other: 0 } });
    const r = drain(s, tenants);
    expect(r.ids.sort()).toEqual(["__proto__", "constructor", "toString"]);
    expect(Object.keys(metrics(r.state, T0).running_by_tenant).sort()).toEqual(["__proto__", "constructor", "toString"]);
    expect(schedulerViolations(r.state)).toEqual([]);
  });

  it("the state is plain data: a JSON round trip changes no decision (property)", () => {
    const item = fc.record({ tenant: fc.constantFrom("a", "b"), priority: fc.integer({ min: 0, max: 9 }), backdate: fc.nat({ max: 600_000 }) });
    fc.assert(
      fc.property(fc.array(item, { maxLength: 60, size: "max" }), (items) => {
        let s = emptyScheduler();
        items.forEach((it, i) => (s = enqueue(s, ticket(`t${i}`, it.tenant, { priority: it.priority, enqueued_at: T0 - it.backdate }))));
        const copy = JSON.parse(JSON.stringify(s)) as SchedulerState;
        expect(drain(copy, () => open).ids).toEqual(drain(s, () => open).ids);
      }),
    );
  });

  it("metrics: queued and oldest wait by tenant and class, running by tenant", () => {
    let s = emptyScheduler();
    s = enqueue(s, ticket("a1", "a", { enqueued_at: T0 - 5_000 }));
    s = enqueue(s, ticket("a2", "a", { enqueued_at: T0 - 9_000, priority: 1 }));
    s = enqueue(s, ticket("b1", "b", { class: "interactive", enqueued_at: T0 - 1_000 }));
    const d = next(s, { now: T0, config, tenants: () => open, buckets: {} });
    expect(metrics(d.state, T0)).toEqual({
      queued_by_tenant_class: { a: { interactive: 0, approval_resume: 0, automation: 2, migration: 0 } },
      oldest_wait_ms_by_tenant_class: { a: { automation: 9_000 } },
      running_by_tenant: { b: 1 },
      running_by_class: { interactive: 1, approval_resume: 0, automation: 0, migration: 0 },
      queued: 2,
      running: 1,
      leases: 1,
      starvation_events: 0,
    });
  });

  it("schemas: cost defaults to 1, priorities are 0..9, a config needs positive aging", () => {
    expect(TicketSchema.parse(ticket("t", "a")).cost).toBe(1);
    expect(TicketSchema.safeParse(ticket("t", "a", { priority: 10 })).success).toBe(false);
    expect(TicketSchema.safeParse(ticket("t", "a", { cost: 0 })).success).toBe(false);
    expect(SchedulerConfigSchema.safeParse({ ...config, aging_ms: 0 }).success).toBe(false);
  });
});

describe("admission of dynamic expansion (seed 000)", () => {
  const limits: ExpansionLimits = { max_children: 10, max_depth: 3, max_total_steps: 100, max_estimated_cost: 50, max_active_descendants: 200 };
  const fine: ExpansionRequest = { children: 10, depth: 3, total_steps: 100, estimated_cost: 50, tenant_active_descendants: 200 };

  it("admits figures at their limits and names the exceeded one", () => {
    expect(admitExpansion(fine, limits)).toEqual({ ok: true });
    expect(admitExpansion({ ...fine, children: 11 }, limits)).toEqual({ ok: false, code: "too_many_children" });
    expect(admitExpansion({ ...fine, depth: 4 }, limits)).toEqual({ ok: false, code: "depth_exceeded" });
    expect(admitExpansion({ ...fine, total_steps: 101 }, limits)).toEqual({ ok: false, code: "too_many_steps" });
    expect(admitExpansion({ ...fine, estimated_cost: 50.5 }, limits)).toEqual({ ok: false, code: "budget_exceeded" });
    expect(admitExpansion({ ...fine, tenant_active_descendants: 201 }, limits)).toEqual({ ok: false, code: "descendant_quota_exceeded" });
    expect(admitExpansion({ ...fine, estimated_cost: Number.NaN }, limits)).toEqual({ ok: false, code: "budget_exceeded" });
  });

  it("refuses exactly when some figure exceeds its limit, reporting the first in order (property)", () => {
    const fields = ["children", "depth", "total_steps", "estimated_cost", "tenant_active_descendants"] as const;
    const caps = ["max_children", "max_depth", "max_total_steps", "max_estimated_cost", "max_active_descendants"] as const;
    const n = fc.nat({ max: 20 });
    fc.assert(
      fc.property(fc.tuple(n, n, n, n, n), fc.tuple(n, n, n, n, n), (vals, lims) => {
        const req = Object.fromEntries(fields.map((f, i) => [f, vals[i]])) as unknown as ExpansionRequest;
        const lim = Object.fromEntries(caps.map((c, i) => [c, lims[i]])) as unknown as ExpansionLimits;
        const first = fields.findIndex((_, i) => (vals[i] as number) > (lims[i] as number));
        expect(admitExpansion(req, lim)).toEqual(first < 0 ? { ok: true } : { ok: false, code: ADMISSION_CODES[first] });
      }),
    );
  });

  it("a child cannot manufacture priority: never above its parent", () => {
    expect(childPriority(5)).toBe(5);
    expect(childPriority(5, 3)).toBe(3);
    expect(childPriority(5, 9)).toBe(5);
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 9 }), fc.option(fc.integer({ min: -5, max: 20 }), { nil: undefined }), (p, r) => {
        const c = childPriority(p, r);
        expect(c).toBeLessThanOrEqual(p);
        expect(c).toBeGreaterThanOrEqual(0);
      }),
    );
  });
});
