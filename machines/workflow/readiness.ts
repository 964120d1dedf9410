/**
 * Readiness: which pending plan nodes may start, and which can never start and are to be skipped.
 * A pure projection of (plan, node states); the engine owns the states and calls this after every
 * change. Determinism: answers are in plan order and depend only on the states, so the same
 * recorded outcomes always produce the same walk.
 */
import { SETTLED, type NodeState, type NodeStates, type Plan, type PlanNeed } from "./plan.js";

export type Readiness = { ready: string[]; skip: string[] };

const PENDING: NodeState = { status: "pending" };

function stateOf(states: NodeStates, id: string): NodeState {
  return (Object.hasOwn(states, id) ? states[id] : undefined) ?? PENDING;
}

/** Whether a settled dependency satisfies one need. */
export function needSatisfied(need: PlanNeed, dep: NodeState): boolean {
  switch (need.when) {
    case "succeeded":
      return dep.status === "succeeded";
    case "failed":
      return dep.status === "failed";
    case "always":
      return SETTLED.has(dep.status);
    case "completed":
      return dep.status === "succeeded" || dep.status === "failed";
    case "then":
    case "else":
      return dep.status === "succeeded" && dep.taken === need.when;
  }
}

/**
 * For every pending node (a missing state counts as pending) whose needs all name settled nodes
 * (succeeded, failed, skipped, cancelled): `ready` when every need is satisfied, else `skip`.
 * Nodes with an unsettled need appear in neither list. Both lists are in plan order.
 */
export function readiness(plan: Pick<Plan, "nodes">, states: NodeStates): Readiness {
  const ready: string[] = [];
  const skip: string[] = [];
  for (const node of plan.nodes) {
    if (stateOf(states, node.id).status !== "pending") continue;
    let settled = true;
    let satisfied = true;
    for (const need of node.needs) {
      const dep = stateOf(states, need.node);
      if (!SETTLED.has(dep.status)) {
        settled = false;
        break;
      }
      if (!needSatisfied(need, dep)) satisfied = false;
    }
    if (settled) (satisfied ? ready : skip).push(node.id);
  }
  return { ready, skip };
}

/**
 * Applies skips until none is left (a skip can make a dependent skippable). Returns the new states
 * (the input is not modified) and the skipped ids in the order they were decided: plan order
 * within each round. Converges in one round for a compiled plan, which is topologically sorted.
 */
export function settleSkips(plan: Pick<Plan, "nodes">, states: NodeStates): { states: Record<string, NodeState>; skipped: string[] } {
  const next = ownCopy(states);
  return { states: next, skipped: settleSkipsInPlace(plan, next).skipped };
}

/**
 * {@link settleSkips} on states the caller owns (changed in place), with what is ready once the
 * skips are applied: the last round's readiness, so the caller need not walk the plan again.
 */
export function settleSkipsInPlace(plan: Pick<Plan, "nodes">, states: Record<string, NodeState>): { skipped: string[]; ready: string[] } {
  const skipped: string[] = [];
  for (;;) {
    const { ready, skip } = readiness(plan, states);
    if (skip.length === 0) return { skipped, ready };
    for (const id of skip) {
      states[id] = { status: "skipped" };
      skipped.push(id);
    }
  }
}

/** The set states of `states`, in an object of the caller's own. */
export function ownCopy(states: NodeStates): Record<string, NodeState> {
  const next: Record<string, NodeState> = {};
  for (const id in states) {
    const s = states[id];
    if (s) next[id] = s;
  }
  return next;
}

/**
 * One projection step for the engine: apply all skips, then report what is ready.
 * The engine starts work nodes (code, map, subworkflow, sleep), decides `branch` nodes with
 * `evaluateCondition`, and settles `parallel` / `branch_end` nodes at once with `joinOutcome`.
 */
export function advance(plan: Pick<Plan, "nodes">, states: NodeStates): { states: Record<string, NodeState>; skipped: string[]; ready: string[] } {
  const next = ownCopy(states);
  return { states: next, ...settleSkipsInPlace(plan, next) };
}
