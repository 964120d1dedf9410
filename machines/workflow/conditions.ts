/**
 * Branch conditions. Pure and total: an unreadable reference is `condition_unreadable` (a branch
 * never guesses a path), except for `exists`, whose whole point is to ask. Comparisons: `eq`/`ne`
 * and `in` use JSON structural equality; `gt`/`gte`/`lt`/`lte` compare two numbers or two strings
 * and are false for any other pair. Truthiness: false, null, 0, "", [] and {} are falsy.
 */
import { jsonEqual } from "./canonical.js";
import type { Condition } from "./definition.js";
import type { Scope } from "./plan.js";
import { resolveTemplate } from "./templates.js";

export type ConditionResult = { ok: true; value: boolean } | { ok: false; code: "condition_unreadable"; path: string };

/** The truthiness rule of conditions (see the module comment). */
export function truthy(v: unknown): boolean {
  if (Array.isArray(v)) return v.length > 0;
  if (typeof v === "object" && v !== null) return Object.keys(v).length > 0;
  return Boolean(v);
}

function compare(op: "gt" | "gte" | "lt" | "lte", a: unknown, b: unknown): boolean {
  const comparable = (typeof a === "number" && typeof b === "number") || (typeof a === "string" && typeof b === "string");
  if (!comparable) return false;
  const x = a as number | string;
  const y = b as number | string;
  switch (op) {
    case "gt":
      return x > y;
    case "gte":
      return x >= y;
    case "lt":
      return x < y;
    case "lte":
      return x <= y;
  }
}

/** Evaluates a condition; `all`/`any` short-circuit left to right, so a later unreadable ref is not read. */
export function evaluateCondition(cond: Condition, scope: Scope): ConditionResult {
  if ("all" in cond) {
    for (const c of cond.all) {
      const r = evaluateCondition(c, scope);
      if (!r.ok || !r.value) return r;
    }
    return { ok: true, value: true };
  }
  if ("any" in cond) {
    for (const c of cond.any) {
      const r = evaluateCondition(c, scope);
      if (!r.ok || r.value) return r;
    }
    return { ok: true, value: false };
  }
  if ("not" in cond) {
    const r = evaluateCondition(cond.not, scope);
    return r.ok ? { ok: true, value: !r.value } : r;
  }
  const read = resolveTemplate(cond.ref, scope);
  if (cond.op === "exists") return { ok: true, value: read.ok };
  if (!read.ok) return { ok: false, code: "condition_unreadable", path: read.path };
  const v = read.value;
  switch (cond.op) {
    case "truthy":
      return { ok: true, value: truthy(v) };
    case "falsy":
      return { ok: true, value: !truthy(v) };
    case "eq":
      return { ok: true, value: jsonEqual(v, cond.value) };
    case "ne":
      return { ok: true, value: !jsonEqual(v, cond.value) };
    case "in":
      return { ok: true, value: Array.isArray(cond.value) && cond.value.some((x) => jsonEqual(x, v)) };
    default:
      return { ok: true, value: compare(cond.op, v, cond.value) };
  }
}
