import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { AnyMachineSnapshot, EventObject } from "xstate";
import { runActor, type LiveRunIndex } from "../../actors/index.js";
import type { CompiledPlan } from "../../actors/definitions/store.js";
import type { TenantGate } from "../../actors/run/actor.js";
import { RunwayFault } from "../../runtime/index.js";

/**
 * The run actor's `prepare`: a create waits for the live-run index first; a plan that fails
 * meanwhile must reach the command as its answer, not the process as an unhandled rejection
 * (Node 20 ends a process on one).
 */
const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown) => void unhandled.push(reason);
beforeEach(() => void process.on("unhandledRejection", onUnhandled));
afterEach(() => {
  process.off("unhandledRejection", onUnhandled);
  unhandled.length = 0;
});

const plan = { plan: { nodes: [] }, children: {} } as unknown as CompiledPlan;
const create = (id: string) =>
  ({ type: "run.create", now: 1, run: { id, tenant: "t", parent_run_id: null, definition: { digest: "d" } } }) as unknown as EventObject;

function actor(planOf: () => Promise<CompiledPlan>, addMs: number) {
  const live = { add: () => new Promise<void>((r) => setTimeout(r, addMs)) } as unknown as LiveRunIndex;
  return runActor(
    {
      planOf,
      parentOf: () => Promise.resolve(null),
      memories: { of: () => Promise.reject(new Error("not asked")), stored: () => undefined, forget: () => undefined },
    },
    { live: () => live },
  );
}

it("answers a create with its plan once the run is in the live-run index, and a counted run's create (its tenant's member key indexes it) with its plan", async () => {
  expect(await actor(() => Promise.resolve(plan), 1).prepare!(create("r1"), undefined, [], new Map())).toMatchObject({
    type: "run.create",
    plan: plan.plan,
    child_ids: {},
  });
  const counted = { ...create("r2"), run: { ...(create("r2") as unknown as { run: object }).run, counted: true } } as EventObject;
  expect(await actor(() => Promise.resolve(plan), 1).prepare!(counted, undefined, [], new Map())).toMatchObject({ plan: plan.plan });
});

it("refuses a create whose plan fails while the run is being indexed, with the plan's fault and no unhandled rejection", async () => {
  const fault = new RunwayFault("plan_not_found", "no plan d");
  const prepared = actor(() => Promise.reject(fault), 30).prepare!(create("r3"), undefined, [], new Map());
  await expect(prepared).rejects.toBe(fault);
  // Past the turn in which Node reports a rejection nobody handled (it does so before any immediate runs).
  await new Promise((r) => setImmediate(r));
  expect(unhandled).toEqual([]);
});

it("reads no memory for an ended run (it only answers), and does for a live one", async () => {
  const run = { id: "r4", tenant: "t", parent_run_id: null, definition: { digest: "d" }, nodes: {} };
  const late = { type: "step.result", now: 2, node: "s", attempt: 1, lease_epoch: 1 } as unknown as EventObject;
  const ended = { value: "succeeded", context: { run } } as unknown as AnyMachineSnapshot;
  const prepared = await actor(() => Promise.resolve(plan), 1).prepare!(late, ended, [], new Map());
  expect(prepared).not.toHaveProperty("memory");
  const live = { value: { live: "running" }, context: { run } } as unknown as AnyMachineSnapshot;
  await expect(actor(() => Promise.resolve(plan), 1).prepare!(late, live, [], new Map())).rejects.toThrow("not asked");
});

describe("a child's create reads its start gate (C047)", () => {
  const parent = { status: "running" as const, tenant: "t", root_run_id: "p", depth: 0, waits: true };
  const childCreate = () =>
    ({
      type: "run.create",
      now: 1,
      run: { id: "c1", tenant: "t", parent_run_id: "p", parent_node: "sub", definition: { name: "leaf", version: 2, digest: "d" } },
    }) as unknown as EventObject;
  function childActor(planOf: () => Promise<CompiledPlan>, gate: TenantGate = { outcome: "open" }) {
    return runActor({
      planOf,
      parentOf: () => Promise.resolve(parent),
      tenantGate: () => Promise.resolve(gate),
      memories: { of: () => Promise.reject(new Error("not asked")), stored: () => undefined, forget: () => undefined },
    });
  }

  it("C047 a pinned plan this deployment cannot read (missing, or not parsing) is snapshot_unbuildable with an empty plan, not a thrown fault; a store that did not answer still throws", async () => {
    for (const err of [new RunwayFault("plan_not_found", "no plan with digest d"), new SyntaxError("Unexpected token")]) {
      const prepared = await childActor(() => Promise.reject(err)).prepare!(childCreate(), undefined, [], new Map());
      expect(prepared).toMatchObject({ parent, plan: { nodes: [] }, refused: { code: "snapshot_unbuildable", message: expect.stringContaining("leaf v2") } });
    }
    const down = new RunwayFault("store_unavailable", "no answer", { kind: "retryable" });
    await expect(childActor(() => Promise.reject(down)).prepare!(childCreate(), undefined, [], new Map())).rejects.toBe(down);
  });

  it("C047 the tenant's gate: a record that does not decode is policy_unavailable, a killed tenant tenant_killed, an open one no refusal", async () => {
    const read = (gate: TenantGate) => childActor(() => Promise.resolve(plan), gate).prepare!(childCreate(), undefined, [], new Map());
    expect(await read({ outcome: "policy_unavailable", detail: "does not decode" })).toMatchObject({
      plan: plan.plan,
      refused: { code: "policy_unavailable", message: "does not decode" },
    });
    expect(await read({ outcome: "tenant_killed", detail: "kill switch" })).toMatchObject({ refused: { code: "tenant_killed" } });
    expect(await read({ outcome: "open" })).not.toHaveProperty("refused");
  });
});

it("C047 a late command to an ended run whose plan no longer reads (a child ended snapshot_unbuildable) is answered on an empty plan, not a thrown fault", async () => {
  const run = { id: "c2", tenant: "t", parent_run_id: "p", definition: { name: "leaf", version: 1, digest: "gone" }, nodes: {} };
  const late = { type: "step.result", now: 2, node: "s", attempt: 1, lease_epoch: 1 } as unknown as EventObject;
  const ended = { value: "failed", context: { run } } as unknown as AnyMachineSnapshot;
  const prepared = await actor(() => Promise.reject(new RunwayFault("plan_not_found", "no plan with digest gone")), 1).prepare!(late, ended, [], new Map());
  expect(prepared).toMatchObject({ plan: { nodes: [] } });
});
