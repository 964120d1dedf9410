import { setFlagsFromString } from "node:v8";
import { envSetting } from "./env-setting.js";

/**
 * The V8 flags a node's process may set, each behind a setting of its own. V8's flags are the
 * process's, its worker threads included: `runway node` and `runway dev` apply them, and the
 * benchmarks before they start. Each apply returns the flags it set, or the word that set none.
 */
function applyFlags(word: string, flags: string | undefined): string {
  if (flags === undefined) return word;
  setFlagsFromString(flags);
  return flags;
}

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

/** Set before the node starts, before any code runs hot: every compile after it is within the budgets. */
export function applyV8Inlining(inlining: V8Inlining): string {
  return applyFlags(inlining, inlining === "lean" ? LEAN_INLINING_FLAGS : undefined);
}

/**
 * V8 compiles a function to optimised code once it has run its interrupt budget of bytecode a
 * few times over (`--interrupt-budget`: 67,584 bytes in Node 20's V8). A node's hot path is some
 * 150 functions of XState, msgpackr, nats.js, Piscina and our own: at V8's default many still run
 * unoptimised hundreds of runs after a start. An eighth of the budget tiers them up sooner. w1 on
 * this 2-core machine (six alternated rounds each, 2026-12-04): steps/s 2,205–2,467 → 2,454–2,638,
 * warm 3,242–3,673 → 3,825–4,103, one run of 10 one in flight p50 8.40–9.37 → 7.48–8.03 ms, main
 * thread 310–345 → 270–295 µs a step. But a burst of code that ran little before is compiled
 * sooner too, while it runs: w4's 1,000 runs woken at once took 940–1,026 against 788–857 ms (over
 * its 1 s target in a busy hour), w5's recovery after a SIGKILL 1,684–1,879 against 1,478–1,750
 * ms, and a node's own start to READY 681–834 against 451–485 ms (so it is set once the node
 * serves). A trade, so not the default: `RUNWAY_V8_TIERING=sooner` asks for it.
 */
export const TIERING_FLAGS = "--interrupt-budget=8448";

export type V8Tiering = "default" | "sooner";

/** `RUNWAY_V8_TIERING`: unset or `default` keeps V8's budget, `sooner` lowers it. */
export const V8_TIERING = envSetting<V8Tiering>("RUNWAY_V8_TIERING", ["default", "sooner"]);

/** Set by `runway node` and `runway dev` once they serve (a start runs much code once). */
export function applyV8Tiering(tiering: V8Tiering): string {
  return applyFlags(tiering, tiering === "sooner" ? TIERING_FLAGS : undefined);
}
