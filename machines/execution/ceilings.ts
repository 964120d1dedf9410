import { isTerminal } from "../run/index.js";
import { applyStepOp } from "../step/index.js";
import type { CeilingReason, PlanNode } from "../workflow/index.js";
import { abortAttempts, fail, liveAttempts, publish, succeed, type Draft } from "./draft.js";
import { hasLive, liveItems, removeItem } from "./items.js";
import type { ItemRun, NodeRun } from "./types.js";

/**
 * Ceilings (seed 004's one status rule): steps, tool calls (checked at each intent, so a call past
 * the ceiling is never made), the wall clock, and a child's marked stop. Steps, calls and a child's
 * mark drain the run (nothing new starts, what is in flight finishes); the wall clock stops it at
 * once. Then the run succeeds with the reason as `partial_reason` if work was done, or fails with
 * it; a ceiling never hides a node's own failure.
 */

/** The wall clock ran out: counted from the run's start (waits count), never from its creation. */
export function wallHit(d: Draft): string | undefined {
  const wall = d.plan.limits?.max_wall_ms;
  const started = d.lifecycle.started_at;
  return wall !== undefined && started !== null && d.now - started >= wall ? `max_wall_ms (${wall})` : undefined;
}

/** The run started as many steps as it may. */
export function stepsHit(d: Draft): string | undefined {
  const max = d.plan.limits?.max_steps;
  return max !== undefined && (d.run.usage?.steps ?? 0) >= max ? `max_steps (${max})` : undefined;
}

/** A ceiling is reached: the first one names the stop (a later one changes nothing). */
export function ceilingDrain(d: Draft, which: string, reason: CeilingReason): void {
  if (isTerminal(d.lifecycle.status) || d.run.ceiling) return;
  d.run.ceiling = { reason, which, at: d.now };
  publish(d, "ceiling_reached", { ceiling: which, reason });
}

/** Under a draining ceiling: what is not in flight stops (a child in flight finishes too). */
export function stopIdle(d: Draft): void {
  for (const node of d.plan.nodes) {
    const n = d.run.nodes[node.id]!;
    if (n.s === "pending") n.s = "cancelled";
    if (n.s !== "active") continue;
    if (node.kind === "map" && n.map) stopMapIdle(d, node);
    // A subagent's child in flight finishes too (as a subworkflow's): its end lets its agent's node settle.
    else if (node.kind !== "subworkflow" && !n.subagent && !(n.step && inFlight(n))) {
      n.s = "cancelled";
      if (n.step) stopHolder(n, d.now);
      if (n.approval?.state === "pending") n.approval = { id: n.approval.id, state: "cancelled", by: null, at: d.now };
    }
  }
}

/**
 * A map under a draining ceiling: no item starts or retries, items in flight finish. Once none is
 * live it settles on the ordered prefix before its first stopping position: a later item's result
 * is dropped even if it finished first, so the output has no hole. An item before that position
 * that failed fails the map; with nothing before it the map did nothing (cancelled).
 */
export function stopMapIdle(d: Draft, node: Extract<PlanNode, { kind: "map" }>): void {
  const n = d.run.nodes[node.id]!;
  const map = n.map!;
  if (map.stop) return settleStop(d, node);
  map.stopped_at = Math.min(map.stopped_at ?? map.next, map.next);
  for (const [i, it] of liveItems(map)) {
    if (inFlight(it)) continue;
    stopHolder(it, d.now);
    removeItem(map, i);
    map.stopped_at = Math.min(map.stopped_at, Number(i));
  }
  if (hasLive(map)) return;
  const kept = map.stopped_at;
  if (map.first_failed !== undefined && map.first_failed < kept)
    return fail(d, node.id, { code: "map_item_failed", message: `item #${map.first_failed} failed before the ceiling stopped the map at #${kept}` });
  if (kept === 0) n.s = "cancelled";
  else succeed(d, node.id);
}

/**
 * A map holding a returned platform stop (C064: among several, the lowest input position's wins,
 * whatever order they return in). An item after it cannot change that: it is aborted and leaves
 * the map; so does one before it that is not in flight (nothing new starts or retries). Items
 * before it in flight finish, and once none is live the map fails with the stop, a ceiling's
 * prefix notwithstanding (a platform stop wins over a ceiling).
 */
export function settleStop(d: Draft, node: Extract<PlanNode, { kind: "map" }>): void {
  const map = d.run.nodes[node.id]!.map!;
  const stop = map.stop!;
  const dropped = liveItems(map).filter(([i, it]) => Number(i) > stop.at || !inFlight(it));
  abortAttempts(
    d,
    liveAttempts(
      node.id,
      dropped.map(([i, it]) => [Number(i), it]),
    ),
    stop.error.code,
  );
  for (const [i, it] of dropped) {
    stopHolder(it, d.now);
    removeItem(map, i);
  }
  if (!hasLive(map)) fail(d, node.id, stop.error);
}

/** An attempt that may be running now: leased or running, or offered (granted in memory, or about to be). */
function inFlight(h: ItemRun | NodeRun): boolean {
  const s = h.step;
  return !!s && (s.status === "leased" || s.status === "running" || (s.status === "ready" && h.offered !== undefined));
}

/** The holder's step ends cancelled: a later report of its attempt is refused as stale. */
export function stopHolder(h: ItemRun | NodeRun, now: number): void {
  const r = applyStepOp(h.step!, { op: "cancel", now });
  if (r.outcome === "moved") h.step = r.state;
  delete h.offered;
  delete h.lease_expires_at;
}
