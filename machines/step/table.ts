/**
 * The step lifecycle's table of legal moves. Like the run table, every entry is a subset of
 * {@link STEP_NON_TERMINAL}, so no entry can name a terminal status: terminal steps absorb.
 */

export const STEP_STATUSES = ["pending", "ready", "leased", "running", "succeeded", "failed", "skipped", "cancelled"] as const;
export type StepStatus = (typeof STEP_STATUSES)[number];

export const STEP_OPS = ["ready", "lease", "start", "succeed", "fail", "skip", "cancel"] as const;
export type StepOp = (typeof STEP_OPS)[number];

type NonTerminalStepStatus = "pending" | "ready" | "leased" | "running";

export const STEP_NON_TERMINAL: ReadonlySet<StepStatus> = new Set<NonTerminalStepStatus>(["pending", "ready", "leased", "running"]);
export const STEP_TERMINAL: ReadonlySet<StepStatus> = new Set<StepStatus>(["succeeded", "failed", "skipped", "cancelled"]);

export function isStepTerminal(status: StepStatus): boolean {
  return STEP_TERMINAL.has(status);
}

export function isStepStatus(value: unknown): value is StepStatus {
  return typeof value === "string" && (STEP_STATUSES as readonly string[]).includes(value);
}

/** A subset of STEP_NON_TERMINAL; the parameter type admits only non-terminal statuses. */
function only(...statuses: NonTerminalStepStatus[]): ReadonlySet<StepStatus> {
  return new Set<StepStatus>(statuses);
}

/** The statuses each op may start from. */
export const STEP_LEGAL_FROM: Readonly<Record<StepOp, ReadonlySet<StepStatus>>> = Object.freeze({
  ready: only("pending"),
  lease: only("ready"),
  start: only("leased"),
  succeed: only("leased", "running"),
  fail: only("leased", "running"),
  skip: only("pending", "ready"),
  cancel: STEP_NON_TERMINAL,
});

/**
 * The statuses each op can write. `fail` has two: back to `ready` (a retry) or `failed` (no
 * retry left, or the error is not retryable); every other op has one.
 */
export const STEP_OP_TARGETS: Readonly<Record<StepOp, readonly StepStatus[]>> = Object.freeze({
  ready: ["ready"],
  lease: ["leased"],
  start: ["running"],
  succeed: ["succeeded"],
  fail: ["ready", "failed"],
  skip: ["skipped"],
  cancel: ["cancelled"],
});

/** Ops that carry the lease fence (attempt + lease_epoch) and are refused `stale_lease` without it. */
export const FENCED_STEP_OPS: ReadonlySet<StepOp> = new Set<StepOp>(["start", "succeed", "fail"]);
