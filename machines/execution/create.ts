import { isTerminal, queuedLifecycle, runShapeViolations, type RunStatus } from "../run/index.js";
import type { RunSeed } from "./types.js";
import type { ParentView } from "./requests.js";

export type CreateRefusal =
  | { outcome: "invalid_input"; reason: string }
  /** The parent was cancelled before this child existed (C026, C031, C100). */
  | { outcome: "parent_cancelled" }
  /** The parent ended, does not exist, or no longer waits on this child. */
  | { outcome: "parent_gone"; parent_status: RunStatus | "missing" | "not_waiting" };

/**
 * Whether a run may be created from this seed, judged before it exists (so a refusal writes
 * nothing). The tree shape holds on every create (C028): a root is its own root at depth 0; a
 * child has its parent's tenant and root, one level below it, and a parent that still waits on
 * it (C009: the parent is read once, at create). `parent` is `undefined` only for a root.
 */
export function createRefusal(seed: RunSeed, parent: ParentView | null | undefined): CreateRefusal | null {
  const shape = runShapeViolations({ ...queuedLifecycle(), id: seed.id, root_run_id: seed.root_run_id, parent_run_id: seed.parent_run_id });
  if (shape.length > 0)
    return { outcome: "invalid_input", reason: `tree shape: a run whose parent is ${seed.parent_run_id ?? "none"} cannot have root ${seed.root_run_id}` };
  if (seed.parent_run_id === null) {
    if (seed.parent_node !== null || seed.depth !== 0) return { outcome: "invalid_input", reason: "tree shape: a root run has no parent node and depth 0" };
    return null;
  }
  if (seed.parent_node === null) return { outcome: "invalid_input", reason: "tree shape: a child names the parent node that starts it" };
  if (parent === undefined) return { outcome: "invalid_input", reason: `parent ${seed.parent_run_id} was not read` };
  if (parent === null) return { outcome: "parent_gone", parent_status: "missing" };
  if (parent.tenant !== seed.tenant) return { outcome: "invalid_input", reason: `tree shape: a child's tenant is its parent's (${parent.tenant})` };
  if (parent.root_run_id !== seed.root_run_id)
    return { outcome: "invalid_input", reason: `tree shape: a child's root is its parent's root (${parent.root_run_id})` };
  if (seed.depth !== parent.depth + 1)
    return { outcome: "invalid_input", reason: `tree shape: a child is one level below its parent (depth ${parent.depth + 1})` };
  if (parent.status === "cancelled") return { outcome: "parent_cancelled" };
  if (isTerminal(parent.status)) return { outcome: "parent_gone", parent_status: parent.status };
  if (!parent.waits) return { outcome: "parent_gone", parent_status: "not_waiting" };
  return null;
}
