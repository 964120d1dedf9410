import { describe, expect, it } from "vitest";
import { ADMISSION, compileDefinition, type RunContext } from "../../machines/index.js";
import { runShapeViolations } from "../../machines/run/index.js";
import { WAIT_GRACE_MS } from "../../machines/execution/index.js";
import { executes, plan, rootSeed, runDriver, type Emitted } from "./run-driver.js";
import { tenantDriver } from "./tenant-twin.js";

/** Admission approvals in the run machine (machines/execution/admission.ts) and the tenant's answer to a run that asks for itself. */

const T0 = 1_000_000;
const DAY = 86_400_000;
const DEF = {
  name: "gated",
  admission: { approval: { prompt: "Run this?", group: "ops", escalation_group: "cto", timeout_ms: DAY } },
  nodes: [{ id: "work", kind: "code", handler: "h", input: "${input}" }],
};
const p = plan(DEF);
const seed = rootSeed({ definition: { name: "gated", version: 1, digest: "d" }, input: { amount: 5 } });
const approval = `t_1:${ADMISSION}`;
const shapeOf = (r: RunContext) => runShapeViolations({ ...r.lifecycle, id: r.id, root_run_id: r.root_run_id, parent_run_id: r.parent_run_id });
const sentTo = (effects: Emitted[], kind: string) => effects.filter((e) => e.type === "runway.send" && e.to?.kind === kind);

function held() {
  const d = runDriver(p, {}, T0);
  const effects = d.send({ type: "run.create", run: seed }, T0);
  return { d, effects };
}

describe("the policy is validated and compiled at publish", () => {
  it("a definition's admission approval compiles with its timeout resolved (default 7 days); a malformed one is refused", () => {
    expect(p.admission).toEqual({ approval: { prompt: "Run this?", group: "ops", escalation_group: "cto", timeout_ms: DAY } });
    const plain = plan({ ...DEF, admission: { approval: { prompt: "ok?" } } });
    expect(plain.admission?.approval.timeout_ms).toBe(7 * DAY);
    for (const bad of [{ approval: {} }, { approval: { prompt: "" } }, { approval: { prompt: "x", group: "a b" } }, { approval: { prompt: "x" }, extra: 1 }]) {
      const c = compileDefinition({ ...DEF, admission: bad }, { handlers: new Set(["h"]) });
      expect(c.ok).toBe(false);
      if (!c.ok) expect(c.errors[0]?.path).toMatch(/^admission/);
    }
  });
});

