import { describe, expect, it } from "vitest";
import type { ExecuteRequest, RunFact } from "../../machines/index.js";
import { executes, plan, runDriver, type Emitted, rootSeed } from "./run-driver.js";

/**
 * An agent's gated proposals on the pure run machine (issue 38 §3): one request per turn, the
 * decision journaled as the gate's receipt (read back after the node's record moved on, and after
 * the memory is rebuilt from the journal), the intent let through only with the decided arguments,
 * and each parked attempt given back to the node's retries.
 */

const T0 = 1_000_000;
const ARGS = { account: "acme", amount: 30 };
const EDITED = { account: "acme", amount: 12 };
const ID0 = "t_1:ask:turn0:approval.pay/charge";
const ID2 = "t_1:ask:turn2:approval.pay/charge";

const p = plan({
  name: "w",
  approvals: { tools: ["pay/charge"], group: "finance" },
  nodes: [
    { id: "ask", kind: "agent", model: "scripted/m", instructions: "go", tools: ["pay/charge"], retry: { max_attempts: 2, backoff_ms: 0, max_backoff_ms: 0 } },
  ],
});

const fence = (x: ExecuteRequest) => ({ node: x.node, attempt: x.attempt, lease_epoch: x.lease_epoch, cancellation_epoch: x.cancellation_epoch });
const answer = (effects: Emitted[]) => effects.find((e) => e.type === "runway.answer")?.value;
const facts = (effects: Emitted[], t: string) => effects.filter((e) => e.type === "runway.journal" && (e.data as { t: string }).t === t).map((e) => e.data);
const gate = (x: ExecuteRequest, turn: number, args: unknown = ARGS) => ({
  type: "effect.gate",
  ...fence(x),
  server: "pay",
  tool: "charge",
  class: "non_idempotent",
  arguments: args,
  turn,
});
const intent = (x: ExecuteRequest, args: unknown, gate_turn?: number, key = `t_1:ask:turn0:${JSON.stringify(args).length}`) => ({
  type: "effect.intent",
  ...fence(x),
  key,
  server: "pay",
  tool: "charge",
  class: "non_idempotent",
  arguments: args,
  ...(gate_turn !== undefined ? { gate_turn } : {}),
});

function parked() {
  const r = runDriver(p, {}, T0);
  const x = executes(r.send({ type: "run.create", run: rootSeed() }))[0]!;
  expect(x.agent).toBeDefined();
  expect(x.gate).toEqual({ tools: ["pay/charge"] });
  const asked = r.send(gate(x, 0));
  return { r, x, asked };
}

