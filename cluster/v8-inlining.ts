import { setFlagsFromString } from "node:v8";
import { envSetting } from "./env-setting.js";

/**
 * V8's optimising compiler inlines a callee of up to `--max-inlined-bytecode-size` bytes of
 * bytecode (460 in Node 20's V8) into a hot function, until they add up to
 * `--max-inlined-bytecode-size-cumulative` (920). A node's hot path is some 200 functions of
 * XState, msgpackr, nats.js, Piscina and our own, optimised on V8's helper threads over the first
 * thousand runs after a start, on the cores the event loop and nats-server need: in w1's first
 * window that compiling took ~160 µs of CPU a step against the main thread's ~265. Smaller
 * budgets make each compile smaller, and the code no slower where it counts. On this 2-core VM
 * (alternated fresh processes, 2026-12-05, medians): the cumulative budget at 690, w1's first
 * window 3,192 → 3,291 steps/s (8 each; 3,154 → 3,317 of 5), the process's CPU a step 443 → 421
 * µs, one run of 10 one in flight 7.3 → 7.2 ms, `w2` 30.2 → 31.0 ms (4 each); a callee's at 300
 * besides, 3,181 → 3,253 and 3,271 → 3,365 steps/s (6 each, twice), 421 → 406 µs, `w2` the same.
 * Half the cumulative budget (460) did as well for w1 but cost `w2` 8 % and one in flight 6 %.
 */
export const LEAN_INLINING_FLAGS = "--max-inlined-bytecode-size-cumulative=690 --max-inlined-bytecode-size=300";

export type V8Inlining = "lean" | "full";

/** `RUNWAY_V8_INLINING`: unset or `lean` lowers V8's inlining budgets, `full` keeps V8's own. */
export const V8_INLINING = envSetting<V8Inlining>("RUNWAY_V8_INLINING", ["lean", "full"]);

/**
 * Applies an inlining budget to this process, its worker threads included (V8's flags are the
 * process's): `runway node` and `runway dev` before their node starts, the benchmarks before they
 * start. Returns the flags it set, or `full`.
 */
export function applyV8Inlining(inlining: V8Inlining): string {
  if (inlining === "full") return "full";
  setFlagsFromString(LEAN_INLINING_FLAGS);
  return LEAN_INLINING_FLAGS;
}
