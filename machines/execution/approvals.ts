import { applyStepOp } from "../step/index.js";
import { effectOf, keepEffect, stepEffect } from "../effect/index.js";
import { DEFAULT_WAIT_TIMEOUT_MS, resolveTemplate, type PlanNode } from "../workflow/index.js";
import { holderOf, offer, parkAttempt } from "./attempts.js";
import { abortAttempts, fail, publish, scopeOf, succeed, type Draft } from "./draft.js";
import { approvalAt, gateArguments, gatePolicyOf, gateToken, isAgentNode } from "./gates.js";
import type { ApprovalState, RunContext, RunError } from "./types.js";
import type { ExecutionEvent } from "./requests.js";

/**
 * Approval nodes, gated tool calls (`gates.ts`) and a tool server's input requests share one record,
 * journaled and kept in the head while pending (the inbox lists it from there); the run waits on it
 * holding no worker. Its id is derived from the node, so whatever re-runs the node meets the same
 * request. The run's timer is the one writer of `expired`, and a decision at exactly the deadline
 * still wins; an expired approval stops the run, so the gated work never runs.
 */

type On<T extends ExecutionEvent["type"]> = Extract<ExecutionEvent, { type: T }>;
type ApprovalNode = Extract<PlanNode, { kind: "approval" }>;

export function approvalId(run: string, node: string): string {
  return `${run}:${node}`;
}

export function startApproval(d: Draft, node: ApprovalNode): void {
  const n = d.run.nodes[node.id]!;
  const payload = node.payload === undefined ? { ok: true as const, value: null } : resolveTemplate(node.payload, scopeOf(d));
  if (!payload.ok) return fail(d, node.id, { code: "reference_unreadable", message: `unreadable reference ${payload.path}` });
  const id = approvalId(d.run.id, node.id);
  const expires = d.now + node.timeout_ms;
  n.s = "active";
  n.wake_at = expires;
  n.approval = {
    id,
    state: "pending",
    prompt: node.prompt,
    payload: payload.value,
    group: node.group ?? null,
    escalation_group: node.escalation_group ?? null,
    requested_at: d.now,
    expires_at: expires,
  };
  d.effects.push({
    type: "runway.journal",
    data: {
      t: "approval",
      id,
      node: node.id,
      prompt: node.prompt,
      payload: payload.value,
      group: node.group ?? null,
      requested_at: d.now,
      expires_at: expires,
    },
  });
  // Fires just past the deadline: a decision at the deadline itself is still in time.
  d.effects.push({ type: "runway.timer.set", name: `approval-${node.id}`, at: expires + 1, event: { type: "timer.fired", kind: "approval", node: node.id } });
  publish(d, "approval_requested", { node: node.id, approval: id, group: node.group ?? null, expires_at: expires });
}

/** Why a decision cannot be taken now (undefined: the approval is pending and in time). */
export function decisionRefusal(run: RunContext | null | undefined, e: ExecutionEvent): "run_not_waiting" | "approval_expired" | "already_decided" | undefined {
  if (e.type !== "approval.decide") return undefined;
  const a = approvalAt(run, e.node)?.approval;
  if (!a) return "run_not_waiting";
  if (a.state === "expired" || (a.state === "pending" && e.now > a.expires_at)) return "approval_expired";
  if (a.state === "cancelled") return "run_not_waiting";
  if (a.state !== "pending") return "already_decided";
  return undefined;
}

