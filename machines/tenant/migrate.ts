import type { LegacyMembers, TenantContext, TenantContextV1 } from "./context.js";
import { endedKey, memberKey, reservationKey, type StoreOp } from "./members.js";
import { capOf, enqueue } from "./queue.js";

/**
 * A record of the older format keeps its members inside it (`running`, `queue`, `ended`,
 * `descendants`). {@link upgrade} sets them aside in `legacy`, and each transition moves up to
 * {@link MIGRATE_BATCH} of them out into keys and asks itself (`tenant.migrate`) to go on, so no
 * transition grows with the tenant. Counters are kept as they were: nothing is counted twice.
 */
export const MIGRATE_BATCH = 256;

export function isLegacy(context: TenantContext | TenantContextV1): context is TenantContextV1 {
  return (context as TenantContext).v !== 2;
}

/** The bounded form of any stored tenant context; a current one is returned as it is. */
export function upgrade(stored: TenantContext | TenantContextV1): TenantContext {
  if (!isLegacy(stored)) return stored;
  const running = Object.entries(stored.running ?? {});
  const byProject: Record<string, number> = {};
  const base: TenantContext = {
    v: 2,
    id: stored.id,
    settings: stored.settings,
    state: stored.state,
    state_reason: stored.state_reason,
    day: stored.day,
    starts_today: stored.starts_today,
    active_runs: running.length,
    active_by_project: byProject,
    queued_runs: 0,
    active_descendants: stored.active_descendants ?? 0,
    q_next: 0,
    lanes: {},
    created_at: stored.created_at,
    updated_at: stored.updated_at,
  };
  for (const [, project] of running) if (capOf(base, project) !== undefined) byProject[project] = (byProject[project] ?? 0) + 1;
  const legacy: LegacyMembers = {
    queue: stored.queue ?? [],
    running,
    ended: stored.ended ?? [],
    descendants: Object.entries(stored.descendants ?? {}),
  };
  const left = legacyLeft(legacy);
  return { ...base, queued_runs: legacy.queue.length, ...(left > 0 ? { legacy } : {}) };
}

export function legacyLeft(legacy: LegacyMembers | undefined): number {
  if (!legacy) return 0;
  return legacy.queue.length + legacy.running.length + legacy.ended.length + legacy.descendants.length;
}

/** The legacy members still to move out once this transition's chunk is out: while any are, commands that read membership wait. */
export function leftAfterChunk(context: TenantContext): number {
  return Math.max(0, legacyLeft(context.legacy) - MIGRATE_BATCH);
}

/** Moves the next chunk of legacy members into keys (`store`); drops `legacy` once it is empty. */
export function migrateChunk(context: TenantContext, store: StoreOp[], retentionMs: number, now: number): TenantContext {
  const legacy = context.legacy;
  if (!legacy) return context;
  let budget = MIGRATE_BATCH;
  const take = <T>(list: T[]): [T[], T[]] => {
    const n = Math.min(budget, list.length);
    budget -= n;
    return [list.slice(0, n), list.slice(n)];
  };
  let next = context;
  const [queued, queue] = take(legacy.queue);
  // Enqueued in order and counted again below: the queued count stays what it was.
  for (const [run, project] of queued) next = enqueue(next, run, project, store);
  next = { ...next, queued_runs: context.queued_runs };
  const [running, runningLeft] = take(legacy.running);
  for (const [run, project] of running) store.push({ key: memberKey(run), value: { s: "r", p: project } });
  const [ended, endedLeft] = take(legacy.ended);
  for (const run of ended) store.push({ key: endedKey(run), value: { at: now }, ttl_ms: retentionMs });
  const [held, heldLeft] = take(legacy.descendants);
  for (const [key, children] of held) {
    const slash = key.indexOf("/");
    store.push({ key: reservationKey(key.slice(0, slash), key.slice(slash + 1)), value: { c: children } });
  }
  const rest: LegacyMembers = { queue, running: runningLeft, ended: endedLeft, descendants: heldLeft };
  const { legacy: _dropped, ...migrated } = next;
  return legacyLeft(rest) > 0 ? { ...migrated, legacy: rest } : migrated;
}
