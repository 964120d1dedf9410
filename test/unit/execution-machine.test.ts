import { describe, expect, it } from "vitest";
import { initialTransition, transition, type AnyMachineSnapshot } from "xstate";
import { compileDefinition, executionMachine, type ExecuteRequest, type Plan } from "../../machines/index.js";
import { emitted, executes, rootSeed, runDriver } from "./run-driver.js";

function plan(definition: object): Plan {
  const c = compileDefinition(definition, { handlers: new Set(["h"]) });
  if (!c.ok) throw new Error(JSON.stringify(c.errors));
  return c.plan;
}

const seed = (id = "t_1") => rootSeed({ id, root_run_id: id, lane: "interactive" as const, input: { list: [3, 1, 2] } });

/** Drives the machine with a fixed completion schedule; returns every snapshot and effect. */
function drive(p: Plan, order: (pending: ExecuteRequest[]) => ExecuteRequest[]) {
  const r = runDriver(p);
  const trace: unknown[] = [];
  const send = (event: object) => {
    const effects = r.send(event);
    trace.push({ state: r.snap.value, effects });
    return effects;
  };
  let pending = executes(send({ type: "run.create", run: seed() }));
  while (pending.length > 0) {
    const [first, ...rest] = order(pending);
    const effects = send({
      type: "step.result",
      node: first!.node,
      ...(first!.item !== undefined ? { item: first!.item } : {}),
      attempt: first!.attempt,
      lease_epoch: first!.lease_epoch,
      outcome: "succeeded",
      output: first!.input ?? first!.node,
    });
    pending = [...rest, ...executes(effects)];
  }
  return { snap: r.snap, trace, result: r.run.result };
}

describe("the run actor's machine", () => {
  const p = plan({
    name: "w",
    nodes: [
      { id: "a", kind: "code", handler: "h" },
      { id: "par", kind: "parallel", needs: ["a"], branches: [[{ id: "b", kind: "code", handler: "h" }], [{ id: "c", kind: "code", handler: "h" }]] },
      { id: "m", kind: "map", needs: ["par"], items: "${input.list}", handler: "h", max_fanout: 5 },
    ],
  });

  it("a walk over the same definition and the same recorded outputs yields the same order, states and effects", () => {
    const one = drive(p, (xs) => xs);
    const two = drive(p, (xs) => xs);
    expect(JSON.stringify(two.trace)).toBe(JSON.stringify(one.trace));
    expect(one.snap.value).toBe("succeeded");
  });

  it("a map keeps input order whatever order its items complete in", () => {
    const reversed = drive(p, (xs) => [...xs].reverse());
    expect(reversed.result).toMatchObject({ m: [3, 1, 2] });
    expect(reversed.snap.context.run.lifecycle.status).toBe("succeeded");
  });

  it("succeed cannot overwrite a run cancelled a moment earlier; the cancelled run never moves", () => {
    let [snap] = initialTransition(executionMachine) as [AnyMachineSnapshot, unknown];
    const [created, actions] = transition(executionMachine, snap, { type: "run.create", run: seed(), now: 1, plan: p } as never);
    const exec = executes(emitted(actions))[0]!;
    [snap] = transition(executionMachine, created, { type: "run.cancel", reason: "stop", by: "test", now: 2, plan: p } as never);
    expect(snap.context.run.lifecycle.status).toBe("cancelled");
    const late = {
      type: "step.result",
      node: exec.node,
      attempt: exec.attempt,
      lease_epoch: exec.lease_epoch,
      outcome: "succeeded",
      output: 1,
      now: 3,
      plan: p,
    };
    // Answered with a closed code, and nothing changes (the host stores nothing for it).
    const [after, out] = transition(executionMachine, snap, late as never);
    expect(after.context).toBe(snap.context);
    expect(after.context.run?.lifecycle.status).toBe("cancelled");
    expect(emitted(out)).toEqual([{ type: "runway.answer", value: { outcome: "stale_lease" } }]);
    // The attempt began before the cancel: its report says so.
    const [, fenced] = transition(executionMachine, snap, { ...late, cancellation_epoch: exec.cancellation_epoch } as never);
    expect(emitted(fenced)).toEqual([{ type: "runway.answer", value: { outcome: "stale_cancel_epoch" } }]);
    const [, beat] = transition(executionMachine, snap, {
      type: "step.heartbeat",
      node: exec.node,
      attempt: exec.attempt,
      lease_epoch: exec.lease_epoch,
      cancellation_epoch: exec.cancellation_epoch,
      now: 3,
      plan: p,
    } as never);
    expect(emitted(beat)).toEqual([{ type: "runway.answer", value: { outcome: "stale_cancel_epoch" } }]);
    expect(snap.can({ type: "run.cancel", reason: "again", by: "test", now: 4, plan: p } as never)).toBe(false);
  });

  it("a result from a stale attempt or lease epoch is refused", () => {
    const [snap, actions] = transition(executionMachine, initialTransition(executionMachine)[0], { type: "run.create", run: seed(), now: 1, plan: p } as never);
    const exec = executes(emitted(actions))[0]!;
    const stale = { type: "step.result", node: exec.node, attempt: exec.attempt, lease_epoch: exec.lease_epoch + 1, outcome: "succeeded", now: 2, plan: p };
    // Answered stale_lease, and nothing changes (the host stores nothing for it).
    const [after, out] = transition(executionMachine, snap, stale as never);
    expect(after.context).toBe(snap.context);
    expect(emitted(out)).toEqual([{ type: "runway.answer", value: { outcome: "stale_lease" } }]);
  });

  it("a subworkflow node of a run at the deepest depth fails depth_exceeded and starts no child (the run-time guard behind the publish-time check)", () => {
    const tree = plan({ name: "w", nodes: [{ id: "sub", kind: "subworkflow", workflow: "leaf" }] });
    const [snap, actions] = transition(executionMachine, initialTransition(executionMachine)[0], {
      type: "run.create",
      run: { ...seed(), depth: 5, root_run_id: "t_r", parent_run_id: "t_p", parent_node: "n", lane: "batch" },
      parent: { status: "running", tenant: "t", root_run_id: "t_r", depth: 4, waits: true },
      now: 1,
      plan: tree,
      child_ids: { sub: "t_c" },
      child_definitions: { leaf: { name: "leaf", version: 1, digest: "d2" } },
    } as never);
    expect(snap.context.run?.nodes.sub).toMatchObject({ s: "failed", error: { code: "depth_exceeded" } });
    expect(emitted(actions).filter((e) => e.event?.type === "run.create")).toEqual([]);
  });
});
