import { setFlagsFromString } from "node:v8";
import { envSetting } from "./env-setting.js";
import { profiledSetting } from "./host-profile.js";

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
 * Smaller V8 inlining budgets: a node's hot functions are optimised on V8's helper threads soon after
 * start, and on a small host that compiling takes the cores the event loop and nats-server need.
 * Smaller budgets make each compile smaller without slowing the code where it counts. What it gains
 * and costs: docs/tuning.md.
 */
export const LEAN_INLINING_FLAGS = "--max-inlined-bytecode-size-cumulative=690 --max-inlined-bytecode-size=300";

export type V8Inlining = "lean" | "full";

/**
 * `RUNWAY_V8_INLINING`: `lean` lowers V8's inlining budgets, `full` keeps V8's own; unset, the
 * host profile says (`lean` on a small host, where compiling competes for the cores).
 */
export const V8_INLINING = profiledSetting<V8Inlining>("RUNWAY_V8_INLINING", ["lean", "full"], { "small-host": "lean", standard: "full" });

/** Set before the node starts, before any code runs hot: every compile after it is within the budgets. */
export function applyV8Inlining(inlining: V8Inlining): string {
  return applyFlags(inlining, inlining === "lean" ? LEAN_INLINING_FLAGS : undefined);
}

/**
 * V8 compiles a function to optimised code once it has run its interrupt budget of bytecode a
 * few times over (`--interrupt-budget`: 67,584 bytes in Node 20's V8); an eighth of it tiers the
 * hot path up within the first hundreds of runs. But a burst of code that ran little before is
 * compiled sooner too, while it runs (many runs woken at once, a recovery, the node's own start:
 * hence set once the node serves). A trade, so never on unless asked: `RUNWAY_V8_TIERING=sooner`.
 */
export const TIERING_FLAGS = "--interrupt-budget=8448";

export type V8Tiering = "default" | "sooner";

/** `RUNWAY_V8_TIERING`: unset or `default` keeps V8's budget, `sooner` lowers it. */
export const V8_TIERING = envSetting<V8Tiering>("RUNWAY_V8_TIERING", ["default", "sooner"]);

/** Set by `runway node` and `runway dev` once they serve (a start runs much code once). */
export function applyV8Tiering(tiering: V8Tiering): string {
  return applyFlags(tiering, tiering === "sooner" ? TIERING_FLAGS : undefined);
}
