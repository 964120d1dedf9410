import { setFlagsFromString } from "node:v8";
import { envSetting } from "./env-setting.js";

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

/**
 * Applies a tiering to this process, its worker threads included (V8's flags are the process's):
 * `runway node` and `runway dev` once they serve, the benchmarks before they start. Returns the
 * flags it set, or `default`.
 */
export function applyV8Tiering(tiering: V8Tiering): string {
  if (tiering === "default") return "default";
  setFlagsFromString(TIERING_FLAGS);
  return TIERING_FLAGS;
}
