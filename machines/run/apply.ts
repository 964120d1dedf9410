import type { RunOpEvent } from "./events.js";
import { LEGAL_FROM, RUN_OP_TARGET, TERMINAL, type RunOp, type RunStatus, type WaitingOn } from "./table.js";

/** The lifecycle columns of a run: what the transition primitive reads and writes. */
export interface RunLifecycle {
  status: RunStatus;
  /** Non-null exactly while waiting. */
  waiting_on: WaitingOn | null;
  /** The approval or wait node waited on; null unless waiting (and may be null while waiting). */
  waiting_ref: string | null;
  /** When the wait dies; non-null exactly while waiting. */
  waiting_expires_at: number | null;
  /** Set once, by the first write into `running`; never reset by a re-claim. */
  started_at: number | null;
  /** Non-null exactly when the status is terminal. */
  ended_at: number | null;
}

export function queuedLifecycle(): RunLifecycle {
  return { status: "queued", waiting_on: null, waiting_ref: null, waiting_expires_at: null, started_at: null, ended_at: null };
}

export type RunOpResult = { outcome: "moved"; state: RunLifecycle } | { outcome: "refused"; code: "illegal_transition"; from: RunStatus; op: RunOp };

/**
 * The one transition primitive: the conditional write `… WHERE status IN LEGAL_FROM[op]`. Pure and
 * total: a refusal returns the state untouched. The waiting fields are set by `mark_waiting` and
 * cleared by any write naming another status; `started_at` is set once (a re-claim keeps the wall
 * clock), `ended_at` on entering a terminal status.
 */
export function applyRunOp(state: RunLifecycle, event: RunOpEvent): RunOpResult {
  const legal = Object.prototype.hasOwnProperty.call(LEGAL_FROM, event.op) ? LEGAL_FROM[event.op] : undefined;
  if (!legal || !legal.has(state.status)) return { outcome: "refused", code: "illegal_transition", from: state.status, op: event.op };
  const target = RUN_OP_TARGET[event.op];
  if (target === null) return { outcome: "moved", state };
  if (event.op === "mark_waiting") {
    return {
      outcome: "moved",
      state: { ...state, status: "waiting", waiting_on: event.on, waiting_ref: event.ref, waiting_expires_at: event.expires_at, ended_at: null },
    };
  }
  return {
    outcome: "moved",
    state: {
      status: target,
      waiting_on: null,
      waiting_ref: null,
      waiting_expires_at: null,
      started_at: target === "running" && state.started_at === null ? event.now : state.started_at,
      ended_at: TERMINAL.has(target) ? event.now : null,
    },
  };
}
