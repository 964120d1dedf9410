import { readdirSync } from "node:fs";
import { getPriority, setPriority } from "node:os";
import { profiledSetting } from "./host-profile.js";

/**
 * V8's compiler and GC helper threads do work that can wait, which on a small host takes cores from
 * the event loop (the serial part of every step); ten steps of `nice` lower, they run when a core is
 * free. The price: a collection the event loop waits on waits longer. docs/tuning.md
 * (`RUNWAY_HELPER_THREADS`).
 */
export const HELPER_NICE_STEP = 10;

export type HelperThreads = "low" | "normal";

/**
 * `RUNWAY_HELPER_THREADS`: `low` lowers the helpers, `normal` leaves them; unset, the host
 * profile says (`low` on a small host, where they take the event loop's cores).
 */
export const HELPER_THREADS = profiledSetting<HelperThreads>("RUNWAY_HELPER_THREADS", ["low", "normal"], { "small-host": "low", standard: "normal" });

/** What applying did: the setting, and how many threads it lowered to which `nice`. */
export interface HelperThreadsApplied {
  setting: HelperThreads;
  lowered: number;
  nice?: number;
}

/**
 * Lowers every thread this process has now but the main one to {@link HELPER_NICE_STEP} below
 * the main thread (at most 19). Called before the node starts its step pool: the pool's threads,
 * made later by the main thread, keep its priority. Linux only (`/proc/self/task`); elsewhere,
 * or when a thread may not be lowered, it lowers fewer and says how many.
 */
export function applyHelperThreads(setting: HelperThreads): HelperThreadsApplied {
  if (setting === "normal") return { setting, lowered: 0 };
  let tids: number[];
  try {
    tids = readdirSync("/proc/self/task").map(Number);
  } catch {
    return { setting, lowered: 0 };
  }
  const nice = Math.min(19, getPriority(process.pid) + HELPER_NICE_STEP);
  let lowered = 0;
  for (const tid of tids) {
    if (tid === process.pid) continue;
    try {
      setPriority(tid, nice);
      lowered++;
    } catch {
      // A thread that ended meanwhile, or one set lower than this already (raising it takes a privilege).
    }
  }
  return { setting, lowered, nice };
}

/** How a log line or a benchmark says it: `normal`, or `low (<n> threads at nice <nice>)`. */
export function describeHelpers(applied: HelperThreadsApplied): string {
  return applied.setting === "normal" ? "normal" : `low (${applied.lowered} threads at nice ${applied.nice ?? "-"})`;
}
