import type { StepError, StepOpEvent } from "./events.js";
import { retryDelay } from "./retry.js";
import { FENCED_STEP_OPS, STEP_LEGAL_FROM, STEP_TERMINAL, isStepStatus, type StepOp, type StepStatus } from "./table.js";

/** One step of a run and its current attempt. */
export interface StepState {
  status: StepStatus;
  /** The current attempt, 1-based; 0 before the first lease. */
  attempt: number;
  /** Minted by every lease; never decreases. Only the holder of the current epoch may start, succeed or fail. */
  lease_epoch: number;
  /** A ready step may not be leased before this (a retry's backoff); null otherwise. */
  not_before: number | null;
  /** The last attempt's failure, kept after a later attempt succeeds. */
  last_error: StepError | null;
  /** Set once, by the first lease. */
  started_at: number | null;
  /** Non-null exactly when the status is terminal. */
  ended_at: number | null;
}

export function pendingStep(): StepState {
  return { status: "pending", attempt: 0, lease_epoch: 0, not_before: null, last_error: null, started_at: null, ended_at: null };
}

export type StepOpResult =
  | { outcome: "moved"; state: StepState; /** true when a failure sent the step back to ready */ retried?: boolean }
  | { outcome: "refused"; code: "illegal_transition"; from: StepStatus; op: StepOp }
  | { outcome: "refused"; code: "stale_lease"; from: StepStatus; op: StepOp; current: { attempt: number; lease_epoch: number } }
  | { outcome: "refused"; code: "not_before"; from: StepStatus; op: StepOp; not_before: number };

/**
 * The step transition primitive, pure and total. Checks in order: the table
 * (`illegal_transition`), the lease fence for start / succeed / fail (`stale_lease`: a zombie is
 * refused even where the status allows the op), the backoff for lease (`not_before`). A lease mints
 * attempt+1 and lease_epoch+1; a retryable failure under `max_attempts` goes back to `ready` after
 * `retryDelay`, any other to `failed`.
 */
export function applyStepOp(state: StepState, event: StepOpEvent): StepOpResult {
  const from = state.status;
  const op = event.op;
  const legal = Object.prototype.hasOwnProperty.call(STEP_LEGAL_FROM, op) ? STEP_LEGAL_FROM[op] : undefined;
  if (!legal || !legal.has(from)) return { outcome: "refused", code: "illegal_transition", from, op };
  if (FENCED_STEP_OPS.has(op) && "attempt" in event && (event.attempt !== state.attempt || event.lease_epoch !== state.lease_epoch)) {
    return { outcome: "refused", code: "stale_lease", from, op, current: { attempt: state.attempt, lease_epoch: state.lease_epoch } };
  }
  const now = event.now;
  switch (event.op) {
    case "ready":
      return { outcome: "moved", state: { ...state, status: "ready", not_before: null } };
    case "lease":
      if (state.not_before !== null && now < state.not_before) return { outcome: "refused", code: "not_before", from, op, not_before: state.not_before };
      return {
        outcome: "moved",
        state: {
          ...state,
          status: "leased",
          attempt: state.attempt + 1,
          lease_epoch: state.lease_epoch + 1,
          not_before: null,
          started_at: state.started_at ?? now,
        },
      };
    case "start":
      return { outcome: "moved", state: { ...state, status: "running" } };
    case "succeed":
      return { outcome: "moved", state: terminal(state, "succeeded", now) };
    case "fail": {
      if (event.error.retryable && state.attempt < event.policy.max_attempts) {
        const not_before = now + retryDelay(event.policy, state.attempt);
        return { outcome: "moved", state: { ...state, status: "ready", not_before, last_error: event.error }, retried: true };
      }
      return { outcome: "moved", state: { ...terminal(state, "failed", now), last_error: event.error }, retried: false };
    }
    case "skip":
      return { outcome: "moved", state: terminal(state, "skipped", now) };
    case "cancel":
      return { outcome: "moved", state: terminal(state, "cancelled", now) };
    default:
      return { outcome: "refused", code: "illegal_transition", from, op };
  }
}

function terminal(state: StepState, status: StepStatus, now: number): StepState {
  return { ...state, status, not_before: null, ended_at: now };
}

/** Stable codes for a malformed step state. */
export type StepShapeViolation = "status" | "ended_shape" | "not_before_shape" | "attempt_shape";

/**
 * Shape invariants every state {@link applyStepOp} produces keeps: `ended_shape` (ended_at ≠ null
 * ⇔ terminal), `status` (one of the eight), `not_before_shape` (not_before ≠ null ⇒ ready), `attempt_shape`
 * (0 ≤ attempt ≤ lease_epoch, and attempt = 0 ⇔ never leased, so pending ⇒ attempt 0).
 */
export function stepShapeViolations(state: StepState): StepShapeViolation[] {
  const out: StepShapeViolation[] = [];
  if (!isStepStatus(state.status)) out.push("status");
  if ((state.ended_at != null) !== STEP_TERMINAL.has(state.status)) out.push("ended_shape");
  if (state.not_before != null && state.status !== "ready") out.push("not_before_shape");
  if (state.attempt < 0 || state.attempt > state.lease_epoch || (state.status === "pending" && state.attempt !== 0)) out.push("attempt_shape");
  return out;
}