describe("an agent's gated proposal", () => {
  it("38.3 files one tool request named by its turn and parks the step; asked again it files nothing; an intent without a decision is refused", () => {
    const { r, x, asked } = parked();
    expect(answer(asked)).toEqual({ outcome: "awaiting_approval", approval: ID0 });
    expect(facts(asked, "approval")).toEqual([
      expect.objectContaining({ id: ID0, node: "ask", payload: { server: "pay", tool: "charge", arguments: ARGS, turn: 0 } }),
    ]);
    expect(r.run.nodes.ask).toMatchObject({ s: "active", parks: 1, approval: { id: ID0, state: "pending", tool: { server: "pay", tool: "charge" } } });
    expect(r.run.lifecycle.status).toBe("waiting");
    // The parked attempt is gone: its intent is stale, and no attempt is offered while the request is pending.
    expect(answer(r.send(intent(x, ARGS, 0)))).toEqual({ outcome: "stale_lease" });
    expect(executes(asked)).toEqual([]);
  });

  it("38.3 edited: the decision is the gate's receipt in the decision's write; the next attempt gets the edited arguments, and only they pass the intent", () => {
    const { r } = parked();
    const decided = r.send({ type: "approval.decide", node: "ask:turn0:approval.pay/charge", decision: "edit", payload: EDITED, by: "alice" });
    expect(answer(decided)).toEqual({ outcome: "decided", approval: ID0, decision: "edited" });
    expect(facts(decided, "receipt")).toEqual([
      expect.objectContaining({ key: ID0, state: "observed", value: { decision: "edited", by: "alice", arguments: EDITED } }),
    ]);
    const y = executes(decided)[0]!;
    expect(y).toMatchObject({ node: "ask", attempt: 2 });
    const again = r.send(gate(y, 0));
    expect(answer(again)).toEqual({ outcome: "approved", arguments: EDITED });
    expect(facts(again, "approval")).toEqual([]);
    expect(answer(r.send(intent(y, ARGS, 0)))).toEqual({ outcome: "needs_approval" });
    expect(answer(r.send(intent(y, EDITED)))).toEqual({ outcome: "needs_approval" });
    expect(answer(r.send(intent(y, EDITED, 1)))).toEqual({ outcome: "needs_approval" });
    expect(answer(r.send(intent(y, EDITED, 0)))).toEqual({ outcome: "recorded" });
  });

  it("38.3 a later turn asks anew (its own id); rejected, the refusal is answered; turn 0's decision is still read from the journal, also after the memory is rebuilt", () => {
    const { r } = parked();
    const decidedFirst = r.send({ type: "approval.decide", node: "ask:turn0:approval.pay/charge", decision: "approve", by: "alice" });
    const y = executes(decidedFirst)[0]!;
    expect(answer(r.send(gate(y, 0)))).toEqual({ outcome: "approved", arguments: ARGS });
    const asked = r.send(gate(y, 2, { account: "acme", amount: 99 }));
    expect(answer(asked)).toEqual({ outcome: "awaiting_approval", approval: ID2 });
    expect(facts(asked, "approval")).toHaveLength(1);
    expect(r.run.nodes.ask!.parks).toBe(2);
    const no = r.send({ type: "approval.decide", node: "ask:turn2:approval.pay/charge", decision: "reject", reason: "too much", by: "bob" });
    expect(answer(no)).toEqual({ outcome: "decided", approval: ID2, decision: "rejected" });
    // Rejected: not a failure of the node; its loop runs again.
    expect(r.run.nodes.ask!.s).toBe("active");
    const z = executes(no)[0]!;
    expect(z).toMatchObject({ attempt: 3 });
    // The memory rebuilt from the journal's facts (another node, a restart): the decisions are read from there.
    r.forget([...facts(decidedFirst, "receipt"), ...facts(no, "receipt")] as RunFact[]);
    expect(answer(r.send(gate(z, 0)))).toEqual({ outcome: "approved", arguments: ARGS });
    expect(answer(r.send(gate(z, 2, { account: "acme", amount: 99 })))).toEqual({ outcome: "rejected", by: "bob", reason: "too much" });
    // Decided: a second decision on either is refused.
    expect(answer(r.send({ type: "approval.decide", node: "ask:turn2:approval.pay/charge", decision: "approve", by: "carol" }))).toEqual({
      outcome: "already_decided",
    });
    expect(answer(r.send({ type: "approval.decide", node: "ask:turn0:approval.pay/charge", decision: "approve", by: "carol" }))).toEqual({
      outcome: "run_not_waiting",
    });
  });

  it("38.3 each parked attempt is given back to the node's retries: after two parks, a retryable failure still gets the node's second attempt", () => {
    const { r } = parked();
    const y = executes(r.send({ type: "approval.decide", node: "ask:turn0:approval.pay/charge", decision: "approve", by: "alice" }))[0]!;
    expect(answer(r.send(gate(y, 0)))).toMatchObject({ outcome: "approved" });
    expect(answer(r.send(gate(y, 2)))).toMatchObject({ outcome: "awaiting_approval" });
    const w = executes(r.send({ type: "approval.decide", node: "ask:turn2:approval.pay/charge", decision: "approve", by: "alice" }))[0]!;
    expect(w.attempt).toBe(3);
    const failed = r.result(w, "failed", undefined, { code: "model_unavailable", message: "503", retryable: true });
    expect(r.run.nodes.ask!.s).toBe("active");
    expect(r.run.nodes.ask!.step!.status).not.toBe("failed");
    expect(failed.some((e) => e.type === "runway.timer.set" || e.channel === "step.ready")).toBe(true);
  });

  it("38.3 nobody decides by the deadline: the node fails approval_expired (before any work: the run fails), the call never made; a late decision is refused", () => {
    const { r } = parked();
    const expires = (r.run.nodes.ask!.approval as { expires_at: number }).expires_at;
    expect(executes(r.send({ type: "timer.fired", kind: "approval", node: "ask" }, expires + 1))).toEqual([]);
    expect(r.run.nodes.ask).toMatchObject({ s: "failed", error: { code: "approval_expired" }, approval: { id: ID0, state: "expired" } });
    expect(r.run.lifecycle.status).toBe("failed");
    expect(answer(r.send({ type: "approval.decide", node: "ask:turn0:approval.pay/charge", decision: "approve", by: "bob" }, expires + 2))).toEqual({
      outcome: "approval_expired",
    });
  });

  it("38.3 a tool node's gate never takes an agent's turned question: only its own (turnless) gate files its request", () => {
    const tool = plan({
      name: "w",
      approvals: { tools: ["pay/charge"] },
      nodes: [{ id: "pay", kind: "tool", server: "pay", tool: "charge", arguments: ARGS }],
    });
    const t = runDriver(tool, {}, T0);
    const y = executes(t.send({ type: "run.create", run: rootSeed() }))[0]!;
    expect(answer(t.send({ ...gate(y, 3), node: "pay" }))).toEqual({ outcome: "needs_approval" });
    expect(answer(t.send({ ...gate(y, 0), turn: undefined, node: "pay" }))).toEqual({ outcome: "awaiting_approval", approval: "t_1:pay:approval.pay/charge" });
  });
});

