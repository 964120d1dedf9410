/**
 * Platform stops: the runtime could not read or could not measure (seed 004, "A platform stop is
 * never tolerated"). A node failing with one ends its run at once, whatever `continue_on_error` or
 * `when` says, and a child's carries to its parent. The rule rides on the code, not on a flag, so
 * it survives every boundary a code crosses; handlers cannot produce these codes.
 */
export const PLATFORM_STOP_CODES = [
  /** A `${…}` reference in a node's input or a map's items could not be read. */
  "reference_unreadable",
  /** A branch condition could not be read. */
  "condition_unreadable",
  /** A child's pinned definition could not be read or parsed by this deployment: the child ends under it at its create. */
  "snapshot_unbuildable",
  /** How `snapshot_unbuildable` reads at the parent's node, and at every run above it. */
  "invalid_snapshot",
  /** A child's start gate could not decide: its tenant's record (kill switch, settings) did not decode. */
  "policy_unavailable",
  /** The usage meter did not answer a priced tool call (after the attempt's retries). */
  "metering_unavailable",
] as const;

export type PlatformStopCode = (typeof PLATFORM_STOP_CODES)[number];

const STOPS: ReadonlySet<string> = new Set(PLATFORM_STOP_CODES);

/** True when a failure with this code may never be tolerated. */
export function isPlatformStop(code: string | undefined): code is PlatformStopCode {
  return code !== undefined && STOPS.has(code);
}

/**
 * The refusals a child's start gate answers with (seed 004, "Child Run rules"): each ends the
 * child `failed` at its create, under that code, before any of it runs. Two are platform stops
 * (the gate could not read what it decides on); the rest are a rule the author can read.
 */
export const CHILD_START_CODES = [
  /** The child's pinned definition could not be read or parsed by this deployment. */
  "snapshot_unbuildable",
  /** The gate could not decide: the tenant's record (its kill switch and settings) did not read. */
  "policy_unavailable",
  /** The tenant's kill switch is on: no new run of it starts, a child neither. */
  "tenant_killed",
] as const;

export type ChildStartCode = (typeof CHILD_START_CODES)[number];

/**
 * How a child's own failure code reads at the node of its parent that started it (seed 004:
 * "snapshot_unbuildable answers invalid_snapshot, and policy_unavailable answers itself";
 * every other refused start answers `start_refused`). A code not listed here is the child's
 * own: a platform stop crosses as itself, any other failure as `child_failed`.
 */
export const CHILD_CODE_AT_PARENT: Readonly<Record<ChildStartCode, string>> = {
  snapshot_unbuildable: "invalid_snapshot",
  policy_unavailable: "policy_unavailable",
  tenant_killed: "start_refused",
};

/**
 * The code a parent's node fails with when its child failed under `code`: mapped by
 * {@link CHILD_CODE_AT_PARENT}, else the platform stop itself, else `child_failed`. The child's
 * own code travels beside it, as the node error's `error_code`.
 */
export function childCodeAtParent(code: string | undefined): string {
  const mapped = code === undefined ? undefined : AT_PARENT.get(code);
  if (mapped !== undefined) return mapped;
  return isPlatformStop(code) ? code : "child_failed";
}

const AT_PARENT: ReadonlyMap<string, string> = new Map(Object.entries(CHILD_CODE_AT_PARENT));

/**
 * A wide node's stop (seed 004, "An approval is not one failed item"): a map item's call that a
 * person must approve first cannot wait inside the map, so the first one observed cancels the
 * batch and fails the map with this code, which its run does not tolerate. It is policy's answer,
 * not a platform stop: it does not cross a run boundary (a parent reads the child's failure as
 * `child_failed`), and elsewhere a call that needs approval stays the author's to tolerate.
 */
export const WIDE_APPROVAL_STOP = "read_tool_needs_approval";

/** True when a node failing with this code stops its run at once: a platform stop, or a wide node's approval stop. */
export function stopsRun(code: string | undefined): boolean {
  return isPlatformStop(code) || code === WIDE_APPROVAL_STOP;
}

/**
 * Ceiling reasons (seed 004, "Result and error": the one status rule): a run stopped on one keeps
 * the work it did: after work it succeeds with the reason as its `partial_reason`; before any it
 * fails with the reason as its code and in its error's `partial_reason`. Only the runtime writes
 * the mark, in a field; no reader derives it from a code (a handler or a tool may answer the same
 * words as a code, and that is a plain failure).
 */
export const CEILING_REASONS = ["budget_exhausted", "limit_reached", "approval_expired", "approval_not_actionable"] as const;

export type CeilingReason = (typeof CEILING_REASONS)[number];

const CEILINGS: ReadonlySet<string> = new Set(CEILING_REASONS);

/** True when a field holds a ceiling mark. */
export function isCeilingReason(reason: unknown): reason is CeilingReason {
  return typeof reason === "string" && CEILINGS.has(reason);
}
