import { describe, expect, it } from "vitest";
import {
  emptyScheduler,
  enqueue,
  next,
  type SchedulerConfig,
  type SchedulerState,
  type TenantPolicy,
  type TicketInput,
} from "../../machines/scheduler/index.js";
import { plan, rootSeed, runDriver, type Emitted } from "./run-driver.js";
import { lookup, T0 } from "./scheduler-support.js";

/** Seed 004 contract rows of issue 41 §3 on the pure machines: the child's ticket and its share. */

const ready = (effects: Emitted[]) => effects.filter((e) => e.channel === "step.ready").map((e) => e.payload as TicketInput & { run: string });

describe("a child run's tickets (C121)", () => {
  it("C121 an invoked child's step tickets carry its own tenant and the batch class, and the scheduler charges them to that tenant's batch share, not a shared one", () => {
    // The parent is interactive: the child it starts is batch whatever its parent's lane.
    const parentPlan = plan({ name: "top", nodes: [{ id: "sub", kind: "subworkflow", workflow: "leaf" }] });
    const parent = runDriver(parentPlan, { child_ids: { sub: "acme_c" }, child_definitions: { leaf: { name: "leaf", version: 1, digest: "d2" } } }, T0);
    const created = parent
      .send({ type: "run.create", run: rootSeed({ id: "acme_p", root_run_id: "acme_p", tenant: "acme", lane: "interactive" }) })
      .find((e) => e.type === "runway.send" && e.event?.type === "run.create");
    const childRun = created!.event!.run as Record<string, unknown>;
    expect(childRun).toMatchObject({ id: "acme_c", tenant: "acme", lane: "batch" });

    const leafPlan = plan({ name: "leaf", nodes: [{ id: "a", kind: "code", handler: "h" }] });
    const tickets = ["acme_c", "acme_c2"].map((id) => {
      const child = runDriver(leafPlan, {}, T0);
      const parentView = { status: "running", tenant: "acme", root_run_id: "acme_p", depth: 0, waits: true };
      const [ticket] = ready(child.send({ type: "run.create", run: { ...childRun, id, start_key: `acme_p:${id}` }, parent: parentView }));
      return ticket!;
    });
    for (const t of tickets) expect(t).toMatchObject({ tenant: "acme", class: "automation" });

    // Two slots; each tenant's batch (automation) work may hold half of them. The second acme
    // child waits on acme's share while another tenant's batch ticket takes the free slot.
    const config: SchedulerConfig = { slots: 2, interactive_reserve: 0, migration_cap: 0, aging_ms: 60_000 };
    const policy: TenantPolicy = { weight: 1, max_concurrency: 10, class_shares: { automation: 0.5 } };
    const tenants = lookup({ acme: policy, other: policy });
    let s: SchedulerState = emptyScheduler();
    for (const t of tickets) s = enqueue(s, { ...t, enqueued_at: T0 });
    s = enqueue(s, { id: "o1", tenant: "other", project: "default", class: "automation", priority: 5, deadline: null, enqueued_at: T0 + 1 });
    const leased: string[] = [];
    for (let d = next(s, { now: T0 + 2, config, tenants, buckets: {} }); d.decision === "lease"; d = next(s, { now: T0 + 2, config, tenants, buckets: {} })) {
      s = d.state;
      leased.push(d.ticket.id);
    }
    expect(leased.sort()).toEqual([tickets[0]!.id, "o1"].sort());
    expect(s.tenants.acme!.leased.map((t) => t.id)).toEqual([tickets[0]!.id]);
    expect(s.tenants.acme!.vtime).toBeGreaterThan(0);
    expect(s.tenants.acme!.queued.automation).toBe(1);
    expect(s.tenants.other!.leased.map((t) => t.id)).toEqual(["o1"]);
  });
});
