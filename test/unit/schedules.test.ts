// The pure schedule logic (machines/schedules): when a schedule is next due, which firings a look
// starts under each missed policy after downtime, and what pause, resume and a put do to them.
// Time is an input everywhere: no clock, no sleep.
import { describe, expect, it } from "vitest";
import {
  createdSchedule,
  everyTiming,
  firedSchedule,
  firingPlan,
  nextDue,
  pausedSchedule,
  replacedSchedule,
  resumedSchedule,
  ScheduleSpecSchema,
  wakeAt,
  type ScheduleState,
} from "../../machines/index.js";
import { cronTiming, isRefusal, timingOf } from "../../gateways/schedules/index.js";

const T0 = Date.parse("2026-12-06T00:00:00.000Z");
const S = 1_000;

function spec(extra: Record<string, unknown> = {}) {
  return ScheduleSpecSchema.parse({ name: "tick", definition: "flow", every: { ms: S }, ...extra });
}

function state(extra: Record<string, unknown> = {}): ScheduleState {
  return createdSchedule(spec(extra), T0);
}

describe("due times", () => {
  it("an interval is due at anchor + k·ms, k ≥ 1; next is strictly after; previous is newest first and includes the instant itself", () => {
    const t = everyTiming(T0, S);
    expect(t.next(T0)).toBe(T0 + S);
    expect(t.next(T0 - 5)).toBe(T0 + S);
    expect(t.next(T0 + 1_500)).toBe(T0 + 2 * S);
    expect(t.next(T0 + 2 * S)).toBe(T0 + 3 * S);
    expect(t.previous(T0 + 3 * S, 2)).toEqual([T0 + 3 * S, T0 + 2 * S]);
    expect(t.previous(T0 + 3 * S - 1, 10)).toEqual([T0 + 2 * S, T0 + S]);
    expect(t.previous(T0 + 500, 3)).toEqual([]);
  });

  it("a cron expression is read in its time zone, across a daylight-saving change, from a given instant", () => {
    const t = cronTiming("0 9 * * *", "Europe/Paris");
    if (isRefusal(t)) throw new Error(t.reason);
    // 29 March 2026: Paris moves from UTC+1 to UTC+2 at 02:00.
    expect(new Date(t.next(Date.parse("2026-03-28T12:00:00Z"))!).toISOString()).toBe("2026-03-29T07:00:00.000Z");
    expect(new Date(t.next(Date.parse("2026-03-27T12:00:00Z"))!).toISOString()).toBe("2026-03-28T08:00:00.000Z");
    expect(t.previous(Date.parse("2026-03-29T07:00:00Z"), 2).map((d) => new Date(d).toISOString())).toEqual([
      "2026-03-29T07:00:00.000Z",
      "2026-03-28T08:00:00.000Z",
    ]);
    const seconds = cronTiming("*/5 * * * * *", "UTC");
    if (isRefusal(seconds)) throw new Error(seconds.reason);
    expect(seconds.next(T0 + 1)).toBe(T0 + 5 * S);
  });

  it.each([
    ["61 * * * *", "UTC", "invalid_cron"],
    ["not a cron", "UTC", "invalid_cron"],
    ["0 0 30 2 *", "UTC", "invalid_cron"],
    ["0 9 * * *", "Mars/Olympus_Mons", "unknown_time_zone"],
  ])("cron %s in %s is refused %s", (expr, tz, outcome) => {
    const t = cronTiming(expr, tz);
    expect(isRefusal(t) && t.outcome).toBe(outcome);
  });

  it("a schedule has exactly one of cron and every, an interval of at least a second, and catches up at most 1,000", () => {
    expect(ScheduleSpecSchema.safeParse({ name: "x", definition: "f", every: { ms: S }, cron: { expr: "* * * * *" } }).success).toBe(false);
    expect(ScheduleSpecSchema.safeParse({ name: "x", definition: "f" }).success).toBe(false);
    expect(ScheduleSpecSchema.safeParse({ name: "x", definition: "f", every: { ms: 999 } }).success).toBe(false);
    expect(ScheduleSpecSchema.safeParse({ name: "x", definition: "f", every: { ms: S }, missed: { catch_up: 1_001 } }).success).toBe(false);
    const parsed = ScheduleSpecSchema.parse({ name: "x", definition: "f", cron: { expr: "0 9 * * *" } });
    expect(parsed).toMatchObject({ cron: { tz: "UTC" }, missed: "skip", paused: false });
  });
});

