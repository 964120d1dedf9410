import { isTerminal, type RunOpEvent } from "../run/index.js";
import { approvalId, decisionRefusal } from "./approvals.js";
import { enforceWhenSettled } from "./cancel.js";
import { move, publish, WAIT_GRACE_MS, type Draft, type RunAnswer } from "./draft.js";
import { notifyParent } from "./progression.js";
import type { Plan } from "../workflow/index.js";
import type { ApprovalState, RunContext, RunError, RunSeed } from "./types.js";
import type { ExecutionEvent } from "./requests.js";

/**
 * Admission approvals: a policy may hold each top-level run it starts for a person before the run
 * asks its tenant. The hold is the run's create write itself, so no crash leaves a run that exists
 * unheld. Approved, it is `queued` and asks its tenant; rejected, `cancelled`; expired, `failed`
 * `approval_expired`. Children and replays are never held. Id `<run>:(admission)` (no node id has
 * parentheses), decided through `approval.decide`; never edited.
 */

type On<T extends ExecutionEvent["type"]> = Extract<ExecutionEvent, { type: T }>;

/** The `node` an `approval.decide` names for a run's admission approval. */
export const ADMISSION = "(admission)";

/**
 * Whether a run is held for a person at its create: a top-level run of a definition whose policy
 * says so. A replay is not (it re-runs a run that was admitted, and no call of it leaves the
 * node). The start reads the same answer to leave its tenant unasked.
 */
export function heldForAdmission(plan: Pick<Plan, "admission">, seed: Pick<RunSeed, "parent_run_id" | "replay_of">): boolean {
  return seed.parent_run_id === null && plan.admission !== undefined && seed.replay_of === undefined;
}

/** The create holds the run: waiting on its admission approval, with the request and its one timer. */
export function holdForAdmission(d: Draft): void {
  const policy = d.plan.admission!.approval;
  const id = approvalId(d.run.id, ADMISSION);
  const expires = d.now + policy.timeout_ms;
  // What the reviewer admits: which definition runs, on what input (at most 32 KiB, checked at start).
  const payload = { definition: { name: d.run.definition.name, version: d.run.definition.version }, input: d.memory.input };
  const group = policy.group ?? null;
  d.run.admission_approval = {
    id,
    state: "pending",
    prompt: policy.prompt,
    payload,
    group,
    escalation_group: policy.escalation_group ?? null,
    requested_at: d.now,
    expires_at: expires,
  };
  const grace = d.event.wait_grace_ms ?? WAIT_GRACE_MS;
  move(d, "mark_waiting", { on: "approval", ref: id, expires_at: expires + grace } as Partial<RunOpEvent>);
  d.effects.push({
    type: "runway.journal",
    data: { t: "approval", id, node: ADMISSION, prompt: policy.prompt, payload, group, requested_at: d.now, expires_at: expires },
  });
  // Its one clock, just past the deadline: a decision at the deadline itself is still in time.
  d.effects.push({ type: "runway.timer.set", name: "admission-approval", at: expires + 1, event: { type: "timer.fired", kind: "admission", node: "(run)" } });
  publish(d, "approval_requested", { node: ADMISSION, approval: id, group, expires_at: expires });
  publish(d, "run_waiting", { on: "approval", until: expires });
}

export function admissionPending(run: RunContext | null | undefined): boolean {
  return run?.admission_approval?.state === "pending";
}

/** The answer to a decision that cannot be taken now, on either kind of approval (undefined: take it). */
export function decisionAnswer(run: RunContext | null | undefined, e: ExecutionEvent): RunAnswer | undefined {
  if (e.type !== "approval.decide") return undefined;
  if (e.node !== ADMISSION) {
    const refusal = decisionRefusal(run, e);
    return refusal ? { outcome: refusal } : undefined;
  }
  const a = run?.admission_approval;
  if (!a || a.state === "cancelled") return { outcome: "run_not_waiting" };
  if (a.state === "expired" || (a.state === "pending" && e.now > a.expires_at)) return { outcome: "approval_expired" };
  if (a.state !== "pending") return { outcome: "already_decided" };
  if (e.decision === "edit") return { outcome: "invalid_input", reason: "an admission approval is approved or rejected; it has nothing to edit" };
  return undefined;
}

