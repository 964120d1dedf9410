import type { ScheduleSpec } from "./spec.js";

/**
 * When a schedule is due, as a pair of pure functions of an instant (epoch ms). A cron timing is
 * made outside machines/ (croner, gateways/schedules/cron.ts); an interval's is `everyTiming`.
 */
export interface Timing {
  /** The first due time strictly after `after`; undefined when there is none. */
  next(after: number): number | undefined;
  /** The newest `n` due times at or before `atOrBefore`, newest first. */
  previous(atOrBefore: number, n: number): number[];
}

/** An interval's due times: `anchor + k·ms` for every k ≥ 1 (the anchor is when its timing was set). */
export function everyTiming(anchor: number, ms: number): Timing {
  return {
    next: (after) => anchor + (after < anchor ? 1 : Math.floor((after - anchor) / ms) + 1) * ms,
    previous: (atOrBefore, n) => {
      const out: number[] = [];
      for (let k = Math.floor((atOrBefore - anchor) / ms); k >= 1 && out.length < n; k--) out.push(anchor + k * ms);
      return out;
    },
  };
}

/**
 * A firing noticed this late after its due time is missed (the missed policy decides), unless it
 * is the newest due one noticed within this grace: long enough for a failover to lose nothing.
 */
export const MISFIRE_GRACE_MS = 60_000;

/** A schedule's stored state: its spec, and where its firings stand. */
export interface ScheduleState {
  spec: ScheduleSpec;
  created_at: number;
  updated_at: number;
  /** When its timing was last set: the origin of an interval's due times. */
  anchor: number;
  /** Every due time at or before this instant was started or passed over: only later ones are pending. */
  cursor: number;
  /** Firings whose start was made (a run started or found started by its key, or a refusal: `last.outcome` says). */
  fired: number;
  /** The last firing started and what the start answered. */
  last?: { due: number; outcome: string; run_id?: string; at: number };
  /** The newest due time the missed policy passed over. */
  skipped_through?: number;
}

/** What one look at a schedule decided: the due times to start (oldest first) and the new cursor. */
export interface FiringPlan {
  start: number[];
  cursor: number;
  /** Due times after the old cursor that the missed policy passed over: the newest of them. */
  skipped_through?: number;
}

/**
 * The firings to start at `now`. Due times in (cursor, now] are pending; the newest one is on
 * time when it is at most `graceMs` old. `skip` starts it alone; `{catch_up: N}` starts it and
 * the N newest missed ones before it (N newest when it is late itself). Everything else pending
 * is passed over, and the cursor moves to the newest due time, so no due time is looked at twice.
 * A paused schedule starts nothing.
 */
export function firingPlan(state: ScheduleState, now: number, timing: Timing, graceMs = MISFIRE_GRACE_MS): FiringPlan {
  if (state.spec.paused) return { start: [], cursor: state.cursor };
  const catchUp = state.spec.missed === "skip" ? 0 : state.spec.missed.catch_up;
  // One more than can be started: the newest beyond those says whether anything was passed over.
  const pending = timing.previous(now, catchUp + 2).filter((t) => t > state.cursor);
  const newest = pending[0];
  if (newest === undefined) return { start: [], cursor: state.cursor };
  const onTime = now - newest <= graceMs;
  const chosen = onTime ? pending.slice(0, 1 + catchUp) : pending.slice(0, catchUp);
  const passed = pending.filter((t) => !chosen.includes(t));
  const plan: FiringPlan = { start: chosen.reverse(), cursor: newest };
  if (passed.length > 0) plan.skipped_through = passed[0]!;
  return plan;
}

/** The next due time of a schedule after `now` that a look would start (undefined: paused, or none ever). */
export function nextDue(state: ScheduleState, now: number, timing: Timing): number | undefined {
  if (state.spec.paused) return undefined;
  return timing.next(Math.max(state.cursor, now));
}

/** The earliest instant a look could find something to start: the first due time after the cursor. */
export function wakeAt(state: ScheduleState, timing: Timing): number | undefined {
  return state.spec.paused ? undefined : timing.next(state.cursor);
}

/** A schedule put for the first time at `now`: due times after `now` are pending. */
export function createdSchedule(spec: ScheduleSpec, now: number): ScheduleState {
  return { spec, created_at: now, updated_at: now, anchor: now, cursor: now, fired: 0 };
}

function sameTiming(a: ScheduleSpec, b: ScheduleSpec): boolean {
  return JSON.stringify([a.cron ?? null, a.every ?? null]) === JSON.stringify([b.cron ?? null, b.every ?? null]);
}

/**
 * A schedule put again. Its firing state stays; a new timing starts afresh from `now` (nothing
 * due under the old timing or before now is started), and a put that unpauses it resumes it.
 */
export function replacedSchedule(prev: ScheduleState, spec: ScheduleSpec, now: number): ScheduleState {
  const next: ScheduleState = { ...prev, spec, updated_at: now };
  if (!sameTiming(prev.spec, spec)) {
    next.anchor = now;
    next.cursor = Math.max(prev.cursor, now);
  } else if (prev.spec.paused && !spec.paused) next.cursor = Math.max(prev.cursor, now);
  return next;
}

/** Paused: no firing starts until it is resumed. */
export function pausedSchedule(prev: ScheduleState, now: number): ScheduleState {
  if (prev.spec.paused) return prev;
  return { ...prev, spec: { ...prev.spec, paused: true }, updated_at: now };
}

/** Resumed at `now`: firings due while it was paused are never started (they were not missed, they were paused). */
export function resumedSchedule(prev: ScheduleState, now: number): ScheduleState {
  if (!prev.spec.paused) return prev;
  return { ...prev, spec: { ...prev.spec, paused: false }, updated_at: now, cursor: Math.max(prev.cursor, now) };
}

/** What the starts of a plan answered, one per due time of `plan.start` (in order). */
export interface FiringResult {
  due: number;
  outcome: string;
  run_id?: string;
}

/** The state after a look's starts were made: the cursor moved, the firings counted. */
export function firedSchedule(prev: ScheduleState, plan: FiringPlan, results: readonly FiringResult[], now: number): ScheduleState {
  const next: ScheduleState = { ...prev, cursor: Math.max(prev.cursor, plan.cursor), fired: prev.fired + results.length };
  const last = results[results.length - 1];
  if (last) next.last = { due: last.due, outcome: last.outcome, ...(last.run_id ? { run_id: last.run_id } : {}), at: now };
  if (plan.skipped_through !== undefined) next.skipped_through = Math.max(prev.skipped_through ?? 0, plan.skipped_through);
  return next;
}
