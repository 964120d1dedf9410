import type { TenantAudit, TenantState } from "./events.js";
import type { QueueEntry, StoreOp } from "./members.js";
import type { TenantSettings } from "./settings.js";

/**
 * One FIFO lane of the tenant's queue: slots `first` … `next - 1` of keys `q.<lane>.<n>`, of
 * which `count` still hold a queued run (a run that ended while it waited leaves a hole, skipped
 * when the head reaches it). `head` is the run at `first`.
 */
export interface Lane {
  first: number;
  next: number;
  count: number;
  head: QueueEntry | null;
}

/** What an older-format record still held inside it, moved out a chunk per transition. */
export interface LegacyMembers {
  /** Runs queued, oldest first: [run id, project]. Moved first, into the lanes, in order. */
  queue: [string, string][];
  running: [string, string][];
  ended: string[];
  descendants: [string, number][];
}

/**
 * A tenant as its actor stores it (`v: 2`). Bounded whatever the tenant's population: counters,
 * settings and one head per queue lane; the runs themselves are keys beside the record
 * (`members.ts`).
 */
export interface TenantContext {
  v: 2;
  id: string;
  settings: TenantSettings;
  state: TenantState;
  /** The reason given for the current kill or drain; null while new or active. */
  state_reason: string | null;
  /** 'YYYY-MM-DD' (UTC) of the day cap window `starts_today` counts in; never moves backwards. */
  day: string;
  starts_today: number;
  /**
   * Cents reserved today by runs admitted under a day budget and not ended (each has `b.<run>`);
   * absent in records stored before budgets (0).
   */
  reserved_cents?: number;
  /** Runs admitted and not ended (each has `m.<run>` with `s: "r"`). */
  active_runs: number;
  /** Of those, per project that has a cap (projects at 0 are absent). */
  active_by_project: Record<string, number>;
  /** Runs accepted and waiting for a slot (each has `m.<run>` with `s: "q"` and a queue slot). */
  queued_runs: number;
  /** Items of admitted expansions not yet released (each expansion has `x.<run>.<node>`). */
  active_descendants: number;
  /** The queue position the next queued run gets; orders runs across lanes. */
  q_next: number;
  /** Queue lanes with runs in them: one per project that had a cap when its runs queued, `""` for the rest. */
  lanes: Record<string, Lane>;
  /** Present while an older-format record is being moved out (see `migrate.ts`). */
  legacy?: LegacyMembers;
  created_at: number;
  updated_at: number;
}

/** A tenant in the older format: every member inside the record. Loaded and migrated, never written. */
export interface TenantContextV1 {
  id: string;
  settings: TenantSettings;
  state: TenantState;
  state_reason: string | null;
  day: string;
  starts_today: number;
  active_runs: number;
  active_by_project: Record<string, number>;
  running: Record<string, string>;
  descendants?: Record<string, number>;
  active_descendants?: number;
  queue: [string, string][];
  ended: string[];
  created_at: number;
  updated_at: number;
}

/** A decision: the next context (the same object when nothing changed) and the effects, answer first. */
export interface Decision<A> {
  context: TenantContext;
  answer: A;
  audit?: TenantAudit;
  /** Queued runs that got a slot: each is told `run.admitted`. */
  admitted?: string[];
  /** A reply to the run that asked (expansion admission). */
  reply?: { run: string; event: { type: string } & Record<string, unknown> };
  /** Membership keys to write, in order, once the record is stored. */
  store?: StoreOp[];
  /** Commands the tenant sends itself (more queued runs to start, more to migrate, a command deferred). */
  self?: ({ type: string } & Record<string, unknown>)[];
}
