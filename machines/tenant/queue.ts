import type { Lane, TenantContext } from "./context.js";
import { entryKey, memberKey, SHARED_LANE, type FactReader, type QueueEntry, type StoreOp } from "./members.js";
import type { QueueReason } from "./events.js";

/**
 * The tenant's queue, out of its record: one FIFO lane per capped project, one shared lane for the
 * rest, so a project held by its cap never holds back another's runs. A freed slot starts the lane
 * head with the lowest queue position `g` whose project fits (oldest first). Holes left by runs that
 * ended while queued are skipped once, so reads are amortised O(1); a transition starts at most
 * {@link PROMOTE_BATCH} runs and asks itself to go on.
 */

/** How many runs may wait behind a tenant's concurrency caps; a start beyond it is refused `queue_full`. */
export const MAX_QUEUED = 5_000;
/** Queued runs one transition starts (or moves between lanes) at most; `tenant.promote` goes on. */
export const PROMOTE_BATCH = 64;

const own = <T>(record: Record<string, T>, key: string): T | undefined => (Object.hasOwn(record, key) ? record[key] : undefined);

export function capOf(context: TenantContext, project: string): number | undefined {
  return own(context.settings.project_max_concurrency, project);
}

/** Which cap keeps a run of `project` from starting now, if any. */
export function capReached(context: TenantContext, project: string): { reason: QueueReason; active: number; limit: number } | undefined {
  const s = context.settings;
  if (context.active_runs >= s.max_concurrency) return { reason: "concurrency_cap_reached", active: context.active_runs, limit: s.max_concurrency };
  const cap = capOf(context, project);
  const inProject = own(context.active_by_project, project) ?? 0;
  if (cap !== undefined && inProject >= cap) return { reason: "project_cap_reached", active: inProject, limit: cap };
  return undefined;
}

/** `context` with one more (or, with -1, one fewer) running run of `project`; only capped projects are counted by project. */
export function countRunning(context: TenantContext, project: string, delta: 1 | -1): TenantContext {
  const byProject = { ...context.active_by_project };
  if (capOf(context, project) !== undefined || Object.hasOwn(byProject, project)) {
    const n = (own(byProject, project) ?? 0) + delta;
    if (n > 0) byProject[project] = n;
    else delete byProject[project];
  }
  return { ...context, active_runs: Math.max(0, context.active_runs + delta), active_by_project: byProject };
}

function laneFor(context: TenantContext, project: string): string {
  return capOf(context, project) !== undefined ? project : SHARED_LANE;
}

function withLane(context: TenantContext, name: string, lane: Lane | undefined): TenantContext {
  const lanes = { ...context.lanes };
  if (lane && lane.count > 0) lanes[name] = lane;
  else delete lanes[name];
  return { ...context, lanes };
}

/**
 * Appends `run` to its project's lane (the shared one when the project has no cap) at queue
 * position `g` (default: the next one). Writes the slot and the run's member key; counts it queued.
 */
export function enqueue(
  context: TenantContext,
  run: string,
  project: string,
  store: StoreOp[],
  g = context.q_next,
  name = laneFor(context, project),
): TenantContext {
  const current = own(context.lanes, name);
  const n = current?.next ?? context.q_next;
  const entry: QueueEntry = { r: run, p: project, g };
  store.push({ key: entryKey(name, n), value: entry }, { key: memberKey(run), value: { s: "q", p: project, l: name, n, g } });
  const lane: Lane = current && current.count > 0 ? { ...current, next: n + 1, count: current.count + 1 } : { first: n, next: n + 1, count: 1, head: entry };
  return { ...withLane(context, name, lane), queued_runs: context.queued_runs + 1, q_next: Math.max(context.q_next, g) + 1 };
}

/** Drops slot `n` of lane `name` (its run started, ended or moved); the head moves on past holes. */
export function dropSlot(context: TenantContext, name: string, n: number, facts: FactReader, store: StoreOp[]): TenantContext {
  store.push({ key: entryKey(name, n), value: null });
  const lane = own(context.lanes, name);
  if (!lane || n < lane.first || n >= lane.next) return context;
  const left = lane.count - 1;
  if (left <= 0) return withLane(context, name, undefined);
  if (n !== lane.first) return withLane(context, name, { ...lane, count: left });
  for (let i = n + 1; i < lane.next; i++) {
    const entry = facts.entry(name, i, lane.next);
    if (entry) return withLane(context, name, { first: i, next: lane.next, count: left, head: entry });
  }
  // Counted runs but no slot holds one: the lane is empty after all.
  return withLane(context, name, undefined);
}

/** Where a queued run at position `g` stands: at most this many queued runs are ahead of it. */
export function positionOf(context: TenantContext, g: number): number {
  let oldest = g;
  for (const lane of Object.values(context.lanes)) if (lane.head && lane.head.g < oldest) oldest = lane.head.g;
  return Math.max(0, Math.min(context.queued_runs - 1, g - oldest));
}

/**
 * Starts queued runs that fit under the caps, oldest first among the lane heads whose project fits.
 * A shared-lane head whose project gained a cap moves to that project's lane, so it no longer
 * blocks the shared one. At most {@link PROMOTE_BATCH} moves per transition; `more` asks for
 * another `tenant.promote`.
 */
export function promote(context: TenantContext, facts: FactReader, store: StoreOp[]): { context: TenantContext; admitted: string[]; more: boolean } {
  let next = context;
  const admitted: string[] = [];
  let moves = 0;
  while (admitted.length + moves < PROMOTE_BATCH) {
    if (next.state !== "active" || next.active_runs >= next.settings.max_concurrency) break;
    let best: [string, Lane] | undefined;
    let stuck: Lane | undefined;
    for (const [name, lane] of Object.entries(next.lanes)) {
      if (!lane.head) continue;
      if (capReached(next, lane.head.p)) {
        if (name === SHARED_LANE && capOf(next, lane.head.p) !== undefined) stuck = lane;
        continue;
      }
      if (!best || lane.head.g < best[1].head!.g) best = [name, lane];
    }
    if (stuck?.head) {
      const e = stuck.head;
      next = dropSlot(next, SHARED_LANE, stuck.first, facts, store);
      next = enqueue({ ...next, queued_runs: next.queued_runs - 1 }, e.r, e.p, store, e.g, e.p);
      moves++;
      continue;
    }
    if (!best) break;
    const [name, lane] = best;
    const e = lane.head!;
    next = dropSlot(next, name, lane.first, facts, store);
    next = { ...countRunning(next, e.p, 1), queued_runs: next.queued_runs - 1 };
    store.push({ key: memberKey(e.r), value: { s: "r", p: e.p } });
    admitted.push(e.r);
  }
  if (next === context) return { context, admitted, more: false };
  return { context: next, admitted, more: admitted.length + moves >= PROMOTE_BATCH };
}
