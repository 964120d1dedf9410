import { Cron } from "croner";
import { everyTiming, type ScheduleSpec, type Timing } from "../../machines/index.js";

/** A cron expression or time zone a schedule cannot use: the API's typed answers. */
export type TimingRefusal = { outcome: "invalid_cron"; reason: string } | { outcome: "unknown_time_zone"; reason: string };

function knownTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

/**
 * A cron expression in a time zone as a Timing: croner's next and previous runs from a given
 * instant (never from the wall clock), so the pure plan in machines/schedules takes time as input.
 */
export function cronTiming(expr: string, tz: string): Timing | TimingRefusal {
  if (!knownTimeZone(tz)) return { outcome: "unknown_time_zone", reason: `${tz} is not an IANA time zone this node knows` };
  let cron: Cron;
  try {
    // No callback: croner schedules nothing, it only computes.
    cron = new Cron(expr, { timezone: tz, mode: "5-or-6-parts" });
  } catch (err) {
    return { outcome: "invalid_cron", reason: err instanceof Error ? err.message : String(err) };
  }
  const timing: Timing = {
    next: (after) => cron.nextRun(new Date(after))?.getTime(),
    // croner counts a run in the reference's own second as before it: one ms on, `now` itself is included.
    previous: (atOrBefore, n) => cron.previousRuns(n, new Date(atOrBefore + 1)).map((d) => d.getTime()),
  };
  if (timing.next(Date.UTC(2000, 0, 1)) === undefined && timing.next(Date.UTC(2100, 0, 1)) === undefined)
    return { outcome: "invalid_cron", reason: `${expr} never fires` };
  return timing;
}

/** The Timing of a stored schedule (its spec was checked when it was put). */
export function timingOf(spec: ScheduleSpec, anchor: number): Timing | TimingRefusal {
  if (spec.every) return everyTiming(anchor, spec.every.ms);
  return cronTiming(spec.cron!.expr, spec.cron!.tz);
}

export function isRefusal(t: Timing | TimingRefusal): t is TimingRefusal {
  return "outcome" in t;
}