describe("which firings a look starts", () => {
  const t = everyTiming(T0, S);

  it("nothing before the first due time; on time, exactly the due one; then nothing until the next", () => {
    const s = state();
    expect(firingPlan(s, T0 + 999, t)).toEqual({ start: [], cursor: T0 });
    const plan = firingPlan(s, T0 + 1_020, t);
    expect(plan).toEqual({ start: [T0 + S], cursor: T0 + S });
    const after = firedSchedule(s, plan, [{ due: T0 + S, outcome: "started", run_id: "r1" }], T0 + 1_030);
    expect(after).toMatchObject({ cursor: T0 + S, fired: 1, last: { due: T0 + S, outcome: "started", run_id: "r1", at: T0 + 1_030 } });
    expect(firingPlan(after, T0 + 1_900, t).start).toEqual([]);
    expect(wakeAt(after, t)).toBe(T0 + 2 * S);
    expect(nextDue(after, T0 + 1_900, t)).toBe(T0 + 2 * S);
  });

  // After downtime from T0+1s to T0+10.5s: due times 2..10 s are pending; 10 s is the newest.
  const down = { ...state(), cursor: T0 + S };
  const now = T0 + 10_500;

  it("skip: only the newest due firing starts (it is on time); the 8 before it are passed over", () => {
    expect(firingPlan(down, now, t)).toEqual({ start: [T0 + 10 * S], cursor: T0 + 10 * S, skipped_through: T0 + 9 * S });
  });

  it("catch_up N: the newest firing and the N newest missed ones before it, oldest first", () => {
    const s = { ...down, spec: spec({ missed: { catch_up: 3 } }) };
    expect(firingPlan(s, now, t)).toEqual({ start: [T0 + 7 * S, T0 + 8 * S, T0 + 9 * S, T0 + 10 * S], cursor: T0 + 10 * S, skipped_through: T0 + 6 * S });
  });

  it("catch_up larger than what was missed: every pending firing starts, none is passed over", () => {
    const s = { ...down, spec: spec({ missed: { catch_up: 100 } }) };
    const plan = firingPlan(s, now, t);
    expect(plan.start).toEqual([2, 3, 4, 5, 6, 7, 8, 9, 10].map((k) => T0 + k * S));
    expect(plan.skipped_through).toBeUndefined();
  });

  it("the newest firing past the grace is missed too: skip starts nothing, catch_up N starts the N newest", () => {
    const M = 120_000;
    const slow = everyTiming(T0, M);
    const late = T0 + 2 * M + 60_001;
    expect(firingPlan(state({ every: { ms: M } }), late, slow, 60_000)).toEqual({ start: [], cursor: T0 + 2 * M, skipped_through: T0 + 2 * M });
    expect(firingPlan(state({ every: { ms: M }, missed: { catch_up: 1 } }), late, slow, 60_000)).toEqual({
      start: [T0 + 2 * M],
      cursor: T0 + 2 * M,
      skipped_through: T0 + M,
    });
    // Within the grace, the newest is on time.
    expect(firingPlan(state({ every: { ms: M } }), late - 2, slow, 60_000).start).toEqual([T0 + 2 * M]);
  });

  it("a daily cron whose node died at 09:00 and whose partition's new owner looks at 09:00:12 still starts that day's firing", () => {
    const daily = cronTiming("0 9 * * *", "UTC");
    if (isRefusal(daily)) throw new Error(daily.reason);
    const nine = Date.parse("2026-12-07T09:00:00Z");
    const s = { ...createdSchedule(spec({ every: undefined, cron: { expr: "0 9 * * *", tz: "UTC" } }), nine - 3_600_000) };
    expect(firingPlan(s, nine + 12_000, daily)).toEqual({ start: [nine], cursor: nine });
  });

  it("a due time is looked at once: after the cursor moved past it, no later look starts it again", () => {
    const plan = firingPlan(down, now, t);
    const after = firedSchedule(down, plan, [{ due: T0 + 10 * S, outcome: "started" }], now);
    expect(firingPlan(after, now, t).start).toEqual([]);
    expect(firingPlan(after, T0 + 11_000, t).start).toEqual([T0 + 11 * S]);
  });
});

describe("pause, resume and put", () => {
  const t = everyTiming(T0, S);

  it("a paused schedule starts nothing and has no next due time", () => {
    const paused = pausedSchedule({ ...state(), cursor: T0 + S }, T0 + 1_500);
    expect(paused.spec.paused).toBe(true);
    expect(firingPlan(paused, T0 + 5_000, t)).toEqual({ start: [], cursor: T0 + S });
    expect(nextDue(paused, T0 + 5_000, t)).toBeUndefined();
    expect(pausedSchedule(paused, T0 + 9_000)).toBe(paused);
  });

  it("resumed, the firings due while it was paused never start (they were paused, not missed), even with catch_up", () => {
    const s = { ...state({ missed: { catch_up: 100 } }), cursor: T0 + S };
    const resumed = resumedSchedule(pausedSchedule(s, T0 + 1_500), T0 + 5_200);
    expect(resumed.spec.paused).toBe(false);
    expect(resumed.cursor).toBe(T0 + 5_200);
    expect(firingPlan(resumed, T0 + 5_900, t).start).toEqual([]);
    expect(firingPlan(resumed, T0 + 6_000, t).start).toEqual([T0 + 6 * S]);
    expect(resumedSchedule(resumed, T0 + 7_000)).toBe(resumed);
  });

  it("a put that keeps the timing keeps the firing state; one that changes it starts afresh from now", () => {
    const s = firedSchedule({ ...state(), cursor: T0 + S }, { start: [T0 + 2 * S], cursor: T0 + 2 * S }, [{ due: T0 + 2 * S, outcome: "started" }], T0 + 2_010);
    const sameTiming = replacedSchedule(s, spec({ input: { a: 1 } }), T0 + 2_500);
    expect(sameTiming).toMatchObject({ anchor: T0, cursor: T0 + 2 * S, fired: 1, spec: { input: { a: 1 } } });
    const newTiming = replacedSchedule(s, spec({ every: { ms: 5_000 } }), T0 + 2_500);
    expect(newTiming).toMatchObject({ anchor: T0 + 2_500, cursor: T0 + 2_500, fired: 1 });
    const timing = timingOf(newTiming.spec, newTiming.anchor);
    if (isRefusal(timing)) throw new Error(timing.reason);
    expect(nextDue(newTiming, T0 + 2_600, timing)).toBe(T0 + 7_500);
  });
});