describe("an agent's model turn on the run machine", () => {
  const turnIntent = (x: ExecuteRequest, turn: number) => ({
    type: "effect.intent",
    ...fence(x),
    key: `t_1:ask:turn${turn}`,
    server: "model",
    tool: "scripted/m",
    class: "idempotent",
    arguments: { turn },
    turn: true,
  });
  const RESPONSE = { text: "hi", tool_calls: [], usage: { input_tokens: 1, output_tokens: 1 }, stop_reason: "end_turn", model: "m", latency_ms: 1 };

  it("C030 (adapt: a turn is the segment) a turn's intent delivered twice is journaled once; once its response is stored, asked again it answers the stored response and journals nothing", () => {
    const r = runDriver(p, {}, T0);
    const x = executes(r.send({ type: "run.create", run: rootSeed() }))[0]!;
    const first = r.send(turnIntent(x, 0));
    expect(answer(first)).toEqual({ outcome: "recorded" });
    expect(facts(first, "intent")).toHaveLength(1);
    const again = r.send(turnIntent(x, 0));
    expect(facts(again, "intent")).toHaveLength(0);
    const stored = r.send({ type: "effect.receipt", ...fence(x), receipt: { key: "t_1:ask:turn0", state: "observed", value: RESPONSE, at: T0 + 5 } });
    expect(answer(stored)).toEqual({ outcome: "recorded" });
    expect(facts(stored, "receipt")).toHaveLength(1);
    const after = r.send(turnIntent(x, 0));
    expect(answer(after)).toEqual({ outcome: "observed", value: RESPONSE });
    expect(facts(after, "intent")).toHaveLength(0);
    // The next turn is a turn of its own.
    expect(answer(r.send(turnIntent(x, 1)))).toEqual({ outcome: "recorded" });
  });
});
