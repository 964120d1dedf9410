import { isTerminal } from "../run/index.js";
import { ticketId } from "./attempts.js";
import type { ItemRun, NodeRun, RunContext, SweepSettings } from "./types.js";

export type { SweepSettings };

/**
 * The recovery sweep's decisions about one run: what a pass repairs when a clock or a hand-over was
 * lost. Applied under the run's own lock (`run.sweep`), so a run that moved since the read is judged
 * as it is. Never fails a queued run, nor touches a waiting one before its deadline and grace.
 */

export const DEFAULT_SWEEP: SweepSettings = { lease_grace_ms: 5_000, reoffer_after_ms: 60_000 };

export type SweepAction =
  /** A queued top-level run asks its tenant again whether it holds a slot (the admission may have been lost). */
  | { action: "recheck_admission"; tenant: string }
  /** A lease past expiry and grace: the attempt fails `worker_lost` and retries under its policy. */
  | { action: "expire_lease"; node: string; item?: number }
  /** A ready attempt whose offer (or retry timer) was lost is offered again, once. */
  | { action: "reoffer"; node: string; item?: number }
  /** Offered again and still not leased a pass later: the attempt fails `dispatch_lost` and follows its retry policy. */
  | { action: "dispatch_lost"; node: string; item?: number }
  /** Waiting past its deadline (which includes the grace window): ended `wait_abandoned`. */
  | { action: "wait_abandoned" }
  /** A map's expansion asked of the tenant long ago and never answered: asked again (the tenant answers once per node). */
  | { action: "recheck_expansion"; node: string };

const live = (s: string) => s === "leased" || s === "running";

function holderActions(
  runId: string,
  node: string,
  h: ItemRun | NodeRun,
  item: number | undefined,
  at: number,
  s: SweepSettings,
  held: ReadonlySet<string>,
): SweepAction[] {
  const step = h.step;
  if (!step) return [];
  const where = { node, ...(item !== undefined ? { item } : {}) };
  // An offer the node's scheduler still holds (queued behind others, or granted and running) is not lost, whatever its age.
  if (h.offered !== undefined && held.has(ticketId(runId, node, item, h.offered))) return [];
  if (live(step.status) && h.lease_expires_at !== undefined && at >= h.lease_expires_at + s.lease_grace_ms) return [{ action: "expire_lease", ...where }];
  // A step held for a person (an unknown outcome to settle, a gated call to approve) is offered to nobody: nothing was lost.
  if (step.status !== "ready" || h.reconcile || (step.not_before !== null && step.not_before > at)) return [];
  if ("approval" in h && h.approval?.state === "pending") return [];
  // An agent waiting on its subagent's child run: the child's end offers it.
  if ("subagent" in h && h.subagent) return [];
  // A map item never offered is the map's own pacing (its concurrency), not a lost hand-over.
  if (item !== undefined && h.offered === undefined) return [];
  const since = h.offered_at ?? step.not_before ?? 0;
  if (at - since < s.reoffer_after_ms) return [];
  // A lost hand-over is repaired once; one that is lost again is the attempt's failure, so nothing loops silently.
  return [{ action: h.reoffered ? "dispatch_lost" : "reoffer", ...where }];
}

export function sweepPlan(run: RunContext, at: number, settings: SweepSettings = DEFAULT_SWEEP, heldTickets: readonly string[] = []): SweepAction[] {
  const held = new Set(heldTickets);
  const lc = run.lifecycle;
  if (isTerminal(lc.status)) return [];
  if (lc.status === "queued") return run.parent_run_id === null ? [{ action: "recheck_admission", tenant: run.tenant }] : [];
  if (lc.status === "waiting" && lc.waiting_expires_at !== null && at >= lc.waiting_expires_at) return [{ action: "wait_abandoned" }];
  const out: SweepAction[] = [];
  for (const [id, n] of Object.entries(run.nodes)) {
    if (n.s !== "active") continue;
    if (n.expansion?.state === "pending" && at - n.expansion.asked_at >= settings.reoffer_after_ms) out.push({ action: "recheck_expansion", node: id });
    if (n.step) out.push(...holderActions(run.id, id, n, undefined, at, settings, held));
    for (const [i, it] of Object.entries(n.map?.live ?? {})) out.push(...holderActions(run.id, id, it, Number(i), at, settings, held));
  }
  return out;
}

/**
 * Whether a child run's parent is gone: the parent record is missing, ended, or no longer waits
 * on this child at the node that started it. Such a child has nobody to report to and nothing
 * else will end it.
 */
export function parentGone(child: RunContext, parent: RunContext | null): boolean {
  if (child.parent_run_id === null) return false;
  if (!parent) return true;
  if (isTerminal(parent.lifecycle.status)) return true;
  const n = child.parent_node ? parent.nodes[child.parent_node] : undefined;
  return !n || n.s !== "active" || n.child !== child.id;
}
