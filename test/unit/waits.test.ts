import { describe, expect, it } from "vitest";
import { type Plan } from "../../machines/index.js";
import { runShapeViolations } from "../../machines/run/index.js";
import { executes, plan, runDriver, type Emitted, rootSeed } from "./run-driver.js";

/** Seed 004's wait and approval contract rows on the pure run machine: expiry under the one status rule, branches that park, cancelling a parked run. */

const T0 = 1_000_000;
const HOUR = 3_600_000;

const seed = rootSeed();

function started(p: Plan) {
  const r = runDriver(p, {}, T0);
  const effects = r.send({ type: "run.create", run: seed });
  return { r, effects };
}

const shape = (r: ReturnType<typeof runDriver>) =>
  runShapeViolations({ ...r.run.lifecycle, id: r.run.id, root_run_id: r.run.root_run_id, parent_run_id: r.run.parent_run_id });
const events = (effects: Emitted[]) => effects.filter((e) => e.type === "runway.event").map((e) => (e as unknown as { data: { type: string } }).data.type);

describe("an expired action approval (the one status rule)", () => {
  const gated = plan({
    name: "w",
    nodes: [
      { id: "prep", kind: "code", handler: "h" },
      { id: "gate", kind: "approval", prompt: "go?", needs: ["prep"], timeout_ms: HOUR },
      { id: "send", kind: "code", handler: "h", needs: ["gate"] },
    ],
  });

  it("C036 C095 after earlier work: the run succeeds with partial_reason approval_expired, and the gated step is never offered", () => {
    const { r, effects } = started(gated);
    const [prep] = executes(effects);
    r.result(prep!, "succeeded", { ok: 1 });
    expect(r.run.lifecycle).toMatchObject({ status: "waiting", waiting_on: "approval", waiting_ref: "t_1:gate" });
    const expires = (r.run.nodes.gate!.approval as { expires_at: number }).expires_at;
    const expiry = r.send({ type: "timer.fired", kind: "approval", node: "gate" }, expires + 1);
    expect(executes(expiry)).toEqual([]);
    expect(r.run.lifecycle.status).toBe("succeeded");
    expect(r.run.partial_reason).toBe("approval_expired");
    expect(r.run.error).toBeNull();
    expect(r.run.nodes.gate).toMatchObject({ s: "failed", error: { code: "approval_expired" }, approval: { state: "expired" } });
    expect(r.run.nodes.send!.s).toBe("cancelled");
    expect(events(expiry)).toEqual(expect.arrayContaining(["approval_expired", "ceiling_reached", "run_succeeded"]));
    expect(shape(r)).toEqual([]);
  });

  it("C036 C095 before any work: the run fails approval_expired, and nothing after the gate is offered", () => {
    const { r } = started(
      plan({
        name: "w",
        nodes: [
          { id: "gate", kind: "approval", prompt: "go?", timeout_ms: HOUR },
          { id: "send", kind: "code", handler: "h", needs: ["gate"] },
        ],
      }),
    );
    // The deadline itself is still in time: a timer early (or exactly on it) expires nothing.
    expect(executes(r.send({ type: "timer.fired", kind: "approval", node: "gate" }, T0 + HOUR))).toEqual([]);
    expect(r.run.lifecycle.status).toBe("waiting");
    expect(executes(r.send({ type: "timer.fired", kind: "approval", node: "gate" }, T0 + HOUR + 1))).toEqual([]);
    expect(r.run.lifecycle.status).toBe("failed");
    expect(r.run.error).toMatchObject({ code: "approval_expired" });
    expect(r.run.partial_reason).toBeUndefined();
    expect(r.run.nodes.send!.s).toBe("cancelled");
  });
});