describe("a run held by its admission approval", () => {
  it("its create holds it in the one write: waiting on the approval (named), the request journaled, one timer; no tenant asked, nothing offered", () => {
    const { d, effects } = held();
    const lc = d.run.lifecycle;
    expect(lc).toMatchObject({ status: "waiting", waiting_on: "approval", waiting_ref: approval, started_at: null });
    expect(lc.waiting_expires_at).toBe(T0 + DAY + WAIT_GRACE_MS);
    expect(shapeOf(d.run)).toEqual([]);
    expect(d.run.admission_approval).toMatchObject({
      id: approval,
      state: "pending",
      prompt: "Run this?",
      group: "ops",
      escalation_group: "cto",
      payload: { definition: { name: "gated", version: 1 }, input: { amount: 5 } },
      expires_at: T0 + DAY,
    });
    expect(effects.filter((e) => e.type === "runway.timer.set")).toEqual([
      expect.objectContaining({ at: T0 + DAY + 1, event: { type: "timer.fired", kind: "admission", node: "(run)" } }),
    ]);
    expect(effects.filter((e) => e.type === "runway.journal").map((e) => (e.data as { t: string }).t)).toEqual(["input", "approval"]);
    expect(sentTo(effects, "tenant")).toEqual([]);
    expect(executes(effects)).toEqual([]);
    expect(effects.find((e) => e.type === "runway.answer")?.value).toMatchObject({ outcome: "started", run: { status: "waiting" } });
  });

  it("C021 approved, it asks its tenant (queued); admitted, the claim reads running with the waiting fields cleared and the shape holds", () => {
    const { d } = held();
    const decided = d.send({ type: "approval.decide", node: ADMISSION, decision: "approve", by: "alice" });
    expect(decided.find((e) => e.type === "runway.answer")?.value).toEqual({ outcome: "decided", approval, decision: "approved" });
    expect(d.run.lifecycle).toMatchObject({ status: "queued", waiting_on: null, waiting_ref: null, waiting_expires_at: null, started_at: null });
    expect(shapeOf(d.run)).toEqual([]);
    expect(sentTo(decided, "tenant").map((e) => e.event)).toEqual([{ type: "tenant.admit_run", run_id: "t_1", project: "default", tell_run: true }]);
    expect(executes(decided)).toEqual([]);
    const claimed = d.send({ type: "run.admitted" }, T0 + 10);
    expect(d.run.lifecycle).toMatchObject({ status: "running", waiting_on: null, waiting_ref: null, waiting_expires_at: null, started_at: T0 + 10 });
    expect(shapeOf(d.run)).toEqual([]);
    expect(executes(claimed).map((x) => x.node)).toEqual(["work"]);
    expect(d.snap.value).toEqual({ live: "running" });
    expect(d.send({ type: "approval.decide", node: ADMISSION, decision: "reject", by: "bob" }).find((e) => e.type === "runway.answer")?.value).toEqual({
      outcome: "already_decided",
    });
  });

  it("C034 rejected, it is cancelled and nothing is offered or sent but its end; its approval is decided once", () => {
    const { d } = held();
    const effects = d.send({ type: "approval.decide", node: ADMISSION, decision: "reject", reason: "not today", by: "alice" });
    expect(d.run.lifecycle).toMatchObject({ status: "cancelled", waiting_on: null, started_at: null });
    expect(d.snap.value).toBe("cancelled");
    expect(shapeOf(d.run)).toEqual([]);
    expect(d.run.cancel).toMatchObject({ by: "alice", reason: "admission rejected: not today" });
    expect(d.run.nodes.work!.s).toBe("cancelled");
    expect(executes(effects)).toEqual([]);
    expect(sentTo(effects, "tenant").map((e) => e.event?.type)).toEqual(["tenant.run_ended"]);
    expect(d.send({ type: "approval.decide", node: ADMISSION, decision: "approve", by: "bob" }).find((e) => e.type === "runway.answer")?.value).toEqual({
      outcome: "already_decided",
    });
  });

  it("C035 C127 unanswered, its one timer ends it failed approval_expired at the deadline (not before); nothing ran; a late decision answers approval_expired", () => {
    const { d } = held();
    expect(d.can({ type: "timer.fired", kind: "admission", node: "(run)" }, T0 + DAY)).toBe(true);
    d.send({ type: "timer.fired", kind: "admission", node: "(run)" }, T0 + DAY);
    expect(d.run.lifecycle.status).toBe("waiting");
    const effects = d.send({ type: "timer.fired", kind: "admission", node: "(run)" }, T0 + DAY + 1);
    expect(d.run.lifecycle).toMatchObject({ status: "failed", started_at: null, waiting_on: null });
    expect(d.run.error?.code).toBe("approval_expired");
    expect(d.run.admission_approval).toMatchObject({ state: "expired" });
    expect(shapeOf(d.run)).toEqual([]);
    expect(executes(effects)).toEqual([]);
    expect(d.send({ type: "approval.decide", node: ADMISSION, decision: "approve", by: "bob" }).find((e) => e.type === "runway.answer")?.value).toEqual({
      outcome: "approval_expired",
    });
  });

  it("a decision at the deadline itself is in time; after it, approval_expired even before the timer fires; an edit is refused", () => {
    const { d } = held();
    expect(
      d.send({ type: "approval.decide", node: ADMISSION, decision: "edit", payload: {}, by: "a" }).find((e) => e.type === "runway.answer")?.value,
    ).toMatchObject({
      outcome: "invalid_input",
    });
    expect(
      d.send({ type: "approval.decide", node: ADMISSION, decision: "approve", by: "a" }, T0 + DAY + 1).find((e) => e.type === "runway.answer")?.value,
    ).toEqual({
      outcome: "approval_expired",
    });
    expect(
      d.send({ type: "approval.decide", node: ADMISSION, decision: "approve", by: "a" }, T0 + DAY).find((e) => e.type === "runway.answer")?.value,
    ).toMatchObject({
      outcome: "decided",
    });
    expect(d.can({ type: "timer.fired", kind: "admission", node: "(run)" }, T0 + DAY + 1)).toBe(false);
  });

  it("C128 sweep passes before its deadline leave it alone (no write); past deadline and grace with its timer lost, the sweep expires it approval_expired", () => {
    const { d } = held();
    for (const at of [T0 + 1, T0 + DAY / 2, T0 + DAY + 1, T0 + DAY + WAIT_GRACE_MS - 1]) expect(d.can({ type: "run.sweep", at })).toBe(false);
    expect(d.run.lifecycle.status).toBe("waiting");
    d.send({ type: "run.sweep", at: T0 + DAY + WAIT_GRACE_MS });
    expect(d.run.lifecycle.status).toBe("failed");
    expect(d.run.error?.code).toBe("approval_expired");
    expect(d.run.admission_approval?.state).toBe("expired");
  });

  it("a cancel ends it cancelled and takes its approval out of the inbox (a later decision: run_not_waiting)", () => {
    const { d } = held();
    d.send({ type: "run.cancel", reason: "no longer needed", by: "op" });
    expect(d.run.lifecycle).toMatchObject({ status: "cancelled", waiting_on: null });
    expect(d.run.admission_approval?.state).toBe("cancelled");
    expect(d.send({ type: "approval.decide", node: ADMISSION, decision: "approve", by: "a" }).find((e) => e.type === "runway.answer")?.value).toEqual({
      outcome: "run_not_waiting",
    });
  });

  it("approved, then refused by its tenant: it fails with the tenant's code before it started; a refusal is taken only while it asks", () => {
    const { d } = held();
    expect(d.can({ type: "run.admission_refused", code: "tenant_killed", message: "x" })).toBe(false);
    d.send({ type: "approval.decide", node: ADMISSION, decision: "approve", by: "alice" });
    const effects = d.send({ type: "run.admission_refused", code: "day_cap_reached", message: "the tenant refused the run: day_cap_reached" });
    expect(d.run.lifecycle).toMatchObject({ status: "failed", started_at: null });
    expect(d.run.error?.code).toBe("day_cap_reached");
    expect(executes(effects)).toEqual([]);
  });

  it("a child of such a definition is not held (a tenant admits a tree at its root), nor is a replay (no call of it leaves the node)", () => {
    const replay = runDriver(p, {}, T0);
    expect(executes(replay.send({ type: "run.create", run: { ...seed, replay_of: "t_0" } }, T0)).map((x) => x.node)).toEqual(["work"]);
    expect(replay.run.admission_approval).toBeUndefined();
    const d = runDriver(p, { parent: { status: "running", tenant: "t", root_run_id: "t_0", depth: 0, waits: true } }, T0);
    const effects = d.send({ type: "run.create", run: { ...seed, id: "t_1", root_run_id: "t_0", parent_run_id: "t_0", parent_node: "down", depth: 1 } }, T0);
    expect(d.run.lifecycle.status).toBe("running");
    expect(d.run.admission_approval).toBeUndefined();
    expect(executes(effects).map((x) => x.node)).toEqual(["work"]);
  });
});

