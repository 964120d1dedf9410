import { mapItems } from "../workflow/index.js";
import { costOf, pumpMap } from "./attempts.js";
import { newMap } from "./items.js";
import { fail, publish, scopeOf, type Draft } from "./draft.js";

/**
 * Dynamic expansion is admitted by the run's tenant before any item starts (items per
 * expansion, depth, steps and estimated cost per run, the tenant's active descendants).
 */
export function askExpansion(d: Draft, nodeId: string, children: number): void {
  const n = d.run.nodes[nodeId]!;
  n.expansion = { state: "pending", children, asked_at: d.now };
  let items = 0;
  let cost = 0;
  for (const node of d.plan.nodes) {
    const made = d.run.nodes[node.id]?.map?.total ?? 0;
    items += made;
    if (node.kind === "code") cost += costOf(node);
    else if (node.kind === "map") cost += costOf(node) * (node.id === nodeId ? children : made);
  }
  const total = d.plan.nodes.length + items + children;
  const r = d.run;
  d.effects.push({
    type: "runway.send",
    to: { kind: "tenant", id: r.tenant },
    event: { type: "tenant.admit_expansion", run_id: r.id, node: nodeId, children, depth: r.depth + 1, total_steps: total, estimated_cost: cost },
  });
  publish(d, "step_started", { node: nodeId, expansion: "requested", children });
}

/** The tenant admitted it: the map's items are made and the first ones offered. */
export function admitItems(d: Draft, nodeId: string): void {
  const node = d.byId.get(nodeId)!;
  const n = d.run.nodes[nodeId]!;
  if (node.kind !== "map") return;
  n.expansion = { ...n.expansion!, state: "admitted" };
  const items = mapItems(node, scopeOf(d));
  if (!items.ok) return fail(d, node.id, { code: items.code, message: items.detail });
  n.map = newMap(items.items.length);
  pumpMap(d, node);
}

/** Expansions whose node is no longer active give their items back to the tenant (asked ones too: the answer may still come). */
export function releaseExpansions(d: Draft): void {
  for (const [id, n] of Object.entries(d.run.nodes)) {
    if (!n.expansion || n.s === "active") continue;
    // Given back once; a settled node keeps nothing of it (its head stays as small as the plan).
    delete n.expansion;
    d.effects.push({ type: "runway.send", to: { kind: "tenant", id: d.run.tenant }, event: { type: "tenant.release_expansion", run_id: d.run.id, node: id } });
  }
}
