import { applyStepOp } from "../step/index.js";
import { holderOf, type Holder } from "./attempts.js";
import { holdersOf, move, publish, runSummary, type Draft } from "./draft.js";
import { effectOf, keepEffect, stepEffect } from "../effect/index.js";
import { reconciling, recordReceipt } from "./intents.js";
import { notifyParent, stopNodes } from "./progression.js";
import type { RunContext } from "./types.js";
import type { ExecutionEvent } from "./requests.js";

/**
 * Cancellation with effects in flight. One write bumps the cancellation epoch (later intents,
 * results and heartbeats of its attempts are refused), stops scheduling, aborts live work and
 * cancels children. A call already made cannot be undone: a read-only or idempotent tool's pending
 * intent is settled at once; a non-idempotent one is let finish (its receipt still accepted), and
 * the run stays `cancel requested` until every such intent is terminal. Only then is it `cancelled`.
 */

type On<T extends ExecutionEvent["type"]> = Extract<ExecutionEvent, { type: T }>;

/** A cancel is requested and waits on intents it let finish. */
export function cancelRequested(run: RunContext | null | undefined): boolean {
  return !!run?.cancel && run.cancel.enforced_at === null;
}

/** The holder's attempt goes on under the cancel: the effect machine lets one of its calls finish (or a person settle it). */
function letsFinish(h: Holder): boolean {
  return Object.keys(h.intents ?? {}).some((key) => stepEffect(effectOf(h, key), { type: "cancel", key, by: "", at: 0 }).decision.decision === "let_finish");
}

export function onCancel(d: Draft, reason: string, by: string): void {
  const again = cancelRequested(d.run);
  if (!again) {
    if (d.lifecycle.status === "cancelled") return;
    d.run.cancel = { reason, by, at: d.now, enforced_at: null };
    // Intents safe to leave unknown are settled now: their calls are aborted with the rest.
    for (const [id, n] of Object.entries(d.run.nodes)) {
      if (n.s !== "active") continue;
      for (const [item, h] of holdersOf(n))
        for (const key of Object.keys(h.intents ?? {})) {
          // The effect machine: a call safe to leave unknown is abandoned (its receipt), a non-idempotent one let finish.
          const { decision } = stepEffect(effectOf(h, key), { type: "cancel", key, by, at: d.now });
          if (decision.decision === "record") recordReceipt(d, id, item, h, decision.receipt);
        }
    }
    publish(d, "run_cancel_requested", { reason, by });
  }
  // A repeated cancel places again what the first one asked (aborts, children's cancels): each is idempotent.
  stopNodes(d, "parent_cancelled", letsFinish);
  enforceWhenSettled(d);
  const waiting = cancelRequested(d.run);
  // The run as this write leaves it (its summary and cancel record): the caller answers with it, reading nothing back.
  d.effects.push({
    type: "runway.answer",
    value: { outcome: waiting ? "cancel_requested" : "cancelled", run: { ...runSummary(d.run, d.lifecycle), cancel: d.run.cancel } },
  });
}

/**
 * A report from an attempt a cancel let finish: its receipts are recorded, nothing else of it is
 * applied. An intent it ends without a receipt holds its step for a person.
 */
export function onLateResult(d: Draft, e: On<"step.result">): void {
  const holder = holderOf(d.run.nodes[e.node]!, e.item);
  if (!holder) return;
  for (const receipt of e.receipts ?? []) recordReceipt(d, e.node, e.item, holder, receipt);
  holdUnknown(d, holder);
  enforceWhenSettled(d);
}

export function onLateReceipt(d: Draft, e: On<"effect.receipt">): void {
  const holder = holderOf(d.run.nodes[e.node]!, e.item);
  if (holder) recordReceipt(d, e.node, e.item, holder, e.receipt);
  d.effects.push({ type: "runway.answer", value: { outcome: "recorded" } });
  enforceWhenSettled(d);
}

/** A receipt for an intent a requested cancel waits on (whatever the attempt's cancellation epoch: the intent predates the cancel). */
export function isLateReceipt(run: RunContext | null | undefined, e: ExecutionEvent): boolean {
  if (!cancelRequested(run) || (e.type !== "step.result" && e.type !== "effect.receipt")) return false;
  const n = run!.nodes[e.node];
  return !!n && n.s === "active" && !!holderOf(n, e.item)?.intents;
}

/** The attempt that made the call is gone without its receipt: a person settles the intent. */
export function holdUnknown(d: Draft, holder: Holder): void {
  const key = Object.keys(holder.intents ?? {})[0];
  // One key at a time is held on a step (a person settles it, then the next).
  if (!key || holder.reconcile) return;
  const { next, decision } = stepEffect(effectOf(holder, key), { type: "lost", at: d.now });
  if (decision.decision !== "hold_for_reconciliation") return;
  keepEffect(holder, key, next);
  delete holder.task;
}

/** Once no intent is in flight, the cancel is enforced: the run is `cancelled`. */
export function enforceWhenSettled(d: Draft): void {
  if (!cancelRequested(d.run)) return;
  for (const n of Object.values(d.run.nodes)) if (n.s === "active" && holdersOf(n).some(([, h]) => h.intents)) return;
  for (const n of Object.values(d.run.nodes)) {
    if (n.s !== "active" && n.s !== "pending") continue;
    n.s = "cancelled";
    for (const [, h] of holdersOf(n)) {
      const r = applyStepOp(h.step!, { op: "cancel", now: d.now });
      if (r.outcome === "moved") h.step = r.state;
      delete h.reconcile;
    }
  }
  if (!move(d, "cancel")) return;
  d.run.cancel = { ...d.run.cancel!, enforced_at: d.now };
  publish(d, "run_cancelled", { reason: d.run.cancel.reason, by: d.run.cancel.by });
  notifyParent(d);
}

/** Settling an intent of a cancelled run: `done` is its receipt, anything else abandons it (nothing is called again under a cancel). */
export function settleUnderCancel(d: Draft, e: On<"effect.settle">): void {
  const { node, item, holder } = reconciling(d.run, e.key)!;
  const { decision } = stepEffect(effectOf(holder, e.key), {
    type: "settle",
    key: e.key,
    decision: e.decision,
    result: e.result,
    by: e.by,
    at: d.now,
    cancelled: true,
  });
  if (decision.decision === "settled") recordReceipt(d, node, item, holder, decision.receipt);
  delete holder.reconcile;
  d.effects.push({ type: "runway.answer", value: { outcome: "settled", decision: e.decision, node, ...(item !== undefined ? { item } : {}) } });
  enforceWhenSettled(d);
}
