import { describe, expect, it } from "vitest";
import { compileDefinition, gatedBy, type ExecuteRequest, type Plan } from "../../machines/index.js";
import { executes, plan, runDriver, type Emitted, rootSeed } from "./run-driver.js";

/** Gated tools on the pure run machine: the rule, the one approval record per step and tool, parking, decisions and expiry. */

const T0 = 1_000_000;
const HOUR = 3_600_000;

const seed = rootSeed();

const ID = "t_1:pay:approval.pay/charge";
const ARGS = { account: "acme", amount: 30 };

function started(p: Plan) {
  const r = runDriver(p, {}, T0);
  const effects = r.send({ type: "run.create", run: seed });
  return { r, effects };
}

const fence = (x: ExecuteRequest) => ({ node: x.node, attempt: x.attempt, lease_epoch: x.lease_epoch, cancellation_epoch: x.cancellation_epoch });
const answer = (effects: Emitted[]) => effects.find((e) => e.type === "runway.answer")?.value;
const facts = (effects: Emitted[], t: string) => effects.filter((e) => e.type === "runway.journal" && (e.data as { t: string }).t === t);
const gate = (x: ExecuteRequest, args: unknown = ARGS) => ({
  type: "effect.gate",
  ...fence(x),
  server: "pay",
  tool: "charge",
  class: "non_idempotent",
  arguments: args,
});
const intent = (x: ExecuteRequest, args: unknown, key = "k1") => ({
  type: "effect.intent",
  ...fence(x),
  key,
  server: "pay",
  tool: "charge",
  class: "non_idempotent",
  arguments: args,
});

const charge = (extra: object = {}) =>
  plan({
    name: "w",
    nodes: [
      { id: "prep", kind: "code", handler: "h" },
      { id: "pay", kind: "tool", needs: ["prep"], server: "pay", tool: "charge", arguments: ARGS, ...extra },
    ],
    approvals: { classes: ["non_idempotent"], group: "finance", timeout_ms: 3 * 24 * HOUR },
  });

/** Runs `prep`, then the tool node's first attempt asks its gate: the record is filed and the step parked. */
function parked(p: Plan = charge()) {
  const { r, effects } = started(p);
  const first = r.result(executes(effects)[0]!);
  const x = executes(first)[0]!;
  const asked = r.send(gate(x));
  return { r, x, asked };
}

describe("the rule", () => {
  it("gates by class and by name (server/tool, server/*); a rule of neither gates nothing", () => {
    expect(gatedBy({ classes: ["non_idempotent"] }, "pay", "charge", "non_idempotent")).toBe(true);
    expect(gatedBy({ classes: ["non_idempotent"] }, "pay", "find_charge", "read_only")).toBe(false);
    expect(gatedBy({ tools: ["pay/charge"] }, "pay", "charge", "read_only")).toBe(true);
    expect(gatedBy({ tools: ["pay/*"] }, "pay", "anything", "read_only")).toBe(true);
    expect(gatedBy({ tools: ["pay/charge"] }, "crm", "charge", "non_idempotent")).toBe(false);
    expect(gatedBy(undefined, "pay", "charge", "non_idempotent")).toBe(false);
  });

  it("is validated at publish: a policy names tools or classes, a tool as server/tool; a tool node's own approval gates it always", () => {
    const bad = compileDefinition(
      { name: "w", nodes: [{ id: "a", kind: "code", handler: "h" }], approvals: { group: "finance" } },
      { handlers: new Set(["h"]) },
    );
    expect(bad.ok).toBe(false);
    const badTool = compileDefinition(
      { name: "w", nodes: [{ id: "a", kind: "code", handler: "h" }], approvals: { tools: ["charge"] } },
      { handlers: new Set(["h"]) },
    );
    expect(badTool.ok).toBe(false);
    const own = plan({ name: "w", nodes: [{ id: "pay", kind: "tool", server: "pay", tool: "charge", approval: { group: "finance" } }] });
    expect(own.nodes[0]).toMatchObject({ approval: { group: "finance", timeout_ms: 7 * 24 * HOUR } });
    const r = runDriver(own, {}, T0);
    expect(executes(r.send({ type: "run.create", run: seed }))[0]!.gate).toEqual({ tools: ["pay/charge"] });
  });

  it("rides on the attempts it gates, and never on a replay's (no call of it leaves the node)", () => {
    const p = charge();
    const { effects } = started(p);
    expect(executes(effects)[0]!.gate).toEqual({ classes: ["non_idempotent"] });
    const replay = runDriver(p, {}, T0);
    expect(executes(replay.send({ type: "run.create", run: { ...seed, replay_of: "t_0" } }))[0]!.gate).toBeUndefined();
    const ungated = plan({ name: "w", nodes: [{ id: "pay", kind: "tool", server: "pay", tool: "charge" }] });
    expect(executes(runDriver(ungated, {}, T0).send({ type: "run.create", run: seed }))[0]!.gate).toBeUndefined();
  });
});