export function onDecide(d: Draft, e: On<"approval.decide">): void {
  const { node, approval } = approvalAt(d.run, e.node)!;
  const n = d.run.nodes[node]!;
  const pending = approval as Extract<ApprovalState, { state: "pending" }>;
  const decision = e.decision === "approve" ? "approved" : e.decision === "edit" ? "edited" : "rejected";
  const payload = e.decision === "edit" ? (e.payload ?? null) : pending.payload;
  n.approval = { id: pending.id, state: decision, by: e.by, at: d.now };
  delete n.wake_at;
  d.effects.push({
    type: "runway.journal",
    data: {
      t: "decision",
      id: pending.id,
      node,
      decision,
      by: e.by,
      ...(e.decision === "edit" ? { payload } : {}),
      ...(e.reason ? { reason: e.reason } : {}),
      at: d.now,
    },
  });
  publish(d, "approval_decided", { node, approval: pending.id, decision, by: e.by });
  d.effects.push({ type: "runway.answer", value: { outcome: "decided", approval: pending.id, decision } });
  const rejected = { code: "approval_rejected", message: `${e.by} rejected it${e.reason ? `: ${e.reason}` : ""}` };
  if (pending.input?.task && decision === "rejected") {
    // A remote task's question declined: the task is cancelled and the step fails (nothing is sent to it).
    cancelAskingTask(d, node, pending, "input_rejected");
    return closeGated(d, node, {
      code: "a2a_input_rejected",
      message: `${e.by} declined the question of remote task ${pending.input.task.id}${e.reason ? `: ${e.reason}` : ""}; the task was cancelled`,
    });
  }
  if (pending.input) {
    // The server's forms: accepted with the reviewer's payload (one form: the payload; several: by key), or declined.
    const { requests, state, round } = pending.input;
    const content = (key: string) => (requests.length === 1 ? e.payload : (e.payload as Record<string, unknown> | undefined)?.[key]);
    const responses = Object.fromEntries(
      requests.map((r) => [r.key, decision === "rejected" ? { action: "decline" } : { action: "accept", content: content(r.key) ?? {} }]),
    );
    n.approval = {
      ...n.approval,
      input: { responses, ...(state !== undefined ? { state } : {}), round },
      ...(pending.arguments !== undefined ? { arguments: pending.arguments } : {}),
    };
    return offer(d, d.byId.get(node)!, n, undefined);
  }
  if (pending.tool && isAgentNode(d.byId.get(node))) {
    // An agent's gated proposal: the decision is journaled as the receipt of the gate (keyed by the
    // approval's id) in this same write, and the loop runs again from its journal: approved, the
    // call is made with these arguments; rejected, the model reads the refusal and goes on.
    const args = e.decision === "edit" ? payload : ((pending.payload as { arguments?: unknown } | null)?.arguments ?? null);
    const value = decision === "rejected" ? { decision, by: e.by, ...(e.reason ? { reason: e.reason } : {}) } : { decision, by: e.by, arguments: args };
    d.effects.push({ type: "runway.journal", data: { t: "receipt", key: pending.id, state: "observed", value, at: d.now } });
    d.run.receipts = (d.run.receipts ?? 0) + 1;
    if (decision !== "rejected") n.approval = { ...n.approval, arguments: args };
    return offer(d, d.byId.get(node)!, n, undefined);
  }
  if (pending.tool) {
    // A gated call: its step runs again (a new attempt), with the approved arguments (an edit's are the reviewer's payload).
    if (decision === "rejected") return closeGated(d, node, rejected);
    n.approval = { ...n.approval, arguments: e.decision === "edit" ? payload : (pending.payload as { arguments?: unknown }).arguments };
    return offer(d, d.byId.get(node)!, n, undefined);
  }
  if (decision === "rejected") fail(d, node, rejected);
  else succeed(d, node, { decision, by: e.by, payload });
}

/**
 * The approval's clock ran out with no decision: the node fails `approval_expired` (a gated call
 * is never made). True when it expired now: the caller stops the run.
 */
export function expireApproval(d: Draft, node: string): boolean {
  const n = d.run.nodes[node]!;
  const a = n.approval;
  if (a?.state !== "pending" || d.now <= a.expires_at) return false;
  cancelAskingTask(d, node, a, "approval_expired");
  n.approval = { id: a.id, state: "expired", by: null, at: d.now };
  delete n.wake_at;
  d.effects.push({ type: "runway.journal", data: { t: "decision", id: a.id, node, decision: "expired", by: null, at: d.now } });
  publish(d, "approval_expired", { node, approval: a.id });
  const error = { code: "approval_expired", message: `nobody decided by ${new Date(a.expires_at).toISOString()}`, partial_reason: "approval_expired" };
  if (a.tool) closeGated(d, node, error);
  else fail(d, node, error);
  return true;
}

/**
 * A tool node's call of a gated tool asks its run (`effect.gate`) and there is no approval for it
 * yet, or it is pending: the request is filed once — payload `{server, tool, arguments}`, the
 * node's own `approval` or the definition's policy, one expiry clock, journaled — and the asking
 * attempt ends (its step back to ready, held until a decision; the parked attempt does not count
 * against the node's retries). Nothing is charged or recorded: the call is not made.
 */
export function onGate(d: Draft, e: On<"effect.gate">): void {
  const node = d.byId.get(e.node)!;
  const n = d.run.nodes[e.node]!;
  const id = `${d.run.id}:${gateToken(e.node, e.server, e.tool, e.turn)}`;
  // An agent asks once per turn: an earlier turn's decided record gives way to this turn's request.
  if (!n.approval || (e.turn !== undefined && n.approval.id !== id)) {
    const policy = gatePolicyOf(d.plan, node)!;
    fileToolRequest(d, e.node, "approval_requested", {
      id,
      state: "pending",
      prompt: policy.prompt ?? `Call ${e.server}/${e.tool}?`,
      payload: { server: e.server, tool: e.tool, arguments: e.arguments ?? null, ...(e.turn !== undefined ? { turn: e.turn } : {}) },
      group: policy.group ?? null,
      escalation_group: policy.escalation_group ?? null,
      requested_at: d.now,
      expires_at: d.now + policy.timeout_ms,
      tool: { server: e.server, tool: e.tool },
    });
  }
  parkStep(d, node, `${e.server}/${e.tool} waits for ${n.approval!.id}`);
}

