import { beforeEach, describe, expect, it } from "vitest";
import { initialTransition, transition, type AnyMachineSnapshot } from "xstate";
import { compileDefinition, executionMachine, type Plan, type RunContext, RunFacts, type RunFact } from "../../machines/index.js";
import { admitExpansionDecision, releaseExpansionDecision, type ExpansionAsk } from "../../machines/tenant/expansion.js";
import { FactReader, reservationKey, type StoreOp } from "../../machines/tenant/members.js";
import { newTenant, TenantSettingsSchema, type TenantContext } from "../../machines/tenant/index.js";
import { rootSeed } from "./run-driver.js";

/** Admission of dynamic expansion: the tenant's decision, and the run machine that waits for it before any item. */

const T0 = 1_000_000;
const limits = { max_children: 50, max_depth: 3, max_total_steps: 100, max_estimated_cost: 80, max_active_descendants: 20 };

function tenant(): TenantContext {
  return { ...newTenant("t"), state: "active", settings: TenantSettingsSchema.parse({ expansion_limits: limits }) };
}

const ask = (over: Record<string, unknown> = {}) => ({ run_id: "t_1", node: "m", children: 10, depth: 1, total_steps: 12, estimated_cost: 12, ...over });

/** The tenant's reservation keys (`x.<run>.<node>`), as its store holds them: read before, written after each decision. */
const keys = new Map<string, unknown>();
function io(run: string, node: string): { facts: FactReader; store: StoreOp[] } {
  const key = reservationKey(run, node);
  return { facts: new FactReader({ [key]: keys.get(key) ?? null }), store: [] };
}
function applied<D>(d: D, ops: StoreOp[]): D {
  for (const op of ops)
    if (op.value === null) keys.delete(op.key);
    else keys.set(op.key, op.value);
  return d;
}
const admit = (c: TenantContext, a: ExpansionAsk, at: number) => {
  const x = io(a.run_id, a.node);
  return applied(admitExpansionDecision(c, a, at, x), x.store);
};
const release = (c: TenantContext, r: { run_id: string; node: string }, at: number) => {
  const x = io(r.run_id, r.node);
  return applied(releaseExpansionDecision(c, r, at, x), x.store);
};

describe("the tenant's expansion decision", () => {
  beforeEach(() => keys.clear());

  it("admits within every limit, counts the items against the tenant, and answers the same again for the same node", () => {
    const a = admit(tenant(), ask(), T0);
    expect(a.answer).toEqual({ outcome: "expansion_admitted", run_id: "t_1", node: "m", children: 10, active_descendants: 10, duplicate: false });
    expect(a.reply).toEqual({ run: "t_1", event: { type: "expansion.admitted", node: "m" } });
    expect(keys.get(reservationKey("t_1", "m"))).toEqual({ c: 10 });
    const again = admit(a.context, ask(), T0 + 1);
    expect(again.answer).toMatchObject({ outcome: "expansion_admitted", duplicate: true, active_descendants: 10 });
    expect(again.context).toBe(a.context);
  });

  it("refuses over the tenant's active-descendant quota, with the code and the figures, and changes nothing", () => {
    const first = admit(tenant(), ask({ children: 15 }), T0).context;
    const refused = admit(first, ask({ run_id: "t_2", children: 6 }), T0);
    expect(refused.answer).toEqual({ outcome: "expansion_refused", run_id: "t_2", node: "m", code: "descendant_quota_exceeded", limit: 20, value: 21 });
    expect(refused.reply?.event).toMatchObject({ type: "expansion.refused", node: "m", code: "descendant_quota_exceeded" });
    expect(refused.context).toBe(first);
    // Exactly at the quota is admitted.
    expect(admit(first, ask({ run_id: "t_2", children: 5 }), T0).answer.outcome).toBe("expansion_admitted");
  });

  it("refuses each other limit with its own code", () => {
    const t = tenant();
    expect(admit(t, ask({ children: 51 }), T0).answer).toMatchObject({ code: "too_many_children", value: 51, limit: 50 });
    expect(admit(t, ask({ depth: 4 }), T0).answer).toMatchObject({ code: "depth_exceeded" });
    expect(admit(t, ask({ total_steps: 101 }), T0).answer).toMatchObject({ code: "too_many_steps" });
    expect(admit(t, ask({ estimated_cost: 81 }), T0).answer).toMatchObject({ code: "budget_exceeded" });
  });

  it("release gives the items back once; an unknown release changes nothing", () => {
    const held = admit(tenant(), ask(), T0).context;
    const released = release(held, { run_id: "t_1", node: "m" }, T0);
    expect(released.answer).toEqual({ outcome: "expansion_released", run_id: "t_1", node: "m", active_descendants: 0 });
    expect(keys.size).toBe(0);
    const twice = release(released.context, { run_id: "t_1", node: "m" }, T0);
    expect(twice.answer.outcome).toBe("not_held");
    expect(twice.context).toBe(released.context);
  });
});

