/**
 * The whole pure part of one walk step: apply skips, settle the structural nodes that are ready
 * (a `branch` is decided by its condition, a `parallel` or `branch_end` takes its `joinOutcome`),
 * and repeat until only work nodes (code, map, subworkflow, sleep) are ready. The engine then
 * starts exactly `ready`. The same plan, input and states always give the same answer.
 */
import { evaluateCondition } from "./conditions.js";
import { joinOutcome, stepsScope } from "./outcome.js";
import { planIndex, type NodeState, type NodeStates, type Plan } from "./plan.js";
import { ownCopy, settleSkipsInPlace } from "./readiness.js";

/** One structural node settled by `progress`, in the order it was settled. */
export type Settled = { id: string; status: "succeeded" | "failed"; taken?: "then" | "else" };
/** A branch whose condition could not be read: failed, and never to be tolerated by continue_on_error. */
export type Fatal = { id: string; code: "condition_unreadable"; path: string };

export type Progress = {
  states: Record<string, NodeState>;
  /** Work nodes to start now, in plan order. */
  ready: string[];
  skipped: string[];
  settled: Settled[];
  fatal: Fatal[];
};

export function progress(plan: Pick<Plan, "nodes">, states: NodeStates, input: unknown): Progress {
  const byId = planIndex(plan);
  const skipped: string[] = [];
  const settled: Settled[] = [];
  const fatal: Fatal[] = [];
  const current = ownCopy(states);
  for (;;) {
    const skips = settleSkipsInPlace(plan, current);
    skipped.push(...skips.skipped);
    const ready = skips.ready;
    const structural = ready.filter((id) => {
      const kind = byId.get(id)?.kind;
      return kind === "branch" || kind === "parallel" || kind === "branch_end";
    });
    if (structural.length === 0) return { states: current, ready, skipped, settled, fatal };
    for (const id of structural) {
      const node = byId.get(id);
      if (!node) continue;
      if (node.kind === "branch") {
        const r = evaluateCondition(node.condition, { input, steps: stepsScope(current) });
        if (r.ok) {
          const taken = r.value ? "then" : "else";
          current[id] = { status: "succeeded", taken };
          settled.push({ id, status: "succeeded", taken });
        } else {
          current[id] = { status: "failed" };
          settled.push({ id, status: "failed" });
          fatal.push({ id, code: r.code, path: r.path });
        }
      } else {
        const status = joinOutcome(plan, id, current);
        current[id] = { status };
        settled.push({ id, status });
      }
    }
  }
}
