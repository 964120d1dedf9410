import { resolveTemplate, type PlanNode } from "../workflow/index.js";
import { fail, publish, scopeOf, succeed, type Draft } from "./draft.js";
import type { ApprovalState, ExecutionEvent, RunContext } from "./types.js";

/**
 * Approval nodes: a person decides before the run goes on. The request — prompt, the payload
 * resolved when the node starts, the reviewer group, one expiry clock — is journaled and kept in
 * the head while it is pending (the inbox lists it from there); the run waits on it holding no
 * worker. Its id is `<run>:<node>`, so whatever re-runs the node's start meets the same request.
 * Decisions: approve (the node outputs `{decision, by, payload}`), edit (the reviewer's payload
 * instead), reject (the node fails `approval_rejected`). The run's timer is the one writer of
 * `expired`, and a decision at exactly the deadline still wins. An expired approval stops the run
 * under the one status rule (the caller's `ceilingStop`, reason `approval_expired`): the gated
 * work never runs.
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
export function decisionRefusal(run: RunContext | null | undefined, e: ExecutionEvent): string | undefined {
  if (e.type !== "approval.decide") return undefined;
  const a = run?.nodes[e.node]?.approval;
  if (!a) return "run_not_waiting";
  if (a.state === "expired" || (a.state === "pending" && e.now > a.expires_at)) return "approval_expired";
  if (a.state === "cancelled") return "run_not_waiting";
  if (a.state !== "pending") return "already_decided";
  return undefined;
}

export function onDecide(d: Draft, e: On<"approval.decide">): void {
  const n = d.run.nodes[e.node]!;
  const pending = n.approval as Extract<ApprovalState, { state: "pending" }>;
  const decision = e.decision === "approve" ? "approved" : e.decision === "edit" ? "edited" : "rejected";
  const payload = e.decision === "edit" ? (e.payload ?? null) : pending.payload;
  n.approval = { id: pending.id, state: decision, by: e.by, at: d.now };
  delete n.wake_at;
  d.effects.push({
    type: "runway.journal",
    data: {
      t: "decision",
      id: pending.id,
      node: e.node,
      decision,
      by: e.by,
      ...(e.decision === "edit" ? { payload } : {}),
      ...(e.reason ? { reason: e.reason } : {}),
      at: d.now,
    },
  });
  publish(d, "approval_decided", { node: e.node, approval: pending.id, decision, by: e.by });
  d.effects.push({ type: "runway.answer", value: { outcome: "decided", approval: pending.id, decision } });
  if (decision === "rejected") fail(d, e.node, { code: "approval_rejected", message: `${e.by} rejected it${e.reason ? `: ${e.reason}` : ""}` });
  else succeed(d, e.node, { decision, by: e.by, payload });
}

/**
 * The approval's clock ran out with no decision: the node fails `approval_expired`. True when it
 * expired now: the caller stops the run.
 */
export function expireApproval(d: Draft, node: string): boolean {
  const n = d.run.nodes[node]!;
  const a = n.approval;
  if (a?.state !== "pending" || d.now <= a.expires_at) return false;
  n.approval = { id: a.id, state: "expired", by: null, at: d.now };
  delete n.wake_at;
  d.effects.push({ type: "runway.journal", data: { t: "decision", id: a.id, node, decision: "expired", by: null, at: d.now } });
  publish(d, "approval_expired", { node, approval: a.id });
  fail(d, node, { code: "approval_expired", message: `nobody decided by ${new Date(a.expires_at).toISOString()}`, partial_reason: "approval_expired" });
  return true;
}