describe("a branch that parks", () => {
  const mixed = plan({
    name: "w",
    nodes: [
      {
        id: "par",
        kind: "parallel",
        branches: [
          [{ id: "gate", kind: "approval", prompt: "go?", timeout_ms: HOUR }],
          [
            { id: "a1", kind: "code", handler: "h" },
            { id: "a2", kind: "code", handler: "h", needs: ["a1"] },
          ],
          [{ id: "hold", kind: "wait", signal: "go", timeout_ms: 2 * HOUR }],
        ],
      },
      { id: "after", kind: "code", handler: "h", needs: ["par"] },
    ],
  });

  it("C103 C055 a branch parked on an approval (another on a signal) does not stop its sibling: both of its steps are offered and complete while the run waits, naming the approval", () => {
    const { r, effects } = started(mixed);
    const [a1] = executes(effects);
    expect(a1!.node).toBe("a1");
    expect(r.run.lifecycle).toMatchObject({ status: "waiting", waiting_on: "approval", waiting_ref: "t_1:gate", waiting_expires_at: T0 + 2 * HOUR + 60_000 });
    expect(shape(r)).toEqual([]);
    const [a2] = executes(r.result(a1!));
    expect(a2!.node).toBe("a2");
    expect(r.run.lifecycle.status).toBe("waiting");
    r.result(a2!);
    expect(r.run.nodes.a2!.s).toBe("succeeded");
    expect(r.run.nodes.gate!.s).toBe("active");
    // The approval decided, the run still waits, now on the signal.
    r.send({ type: "approval.decide", node: "gate", decision: "approve", by: "alice" });
    expect(r.run.lifecycle).toMatchObject({ status: "waiting", waiting_on: "event", waiting_ref: "hold" });
    const [after] = executes(r.send({ type: "run.signal", name: "go", data: null, by: "api" }));
    expect(after!.node).toBe("after");
    expect(r.run.lifecycle).toMatchObject({ status: "running", waiting_on: null, waiting_ref: null, waiting_expires_at: null });
    r.result(after!);
    expect(r.run.lifecycle.status).toBe("succeeded");
  });

  const two = plan({
    name: "w",
    nodes: [
      {
        id: "par",
        kind: "parallel",
        branches: [
          [
            { id: "pre", kind: "code", handler: "h" },
            { id: "late", kind: "approval", prompt: "late?", needs: ["pre"], timeout_ms: HOUR },
          ],
          [{ id: "early", kind: "approval", prompt: "early?", timeout_ms: HOUR }],
        ],
      },
      { id: "work", kind: "code", handler: "h", needs: ["par"] },
    ],
  });

  /** Both approvals pending: `early` asked at T0, `late` (first in plan order) after its branch's first step. */
  function bothPending() {
    const { r, effects } = started(two);
    const [pre] = executes(effects);
    r.send({ type: "step.result", node: "pre", attempt: pre!.attempt, lease_epoch: pre!.lease_epoch, outcome: "succeeded", output: 1 }, T0 + 5);
    expect(r.run.nodes.late!.approval).toMatchObject({ state: "pending", requested_at: T0 + 5 });
    return r;
  }

  it("C104 the run names its oldest pending approval; resolving it leaves the run waiting, naming the other", () => {
    const r = bothPending();
    expect(r.run.lifecycle).toMatchObject({ status: "waiting", waiting_on: "approval", waiting_ref: "t_1:early" });
    r.send({ type: "approval.decide", node: "early", decision: "approve", by: "alice" });
    expect(r.run.lifecycle).toMatchObject({ status: "waiting", waiting_on: "approval", waiting_ref: "t_1:late" });
    expect(shape(r)).toEqual([]);
  });

  it("C107 two branch approvals resolve in either order: the run wakes once, after the second, and completes", () => {
    for (const order of [
      ["early", "late"],
      ["late", "early"],
    ]) {
      const r = bothPending();
      const first = r.send({ type: "approval.decide", node: order[0], decision: "approve", by: "alice" });
      expect(executes(first), order.join(" then ")).toEqual([]);
      expect(r.run.lifecycle.status).toBe("waiting");
      const second = r.send({ type: "approval.decide", node: order[1], decision: "approve", by: "bob" });
      expect(executes(second).map((e) => e.node)).toEqual(["work"]);
      expect(r.run.lifecycle.status).toBe("running");
      r.result(executes(second)[0]!);
      expect(r.run.lifecycle.status, order.join(" then ")).toBe("succeeded");
    }
  });

  it("C108 after its approval the run is running, not waiting, while the next step executes", () => {
    const { r } = started(
      plan({
        name: "w",
        nodes: [
          { id: "gate", kind: "approval", prompt: "go?", timeout_ms: HOUR },
          { id: "next", kind: "code", handler: "h", needs: ["gate"] },
        ],
      }),
    );
    expect(r.run.lifecycle.status).toBe("waiting");
    const [next] = executes(r.send({ type: "approval.decide", node: "gate", decision: "approve", by: "alice" }));
    expect(next!.node).toBe("next");
    expect(r.run.lifecycle).toMatchObject({ status: "running", waiting_on: null, waiting_ref: null, waiting_expires_at: null });
    r.send({ type: "step.heartbeat", node: "next", attempt: next!.attempt, lease_epoch: next!.lease_epoch });
    expect(r.run.lifecycle.status).toBe("running");
  });
});

describe("cancelling a parked run", () => {
  it("C013 a run parked on an approval or a signal is cancelled with its three waiting fields cleared, and its shape holds; the approval is no longer pending", () => {
    for (const node of [
      { id: "gate", kind: "approval", prompt: "go?", timeout_ms: HOUR },
      { id: "gate", kind: "wait", signal: "go", timeout_ms: HOUR },
    ]) {
      const { r } = started(plan({ name: "w", nodes: [node, { id: "next", kind: "code", handler: "h", needs: ["gate"] }] }));
      expect(r.run.lifecycle.status).toBe("waiting");
      const effects = r.send({ type: "run.cancel", reason: "no longer needed", by: "api" });
      // The answer carries the run as the cancel left it, so the API reads nothing back.
      expect(effects.find((e) => e.type === "runway.answer")?.value).toMatchObject({
        outcome: "cancelled",
        run: { id: r.run.id, status: "cancelled", cancel: { reason: "no longer needed", by: "api", enforced_at: expect.any(Number) } },
      });
      expect(r.run.lifecycle).toMatchObject({ status: "cancelled", waiting_on: null, waiting_ref: null, waiting_expires_at: null });
      expect(shape(r)).toEqual([]);
      expect(r.run.nodes.gate!.s).toBe("cancelled");
      if (node.kind === "approval") expect(r.run.nodes.gate!.approval).toMatchObject({ state: "cancelled" });
      expect(r.snap.value).toBe("cancelled");
    }
  });
});
