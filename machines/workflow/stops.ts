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
  /** The run's trace context was missing where a span was required. */
  "no_parent_span",
  /** A pinned definition or snapshot could not be assembled or parsed by this deployment. */
  "snapshot_unbuildable",
  "invalid_snapshot",
  /** A gate (day cap, policy, meter) could not decide: the rule set or the meter did not answer. */
  "policy_unavailable",
  "metering_unavailable",
  /** A rule asked for a person and the approval could not be stored. */
  "approval_unwritable",
  /** A frozen tool contract this deployment cannot serve. */
  "invalid_tool_contract",
  /** The run's state would exceed what the store accepts. */
  "state_too_large",
] as const;

export type PlatformStopCode = (typeof PLATFORM_STOP_CODES)[number];

const STOPS: ReadonlySet<string> = new Set(PLATFORM_STOP_CODES);

/** True when a failure with this code may never be tolerated. */
export function isPlatformStop(code: string | undefined): code is PlatformStopCode {
  return code !== undefined && STOPS.has(code);
}

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
