import type { RunLifecycle } from "./apply.js";
import { TERMINAL, isRunStatus } from "./table.js";

/** A run's lifecycle plus the tree columns the tree-shape invariant reads. */
export type RunShape = RunLifecycle & { id: string; root_run_id: string; parent_run_id: string | null };

/** Stable codes, one per shape invariant of the seed's Run record. */
export type RunShapeViolation = "status" | "waiting_shape" | "waiting_ref" | "wait_deadline" | "ended_shape" | "tree_shape";

/**
 * The seed's row-shape invariants (start-key uniqueness needs a table and is not here): `status`,
 * `waiting_shape` (waiting ⇔ waiting_on), `waiting_ref` (⇒ waiting), `wait_deadline` (waiting ⇔
 * waiting_expires_at), `ended_shape` (ended_at ⇔ terminal), `tree_shape` (no parent ⇔ root is
 * self). Returns every violated code; `undefined` counts as null.
 */
export function runShapeViolations(run: RunShape): RunShapeViolation[] {
  const out: RunShapeViolation[] = [];
  const waiting = run.status === "waiting";
  if (!isRunStatus(run.status)) out.push("status");
  if (waiting !== (run.waiting_on != null)) out.push("waiting_shape");
  if (run.waiting_ref != null && !waiting) out.push("waiting_ref");
  if (waiting !== (run.waiting_expires_at != null)) out.push("wait_deadline");
  if ((run.ended_at != null) !== TERMINAL.has(run.status)) out.push("ended_shape");
  if ((run.parent_run_id == null) !== (run.root_run_id === run.id)) out.push("tree_shape");
  return out;
}
