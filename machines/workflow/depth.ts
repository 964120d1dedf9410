/**
 * Subworkflow depth: how many workflow runs deep a tree can grow below (and including) one
 * workflow. The same function serves publish (compile.ts, with a loader of published plans) and
 * run time (with a loader of the versions a child would start), so a workflow published after its
 * parent was validated still cannot deepen a running tree past the cap.
 */
import type { PlanNode } from "./plan.js";

export type PlanLike = { name: string; nodes: readonly PlanNode[] };
/** Loads the plan a subworkflow name resolves to; `undefined` when it cannot be resolved. */
export type LoadPlan = (name: string) => PlanLike | undefined;
export type DepthResult = { ok: true; depth: number } | { ok: false; code: "workflow_cycle" | "subworkflow_unresolvable" | "depth_exceeded"; chain: string[] };

/**
 * Depth of `root`: 1 for a workflow without subworkflow nodes, else 1 + the deepest child.
 * Exploration stops as soon as the depth passes `max`, so the loader is called a bounded number of
 * times along any one chain. `chain` names the workflows from `root` to the offending one.
 */
export function workflowDepth(root: PlanLike, load: LoadPlan, max: number): DepthResult {
  const memo = new Map<string, number>();
  const visit = (plan: PlanLike, chain: string[]): DepthResult => {
    const known = memo.get(plan.name);
    if (known !== undefined) return { ok: true, depth: known };
    if (chain.length > max) return { ok: false, code: "depth_exceeded", chain };
    let deepest = 0;
    const children = [...new Set(plan.nodes.flatMap((n) => (n.kind === "subworkflow" ? [n.workflow] : [])))];
    for (const name of children) {
      const next = [...chain, name];
      if (chain.includes(name)) return { ok: false, code: "workflow_cycle", chain: next };
      const child = load(name);
      if (!child) return { ok: false, code: "subworkflow_unresolvable", chain: next };
      const r = visit(child, next);
      if (!r.ok) return r;
      deepest = Math.max(deepest, r.depth);
    }
    const depth = 1 + deepest;
    if (chain.length - 1 + depth > max) return { ok: false, code: "depth_exceeded", chain };
    memo.set(plan.name, depth);
    return { ok: true, depth };
  };
  return visit(root, [root.name]);
}

/**
 * The run-time rule for starting a child: `runDepth` counts the workflow runs from the root to the
 * parent run inclusive, `childDepth` is `workflowDepth` of the child's workflow. Refuse when the
 * sum passes the cap.
 */
export function childDepthAllowed(runDepth: number, childDepth: number, max: number): boolean {
  return runDepth + childDepth <= max;
}