describe("the approval record of a gated call", () => {
  it("is filed once, on the step and the tool, journaled with one expiry clock; the attempt ends and the run waits holding no attempt", () => {
    const { r, asked } = parked();
    expect(answer(asked)).toEqual({ outcome: "awaiting_approval", approval: ID });
    expect(r.run.nodes.pay!.approval).toMatchObject({
      id: ID,
      state: "pending",
      payload: { server: "pay", tool: "charge", arguments: ARGS },
      group: "finance",
      prompt: "Call pay/charge?",
      tool: { server: "pay", tool: "charge" },
    });
    expect(facts(asked, "approval")).toHaveLength(1);
    expect(facts(asked, "intent")).toHaveLength(0);
    expect(asked.filter((e) => e.type === "runway.timer.set" && e.name === "approval-pay")).toHaveLength(1);
    expect(r.run.lifecycle).toMatchObject({ status: "waiting", waiting_on: "approval", waiting_ref: ID });
    expect(r.run.nodes.pay!.step).toMatchObject({ status: "ready", attempt: 1 });
    expect(r.run.nodes.pay!.offered).toBeUndefined();
    expect(executes(asked)).toEqual([]);
  });

  it("C080 is reused by whatever asks again for the step: a recovery, a sweep and a late question file no second request, and offer nothing", () => {
    const { r, x } = parked();
    expect(executes(r.send({ type: "run.recover", reason: "takeover" }))).toEqual([]);
    expect(executes(r.send({ type: "run.sweep", at: T0 + 2 * HOUR }))).toEqual([]);
    expect(r.run.nodes.pay!.approval).toMatchObject({ id: ID, state: "pending" });
    // The parked attempt asking again is no longer current: refused, nothing filed.
    const again = r.send(gate(x));
    expect(answer(again)).toEqual({ outcome: "stale_lease" });
    expect(facts(again, "approval")).toHaveLength(0);
  });

  it("an intent of the gated call without an approval of exactly its arguments is never recorded (needs_approval)", () => {
    const { r, x } = parked();
    expect(r.can(intent(x, ARGS))).toBe(true);
    const decided = r.send({ type: "approval.decide", node: "pay:approval.pay/charge", decision: "approve", by: "alice" });
    const y = executes(decided)[0]!;
    const other = r.send(intent(y, { account: "acme", amount: 31 }));
    expect(answer(other)).toEqual({ outcome: "needs_approval" });
    expect(facts(other, "intent")).toHaveLength(0);
  });

  it("approved: the step runs again (a new attempt, not counted against its retries) and its call asks, gets the record's arguments, and is recorded", () => {
    const { r } = parked();
    const decided = r.send({ type: "approval.decide", node: "pay:approval.pay/charge", decision: "approve", by: "alice" });
    expect(answer(decided)).toEqual({ outcome: "decided", approval: ID, decision: "approved" });
    expect(r.run.lifecycle.status).toBe("running");
    const y = executes(decided)[0]!;
    expect(y).toMatchObject({ node: "pay", attempt: 2 });
    expect(answer(r.send(gate(y)))).toEqual({ outcome: "approved", arguments: ARGS });
    const recorded = r.send(intent(y, ARGS));
    expect(answer(recorded)).toEqual({ outcome: "recorded" });
    // The default policy allows 3 attempts: with the parked one given back, attempt 4 is still allowed.
    const failed = (x: ExecuteRequest, now: number) =>
      r.send({ type: "step.result", ...fence(x), outcome: "failed", error: { code: "handler_error", message: "failed", retryable: true } }, now);
    failed(y, T0 + HOUR);
    const z = executes(r.send({ type: "timer.fired", kind: "retry", node: "pay" }, T0 + 2 * HOUR))[0]!;
    expect(z.attempt).toBe(3);
    failed(z, T0 + 3 * HOUR);
    const w = executes(r.send({ type: "timer.fired", kind: "retry", node: "pay" }, T0 + 4 * HOUR))[0];
    expect(w?.attempt).toBe(4);
    failed(w!, T0 + 5 * HOUR);
    expect(r.run.nodes.pay!.s).toBe("failed");
  });

  it("edited: the call is made with the reviewer's arguments, which the decision journals", () => {
    const { r } = parked();
    const edited = { account: "acme", amount: 5 };
    const decided = r.send({ type: "approval.decide", node: "pay:approval.pay/charge", decision: "edit", payload: edited, by: "alice" });
    expect(facts(decided, "decision")[0]!.data).toMatchObject({ decision: "edited", payload: edited });
    const y = executes(decided)[0]!;
    expect(answer(r.send(gate(y)))).toEqual({ outcome: "approved", arguments: edited });
    expect(answer(r.send(intent(y, ARGS)))).toEqual({ outcome: "needs_approval" });
    expect(answer(r.send(intent(y, edited)))).toEqual({ outcome: "recorded" });
  });

  it("rejected: the node fails approval_rejected and nothing runs again; expired: the run stops under the one status rule (after work: succeeded, partial_reason approval_expired)", () => {
    const rejected = parked();
    const no = rejected.r.send({ type: "approval.decide", node: "pay:approval.pay/charge", decision: "reject", by: "alice" });
    expect(executes(no)).toEqual([]);
    expect(rejected.r.run.nodes.pay).toMatchObject({ s: "failed", error: { code: "approval_rejected" }, step: { status: "cancelled" } });
    expect(rejected.r.run.lifecycle.status).toBe("failed");

    const late = parked();
    const expires = (late.r.run.nodes.pay!.approval as { expires_at: number }).expires_at;
    expect(executes(late.r.send({ type: "timer.fired", kind: "approval", node: "pay" }, expires + 1))).toEqual([]);
    expect(late.r.run.lifecycle.status).toBe("succeeded");
    expect(late.r.run.partial_reason).toBe("approval_expired");
    expect(late.r.run.nodes.pay).toMatchObject({ s: "failed", error: { code: "approval_expired" }, approval: { state: "expired" } });
    expect(late.r.send({ type: "approval.decide", node: "pay:approval.pay/charge", decision: "approve", by: "bob" }, expires + 2)).toEqual([
      expect.objectContaining({ value: { outcome: "approval_expired" } }),
    ]);
  });

  it("a decision names the whole id: another tool's token finds nothing to decide", () => {
    const { r } = parked();
    const wrong = r.send({ type: "approval.decide", node: "pay:approval.pay/refund", decision: "approve", by: "alice" });
    expect(answer(wrong)).toEqual({ outcome: "run_not_waiting" });
    expect(r.run.nodes.pay!.approval).toMatchObject({ state: "pending" });
  });

  it("a handler's call of a gated tool is refused needs_approval, never recorded", () => {
    const p = plan({ name: "w", nodes: [{ id: "work", kind: "code", handler: "h" }], approvals: { tools: ["pay/charge"] } });
    const { r, effects } = started(p);
    const x = executes(effects)[0]!;
    expect(x.gate).toEqual({ tools: ["pay/charge"] });
    const refused = r.send({ ...intent(x, ARGS), node: "work" });
    expect(answer(refused)).toEqual({ outcome: "needs_approval" });
    expect(facts(refused, "intent")).toHaveLength(0);
    // Not its own call: the gate question is refused the same way.
    expect(answer(r.send({ ...gate(x), node: "work" }))).toEqual({ outcome: "needs_approval" });
  });
});