type Emitted = { type: string; channel?: string; payload?: Record<string, unknown>; to?: { kind: string; id: string }; event?: Record<string, unknown> };
const emitted = (actions: readonly { type: string }[]) =>
  actions.filter((a) => (a.type as string) === "xstate.emit").map((a) => (a as unknown as { params: { event: Emitted } }).params.event);

/** Adds a transition's journal facts to the run's memory, as the actor does once it is stored. */
function remember(memory: RunFacts, effects: Emitted[]): Emitted[] {
  for (const e of effects) if (e.type === "runway.journal") memory.add((e as unknown as { data: RunFact }).data);
  return effects;
}

function plan(definition: object): Plan {
  const c = compileDefinition(definition, { handlers: new Set(["h"]) });
  if (!c.ok) throw new Error(JSON.stringify(c.errors));
  return c.plan;
}

describe("a map under expansion admission", () => {
  const p = plan({
    name: "w",
    nodes: [
      { id: "m", kind: "map", items: "${input.list}", handler: "h", max_fanout: 100 },
      { id: "after", kind: "code", needs: ["m"], handler: "h" },
    ],
  });
  const seed = rootSeed({ lane: "interactive" as const, input: { list: [1, 2, 3] } });

  function start() {
    let [snap] = initialTransition(executionMachine) as [AnyMachineSnapshot, unknown];
    const memory = new RunFacts();
    const send = (event: object, now = T0) => {
      const [next, actions] = transition(executionMachine, snap, { ...event, now, plan: p, memory, expansion_admission: true } as never);
      snap = next;
      return remember(memory, emitted(actions));
    };
    const created = send({ type: "run.create", run: seed });
    return {
      send,
      created,
      run: () => snap.context.run as RunContext,
      can: (e: object) => snap.can({ ...e, now: T0, plan: p, expansion_admission: true } as never),
    };
  }

  it("asks its tenant before any item exists; on admission the items start", () => {
    const r = start();
    expect(r.created).toContainEqual({
      type: "runway.send",
      to: { kind: "tenant", id: "t" },
      event: { type: "tenant.admit_expansion", run_id: "t_1", node: "m", children: 3, depth: 1, total_steps: 5, estimated_cost: 4 },
    });
    expect(r.created.filter((e) => e.channel === "step.ready")).toEqual([]);
    expect(r.run().nodes.m).toMatchObject({ s: "active", expansion: { state: "pending", children: 3 } });
    expect(r.run().nodes.m!.map).toBeUndefined();
    const started = r.send({ type: "expansion.admitted", node: "m" });
    expect(started.filter((e) => e.channel === "step.ready").map((e) => e.payload!.item)).toEqual([0, 1, 2]);
    expect(r.can({ type: "expansion.admitted", node: "m" })).toBe(false);
  });

  it("a refusal fails the node with its code before any item started, and the run ends failed", () => {
    const r = start();
    const effects = r.send({
      type: "expansion.refused",
      node: "m",
      code: "descendant_quota_exceeded",
      message: "descendant_quota_exceeded: 21 over the tenant's limit of 20",
    });
    expect(effects.filter((e) => e.channel === "step.ready")).toEqual([]);
    expect(r.run().nodes.m).toMatchObject({ s: "failed", error: { code: "descendant_quota_exceeded" } });
    expect(r.run().nodes.m!.map).toBeUndefined();
    expect(r.run().lifecycle.status).toBe("failed");
    // A refused expansion held nothing, but its release is harmless (the tenant answers not_held).
    expect(effects).toContainEqual({
      type: "runway.send",
      to: { kind: "tenant", id: "t" },
      event: { type: "tenant.release_expansion", run_id: "t_1", node: "m" },
    });
  });

  it("the items are given back once the map settles, and once only", () => {
    const r = start();
    const started = r.send({ type: "expansion.admitted", node: "m" }).filter((e) => e.channel === "step.ready");
    let releases = 0;
    for (const e of started) {
      const request = (e.payload as { request: { item: number; attempt: number; lease_epoch: number } }).request;
      const out = r.send({
        type: "step.result",
        node: "m",
        item: request.item,
        attempt: request.attempt,
        lease_epoch: request.lease_epoch,
        outcome: "succeeded",
        output: 1,
      });
      releases += out.filter((x) => x.event?.type === "tenant.release_expansion").length;
    }
    expect(releases).toBe(1);
    expect(r.run().nodes.m!.expansion).toBeUndefined();
  });

  it("a run cancelled while its expansion is pending gives it back (the admission may still arrive) and ignores a late answer", () => {
    const r = start();
    const effects = r.send({ type: "run.cancel", reason: "stop", by: "test" });
    expect(effects).toContainEqual({
      type: "runway.send",
      to: { kind: "tenant", id: "t" },
      event: { type: "tenant.release_expansion", run_id: "t_1", node: "m" },
    });
    expect(r.can({ type: "expansion.admitted", node: "m" })).toBe(false);
  });
});

