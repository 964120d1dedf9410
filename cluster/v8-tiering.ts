import { setFlagsFromString } from "node:v8";

/**
 * V8 compiles a function to optimised code once it has run its interrupt budget of bytecode a
 * few times over (`--interrupt-budget`: 67,584 bytes in Node 20's V8). A node's hot path is some
 * 150 functions of XState, msgpackr, nats.js, Piscina and our own, and a step runs each a few
 * times: at V8's default many still run unoptimised hundreds of runs after a start, while V8's
 * compiler threads take as much CPU as the main thread. An eighth of the budget tiers them up
 * sooner. w1 on this 2-core machine (six alternated rounds each, 2026-12-04): steps/s 2,205–2,467
 * → 2,454–2,638, warm 3,242–3,673 → 3,825–4,103, one run of 10 one in flight p50 8.40–9.37 →
 * 7.48–8.03 ms, main thread 310–345 → 270–295 µs a step. Lower budgets measured no better.
 * The price: a burst of code that ran little before is compiled sooner too, while it runs
 * (w4's 1,000 runs woken at once: 940–999 against 788–855 ms; w5's recovery after a SIGKILL,
 * restart to all done: 1,684–1,879 against 1,478–1,750 ms), and so is a node's own start (to
 * READY 681–834 against 451–485 ms), which is why a node sets it only once it serves.
 */
export const TIERING_FLAGS = "--interrupt-budget=8448";

/**
 * Sets {@link TIERING_FLAGS} for this process, its worker threads included (V8's flags are the
 * process's): `runway node` and `runway dev` once they serve, the benchmarks before they start.
 * `RUNWAY_V8_TIERING=default` keeps V8's own. Returns whether it set them.
 */
export function tierUpSooner(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.RUNWAY_V8_TIERING === "default") return false;
  setFlagsFromString(TIERING_FLAGS);
  return true;
}
