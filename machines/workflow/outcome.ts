/**
 * Outcomes: of a join (parallel / branch_end), of the whole run, the run's result, and the pure
 * input side of work nodes (map item lists, per-item input, node input).
 */
import type { Json } from "./canonical.js";
import type { NodeState, NodeStates, Plan, PlanMap, PlanNode, Scope } from "./plan.js";
import { planIndex } from "./plan.js";
import { resolveTemplate, type Resolved } from "./templates.js";

function stateOf(states: NodeStates, id: string): NodeState {
  return (Object.hasOwn(states, id) ? states[id] : undefined) ?? { status: "pending" };
}

const STRUCTURAL: ReadonlySet<PlanNode["kind"]> = new Set<PlanNode["kind"]>(["parallel", "branch", "branch_end"]);

/**
 * The outcome of a `parallel` join or a `branch_end`: failed when a member failed and that member
 * does not declare continue_on_error; skipped and cancelled members are fine. The members of a
 * branch_end are the branch decision and the direct nodes of both paths; a nested container is
 * represented by its own join (or end), so its continue_on_error is honoured. Throws on an id that
 * is not a join of this plan (a caller bug, not a run outcome).
 */
export function joinOutcome(plan: Pick<Plan, "nodes">, joinId: string, states: NodeStates): "succeeded" | "failed" {
  const byId = planIndex(plan);
  const join = byId.get(joinId);
  if (!join || (join.kind !== "parallel" && join.kind !== "branch_end")) throw new Error(`'${joinId}' is not a parallel or branch_end node of this plan`);
  const failed = join.members.some((m) => stateOf(states, m).status === "failed" && !(byId.get(m)?.continue_on_error ?? false));
  return failed ? "failed" : "succeeded";
}

export type RunOutcome = { done: false } | { done: true; status: "succeeded" | "failed"; failed: string[] };

/**
 * Done when no node is pending or active. Failed when a node failed without continue_on_error and
 * nothing handles it (a `needs` with `failed`, `always` or `completed`); a failure inside a container
 * surfaces as its join node. Cancellation is the engine's decision, not this one's.
 */
export function runOutcome(plan: Pick<Plan, "nodes">, states: NodeStates): RunOutcome {
  const handled = new Set<string>();
  for (const n of plan.nodes)
    for (const need of n.needs) if (need.when === "failed" || need.when === "always" || need.when === "completed") handled.add(need.node);
  const failed: string[] = [];
  for (const n of plan.nodes) {
    const { status } = stateOf(states, n.id);
    if (status === "pending" || status === "active") return { done: false };
    if (status === "failed" && !n.continue_on_error && !handled.has(n.id)) failed.push(n.id);
  }
  return { done: true, status: failed.length > 0 ? "failed" : "succeeded", failed };
}

/** `scope.steps` built from node states: status and output of every node that has a state. */
export function stepsScope(states: NodeStates): Scope["steps"] {
  const steps: Record<string, { status: NodeState["status"]; output?: unknown }> = {};
  for (const [id, s] of Object.entries(states)) if (s) steps[id] = s.output === undefined ? { status: s.status } : { status: s.status, output: s.output };
  return steps;
}

/**
 * The run's result: the definition's `result` template resolved in `scope`; by default an object
 * with one key per work node (code, map, subworkflow, sleep) that succeeded with an output other
 * than `undefined`, in plan order. A node that did not run has no key (never null).
 */
export function runResult(plan: Pick<Plan, "nodes" | "result">, states: NodeStates, scope: Scope): Resolved {
  if (plan.result !== undefined) return resolveTemplate(plan.result, scope);
  const value: Record<string, unknown> = {};
  for (const n of plan.nodes) {
    const s = stateOf(states, n.id);
    if (!STRUCTURAL.has(n.kind) && s.status === "succeeded" && s.output !== undefined) value[n.id] = s.output;
  }
  return { ok: true, value };
}

export type MapItems = { ok: true; items: unknown[] } | { ok: false; code: "reference_unreadable" | "items_not_a_list" | "fanout_exceeded"; detail: string };

/**
 * The item list of a map node, checked before any call: unreadable, not a list, or longer than
 * `max_fanout` each fail the whole node up front. An empty list is a valid, empty fan-out.
 */
export function mapItems(node: Pick<PlanMap, "items" | "max_fanout">, scope: Scope): MapItems {
  const r = resolveTemplate(node.items, { input: scope.input, steps: scope.steps });
  if (!r.ok) return { ok: false, code: "reference_unreadable", detail: r.path };
  if (!Array.isArray(r.value))
    return { ok: false, code: "items_not_a_list", detail: `${node.items} is ${r.value === null ? "null" : typeof r.value}, not a list` };
  if (r.value.length > node.max_fanout)
    return { ok: false, code: "fanout_exceeded", detail: `${r.value.length} items, more than max_fanout ${node.max_fanout}` };
  return { ok: true, items: r.value };
}

/** The input of one map item: the node's `input` template with `item` and `index` bound; the item itself by default. */
export function mapItemInput(node: Pick<PlanMap, "input">, scope: Scope, item: unknown, index: number): Resolved {
  const template: Json = node.input === undefined ? "${item}" : node.input;
  return resolveTemplate(template, { input: scope.input, steps: scope.steps, item, index });
}

/** The input of a code or subworkflow node: its `input` template resolved; `null` when it has none. */
export function nodeInput(node: { input?: Json }, scope: Scope): Resolved {
  return node.input === undefined ? { ok: true, value: null } : resolveTemplate(node.input, scope);
}