describe("what a run's attempts carry to the scheduler", () => {
  const p = plan({
    name: "w",
    nodes: [
      { id: "a", kind: "code", handler: "h", cost: 3 },
      { id: "m", kind: "map", needs: ["a"], items: "${input.list}", handler: "h", max_fanout: 10, cost: 2 },
      { id: "sub", kind: "subworkflow", needs: ["m"], workflow: "leaf" },
    ],
  });
  const prepared = {
    plan: p,
    expansion_admission: true,
    child_ids: { sub: "t_c" },
    child_definitions: { leaf: { name: "leaf", version: 1, digest: "d2" } },
  };
  const seed = rootSeed({ lane: "interactive" as const, project: "billing", priority: 7, deadline: T0 + 60_000, input: { list: [1, 2, 3] } });

  it("project, priority, deadline and the node's estimated cost; a map's estimate is items × cost; a child inherits, batch, never above its parent", () => {
    let [snap] = initialTransition(executionMachine) as [AnyMachineSnapshot, unknown];
    const memory = new RunFacts();
    const send = (event: object) => {
      const [next, actions] = transition(executionMachine, snap, { ...event, now: T0, memory, ...prepared } as never);
      snap = next;
      return remember(memory, emitted(actions));
    };
    const ticket = send({ type: "run.create", run: seed }).find((e) => e.channel === "step.ready")!.payload!;
    expect(ticket).toMatchObject({ tenant: "t", project: "billing", priority: 7, deadline: T0 + 60_000, cost: 3, class: "interactive" });
    const asked = send({ type: "step.result", node: "a", attempt: 1, lease_epoch: 1, outcome: "succeeded", output: 1 });
    expect(asked.find((e) => e.event?.type === "tenant.admit_expansion")?.event).toMatchObject({ children: 3, estimated_cost: 3 + 3 * 2 });
    const items = send({ type: "expansion.admitted", node: "m" })
      .filter((e) => e.channel === "step.ready")
      .map((e) => e.payload!);
    expect(items.map((t) => [t.item, t.cost, t.project, t.priority])).toEqual([
      [0, 2, "billing", 7],
      [1, 2, "billing", 7],
      [2, 2, "billing", 7],
    ]);
    let child: Emitted | undefined;
    for (const t of items) {
      const out = send({ type: "step.result", node: "m", item: t.item, attempt: 1, lease_epoch: 1, outcome: "succeeded", output: t.item });
      child ??= out.find((e) => e.event?.type === "run.create");
    }
    expect((child!.event as { run: object }).run).toMatchObject({
      lane: "batch",
      project: "billing",
      priority: 7,
      deadline: T0 + 60_000,
      parent_run_id: "t_1",
      depth: 1,
    });
  });
});
