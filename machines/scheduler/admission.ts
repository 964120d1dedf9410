import { z } from "zod";

/**
 * A proposed dynamic expansion (a map, a spawned child run, a subagent), every figure as it
 * would stand if the expansion were admitted.
 */
export const ExpansionRequestSchema = z.object({
  /** Children this expansion adds. */
  children: z.number().int().nonnegative(),
  /** Depth of the new children (the root run's steps are depth 0; a child of depth d has depth d + 1). */
  depth: z.number().int().nonnegative(),
  /** The run's step count including the new children. */
  total_steps: z.number().int().nonnegative(),
  /** The run's estimated token/tool cost including the new children. */
  estimated_cost: z.number().nonnegative(),
  /** The tenant's active descendant runs/steps including the new children. */
  tenant_active_descendants: z.number().int().nonnegative(),
});
export type ExpansionRequest = z.output<typeof ExpansionRequestSchema>;

export const ExpansionLimitsSchema = z.object({
  max_children: z.number().int().nonnegative(),
  max_depth: z.number().int().nonnegative(),
  max_total_steps: z.number().int().nonnegative(),
  max_estimated_cost: z.number().nonnegative(),
  max_active_descendants: z.number().int().nonnegative(),
});
export type ExpansionLimits = z.output<typeof ExpansionLimitsSchema>;

export const ADMISSION_CODES = ["too_many_children", "depth_exceeded", "too_many_steps", "budget_exceeded", "descendant_quota_exceeded"] as const;
export type AdmissionCode = (typeof ADMISSION_CODES)[number];
export type AdmissionResult = { ok: true } | { ok: false; code: AdmissionCode };

/**
 * Admit or refuse a dynamic expansion. A figure equal to its limit is admitted; a figure that is
 * not a number (NaN) is refused. When several limits are exceeded the first in this order is
 * reported: children, depth, total steps, estimated cost, tenant descendants.
 */
export function admitExpansion(request: ExpansionRequest, limits: ExpansionLimits): AdmissionResult {
  const within = (value: number, limit: number): boolean => value <= limit; // false for NaN
  if (!within(request.children, limits.max_children)) return { ok: false, code: "too_many_children" };
  if (!within(request.depth, limits.max_depth)) return { ok: false, code: "depth_exceeded" };
  if (!within(request.total_steps, limits.max_total_steps)) return { ok: false, code: "too_many_steps" };
  if (!within(request.estimated_cost, limits.max_estimated_cost)) return { ok: false, code: "budget_exceeded" };
  if (!within(request.tenant_active_descendants, limits.max_active_descendants)) return { ok: false, code: "descendant_quota_exceeded" };
  return { ok: true };
}

/**
 * A child's priority: what it asks for, never above its parent's (seed 000: "the parent cannot
 * recursively manufacture priority") nor below 0; a child that asks for nothing (or for NaN)
 * gets its parent's.
 */
export function childPriority(parent: number, requested?: number): number {
  if (requested === undefined || !(requested <= parent)) return parent;
  return Math.max(0, requested);
}
