import { readdirSync } from "node:fs";
import { getPriority, setPriority } from "node:os";
import { profiledSetting } from "./host-profile.js";

/**
 * A node's main thread (its event loop) is the serial part of every step, and its pool's threads
 * run the handlers. The process's other threads are V8's compiler and garbage-collector helpers
 * (and libuv's): work that can wait a little, which on a small host takes the cores from the event
 * loop. Ten steps of `nice` lower, they work when a core is free. The price is paid where the
 * pool's own threads keep the cores busy: a collection the event loop waits on waits longer for
 * its helpers. docs/tuning.md (`RUNWAY_HELPER_THREADS`).
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