/**
 * The server answered a tool node's call `input_required` (MCP 2026-07-28 MRTR): nothing happened,
 * so the intent is cleared (the next attempt records it again and calls with the answers). The
 * forms are filed as a request on the node — kind input, its schema the server's, under the node's
 * own `approval` or the definition's policy for reviewers and clock (7 days by default) — and the
 * asking attempt ends, its step held until a person answers. A later round of asking files anew.
 * An `a2a` node's remote task in `input-required` (its poll sends this) is filed the same way:
 * the request keeps the task, which the answering attempt follows up and the run cancels if it
 * stops first (no poll runs while a person decides).
 */
export function onInput(d: Draft, e: On<"effect.input">): void {
  const node = d.byId.get(e.node)!;
  const n = d.run.nodes[e.node]!;
  // The node's own waiting intent (the effect machine: withdrawn, nothing happened).
  const asked = stepEffect(effectOf({ intents: n.intents }, e.key), { type: "withdrawn" });
  if (asked.decision.decision === "clear") keepEffect(n, e.key, asked.next);
  const holder = holderOf(n, e.item);
  if (holder?.task?.key === e.key) delete holder.task;
  const task = e.task ? { server: e.server, tool: e.tool, id: e.task.id, wire: e.task.wire } : undefined;
  // A gated call's remote task asks: its gate's arguments stay the call's (the answer's attempt passes the gate with them).
  const passed = task ? gateArguments(d.run, e.node, e.server, e.tool) : undefined;
  const policy = gatePolicyOf(d.plan, node);
  const prior = n.approval;
  const round = (prior && "input" in prior && prior.input ? prior.input.round : 0) + 1;
  const requests = e.requests.map((r) => ({ key: r.key, message: r.message, schema: r.schema }));
  const id = `${d.run.id}:${e.node}:input.${e.server}/${e.tool}.${round}`;
  fileToolRequest(d, e.node, "input_requested", {
    id,
    state: "pending",
    prompt: requests.map((r) => r.message).join("\n") || `${e.server}/${e.tool} asks for input`,
    payload: { server: e.server, tool: e.tool, requests },
    group: policy?.group ?? null,
    escalation_group: policy?.escalation_group ?? null,
    requested_at: d.now,
    expires_at: d.now + (policy?.timeout_ms ?? DEFAULT_WAIT_TIMEOUT_MS),
    tool: { server: e.server, tool: e.tool },
    input: { requests, ...(e.state !== undefined ? { state: e.state } : {}), round, ...(task ? { task } : {}) },
    ...(passed ? { arguments: passed.arguments } : {}),
  });
  parkStep(d, node, `${e.server}/${e.tool} waits for a person's input (${id})`);
}

/**
 * A request for input that no answer will follow up (the run stops, nobody answered in time):
 * the remote task that asked is cancelled (best effort, by this node's executor; no attempt runs).
 */
export function cancelAskingTask(d: Draft, node: string, approval: ApprovalState | undefined, reason: string): void {
  const task = approval?.state === "pending" ? approval.input?.task : undefined;
  const s = d.run.nodes[node]?.step;
  if (task && s) abortAttempts(d, [{ node, attempt: s.attempt, lease_epoch: s.lease_epoch, task }], reason);
}

/** A tool call's request for a person, filed on its node: kept in the head, journaled, one expiry clock. */
function fileToolRequest(d: Draft, node: string, event: string, request: Extract<ApprovalState, { state: "pending" }>): void {
  const { id, prompt, payload, group, requested_at, expires_at, tool } = request;
  const n = d.run.nodes[node]!;
  n.wake_at = expires_at;
  n.approval = request;
  d.effects.push({ type: "runway.journal", data: { t: "approval", id, node, prompt, payload, group, requested_at, expires_at } });
  // Fires just past the deadline: a decision at the deadline itself is still in time.
  d.effects.push({ type: "runway.timer.set", name: `approval-${node}`, at: expires_at + 1, event: { type: "timer.fired", kind: "approval", node } });
  publish(d, event, { node, approval: id, group, expires_at, tool: `${tool!.server}/${tool!.tool}` });
}

/** The asking attempt ends: its step goes back to ready, held until a decision (the parked attempt does not count against the node's retries). */
function parkStep(d: Draft, node: PlanNode, message: string): void {
  const n = d.run.nodes[node.id]!;
  if (isAgentNode(node)) n.parks = (n.parks ?? 0) + 1;
  parkAttempt(d, n, node, { code: "awaiting_approval", message, retryable: true });
  d.effects.push({ type: "runway.answer", value: { outcome: "awaiting_approval", approval: n.approval!.id } });
}

/** A gated call that will never be made (rejected, expired): its held step is cancelled and the node fails. */
function closeGated(d: Draft, node: string, error: RunError): void {
  const n = d.run.nodes[node]!;
  const r = n.step ? applyStepOp(n.step, { op: "cancel", now: d.now }) : undefined;
  if (r?.outcome === "moved") n.step = r.state;
  fail(d, node, error);
}
