/**
 * The run lifecycle's one table of legal moves (seed 004, "One transition primitive").
 *
 * Every entry is written as a subtraction from (or a subset of) {@link NON_TERMINAL}, so no entry
 * can name a terminal status: "a terminal Run stays terminal" is structural, not a cell someone
 * filled in by hand. Every other (status × op) cell is a dash: a refusal that changes nothing.
 */

export const RUN_STATUSES = ["queued", "running", "waiting", "succeeded", "failed", "cancelled"] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

export const RUN_OPS = ["admit", "claim", "mark_waiting", "advance", "resume", "succeed", "fail", "cancel"] as const;
export type RunOp = (typeof RUN_OPS)[number];

export const WAITING_ON = ["approval", "event", "delay"] as const;
export type WaitingOn = (typeof WAITING_ON)[number];

type NonTerminalRunStatus = "queued" | "running" | "waiting";

export const NON_TERMINAL: ReadonlySet<RunStatus> = new Set<NonTerminalRunStatus>(["queued", "running", "waiting"]);
export const TERMINAL: ReadonlySet<RunStatus> = new Set<RunStatus>(["succeeded", "failed", "cancelled"]);

/** A terminal run never moves again (docs/ARCHITECTURE.md §4.5). */
export function isTerminal(status: RunStatus): boolean {
  return TERMINAL.has(status);
}

export function isRunStatus(value: unknown): value is RunStatus {
  return typeof value === "string" && (RUN_STATUSES as readonly string[]).includes(value);
}

/** NON_TERMINAL minus the named statuses; the parameter type admits only non-terminal ones. */
function nonTerminalExcept(...excluded: NonTerminalRunStatus[]): ReadonlySet<RunStatus> {
  return new Set([...NON_TERMINAL].filter((s) => !(excluded as RunStatus[]).includes(s)));
}

/** A subset of NON_TERMINAL; the parameter type admits only non-terminal statuses. */
function only(...statuses: NonTerminalRunStatus[]): ReadonlySet<RunStatus> {
  return new Set<RunStatus>(statuses);
}

/** The statuses each op may start from, exactly as the seed writes them. */
export const LEGAL_FROM: Readonly<Record<RunOp, ReadonlySet<RunStatus>>> = Object.freeze({
  admit: only("waiting"),
  claim: NON_TERMINAL,
  mark_waiting: NON_TERMINAL,
  advance: nonTerminalExcept("queued"),
  resume: only("waiting"),
  succeed: nonTerminalExcept("queued"),
  fail: NON_TERMINAL,
  cancel: NON_TERMINAL,
});

/**
 * The status each op writes; `null` means the write names no target status (advance), so it
 * touches neither the status nor the waiting three.
 */
export const RUN_OP_TARGET: Readonly<Record<RunOp, RunStatus | null>> = Object.freeze({
  admit: "queued",
  claim: "running",
  mark_waiting: "waiting",
  advance: null,
  resume: "running",
  succeed: "succeeded",
  fail: "failed",
  cancel: "cancelled",
});