/** Approved: the run asks its tenant (queued until told `run.admitted`). Rejected: it is cancelled, having done nothing. */
export function onAdmissionDecide(d: Draft, e: On<"approval.decide">): void {
  const pending = d.run.admission_approval as Extract<ApprovalState, { state: "pending" }>;
  const decision = e.decision === "approve" ? "approved" : "rejected";
  d.run.admission_approval = { id: pending.id, state: decision, by: e.by, at: d.now };
  d.effects.push({
    type: "runway.journal",
    data: { t: "decision", id: pending.id, node: ADMISSION, decision, by: e.by, ...(e.reason ? { reason: e.reason } : {}), at: d.now },
  });
  publish(d, "approval_decided", { node: ADMISSION, approval: pending.id, decision, by: e.by });
  d.effects.push({ type: "runway.answer", value: { outcome: "decided", approval: pending.id, decision } });
  if (decision === "rejected") {
    d.run.cancel = { reason: `admission rejected${e.reason ? `: ${e.reason}` : ""}`, by: e.by, at: d.now, enforced_at: null };
    return enforceWhenSettled(d);
  }
  move(d, "admit");
  d.run.admission = "queued";
  publish(d, "run_queued", { definition: d.run.definition });
  d.effects.push({
    type: "runway.send",
    to: { kind: "tenant", id: d.run.tenant },
    event: {
      type: "tenant.admit_run",
      run_id: d.run.id,
      project: d.run.project ?? "default",
      // It reserves its ceiling of the day budget now, as a start does.
      ...(d.run.cost_ceiling_cents !== undefined ? { reserve_cents: d.run.cost_ceiling_cents } : {}),
      tell_run: true,
    },
  });
}

/** Nobody decided by the deadline (judged at `at`): the run fails `approval_expired`; nothing of it ran. */
export function expireAdmission(d: Draft, at: number): void {
  const a = d.run.admission_approval;
  if (a?.state !== "pending" || at <= a.expires_at) return;
  d.run.admission_approval = { id: a.id, state: "expired", by: null, at: d.now };
  d.effects.push({ type: "runway.journal", data: { t: "decision", id: a.id, node: ADMISSION, decision: "expired", by: null, at: d.now } });
  publish(d, "approval_expired", { node: ADMISSION, approval: a.id });
  endUnstarted(d, { code: "approval_expired", message: `nobody admitted it by ${new Date(a.expires_at).toISOString()}` });
}

/** The tenant refused the approved run (killed, draining, day cap, queue full…): it fails with the tenant's code, before any work. */
export function onAdmissionRefused(d: Draft, e: On<"run.admission_refused">): void {
  endUnstarted(d, { code: e.code, message: e.message });
}

/** The run asked its tenant after its approval and waits for the answer. */
export function admissionAsked(run: RunContext | null | undefined): boolean {
  return run?.lifecycle.status === "queued" && run.admission_approval?.state === "approved";
}

/** An ended run's admission approval leaves the inbox (a cancel, a lost timer's sweep): nobody can decide it any more. */
export function closeAdmission(d: Draft): void {
  const a = d.run.admission_approval;
  if (a?.state === "pending" && isTerminal(d.lifecycle.status)) d.run.admission_approval = { id: a.id, state: "cancelled", by: null, at: d.now };
}

/** Ends a run that never started (no `started_at`: it was never claimed); its parent, if any, is told. */
export function endUnstarted(d: Draft, error: RunError): void {
  if (!move(d, "fail")) return;
  d.run.error = error;
  publish(d, "run_failed", { error });
  notifyParent(d);
}