describe("a tenant asked by the run itself (tell_run)", () => {
  it("tells it run.admitted when it holds a slot, nothing while it is queued (a freed slot tells it), and its code when refused", () => {
    const t = tenantDriver("t", T0, { max_concurrency: 1, day_cap: 3 });
    const ask = (run_id: string) => t.send({ type: "tenant.admit_run", run_id, project: "p", tell_run: true });
    const toRun = (effects: readonly object[]) => sentTo(effects as Emitted[], "run");
    const first = ask("r1");
    expect(first.answer.outcome).toBe("admitted");
    expect(first.admitted).toEqual(["r1"]);
    const second = ask("r2");
    expect(second.answer.outcome).toBe("queued");
    expect(toRun(second.effects)).toEqual([]);
    expect(t.end("r1")).toMatchObject({ outcome: "ended" });
    expect(ask("r1").admitted).toEqual(["r1"]);
    t.send({ type: "tenant.kill", reason: "abuse" });
    const refused = ask("r3");
    expect(refused.answer.outcome).toBe("tenant_killed");
    expect(toRun(refused.effects).map((e) => e.event)).toEqual([
      { type: "run.admission_refused", code: "tenant_killed", message: "the tenant refused the run: tenant_killed" },
    ]);
    // Without tell_run nothing changes: the start that asked reads the answer.
    expect(toRun(t.send({ type: "tenant.admit_run", run_id: "r4", project: "p" }).effects)).toEqual([]);
  });
});
