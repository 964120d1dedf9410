/**
 * Template references: `"${expr}"` (replaced by the value, any JSON type) and `"text ${expr}"`
 * (interpolated), where expr is `input…`, `steps.<id>.output…`, `steps.<id>.status`, `item…` or
 * `index`. Resolution is total: a missing path is `reference_unreadable`, never `undefined`, so a
 * node never runs on a value nothing produced.
 */
import { canonicalJson } from "./canonical.js";
import type { Scope } from "./plan.js";

export type Segment = string | number;
export type Ref =
  | { root: "input"; path: Segment[] }
  | { root: "steps"; node: string; field: "output"; path: Segment[] }
  | { root: "steps"; node: string; field: "status" }
  | { root: "item"; path: Segment[] }
  | { root: "index" };

export type Resolved = { ok: true; value: unknown } | { ok: false; code: "reference_unreadable"; path: string };

const PLACEHOLDER = /\$\{([^}]*)\}/g;
const EXACT = /^\$\{([^}]*)\}$/;
const IDENT = /^[A-Za-z_][A-Za-z0-9_-]*$/;
const INDEX = /^(0|[1-9][0-9]{0,8})$/;
const STEP_ID = /^[a-zA-Z][a-zA-Z0-9_-]{0,62}$/;

function parseSegments(parts: readonly string[]): Segment[] | undefined {
  const out: Segment[] = [];
  for (const p of parts) {
    if (INDEX.test(p)) out.push(Number(p));
    else if (IDENT.test(p)) out.push(p);
    else return undefined;
  }
  return out;
}

/** Parses the text between `${` and `}`; `undefined` when it is not a valid expression. */
export function parseRef(expr: string): Ref | undefined {
  const parts = expr.trim().split(".");
  const [head, ...rest] = parts;
  if (head === "input" || head === "item") {
    const path = parseSegments(rest);
    return path && { root: head, path };
  }
  if (head === "index") return rest.length === 0 ? { root: "index" } : undefined;
  if (head === "steps") {
    const [node, field, ...tail] = rest;
    if (node === undefined || !STEP_ID.test(node)) return undefined;
    if (field === "status") return tail.length === 0 ? { root: "steps", node, field } : undefined;
    if (field !== "output") return undefined;
    const path = parseSegments(tail);
    return path && { root: "steps", node, field, path };
  }
  return undefined;
}

/** One `${…}` occurrence found in a template, with where it sits (`at`: path into the template). */
export type RefSite = { at: Segment[]; expr: string; ref: Ref | undefined };

/** Every reference in a template, in document order (object keys in their given order). */
export function templateRefs(template: unknown, at: Segment[] = []): RefSite[] {
  if (typeof template === "string") {
    return [...template.matchAll(PLACEHOLDER)].map((m) => ({ at, expr: (m[1] ?? "").trim(), ref: parseRef(m[1] ?? "") }));
  }
  if (Array.isArray(template)) return template.flatMap((v, i) => templateRefs(v, [...at, i]));
  if (typeof template === "object" && template !== null) return Object.entries(template).flatMap(([k, v]) => templateRefs(v, [...at, k]));
  return [];
}

function descend(value: unknown, path: readonly Segment[]): { found: boolean; value: unknown } {
  let cur = value;
  for (const seg of path) {
    if (typeof seg === "number") {
      if (!Array.isArray(cur) || seg >= cur.length) return { found: false, value: undefined };
      cur = cur[seg];
    } else {
      if (typeof cur !== "object" || cur === null || Array.isArray(cur) || !Object.hasOwn(cur, seg)) return { found: false, value: undefined };
      cur = (cur as Record<string, unknown>)[seg];
    }
    if (cur === undefined) return { found: false, value: undefined };
  }
  return { found: cur !== undefined, value: cur };
}

/** Reads one reference in a scope. A step absent from `scope.steps` is unreadable. */
export function readRef(ref: Ref, scope: Scope): { found: boolean; value: unknown } {
  switch (ref.root) {
    case "input":
      return descend(scope.input, ref.path);
    case "item":
      return "item" in scope ? descend(scope.item, ref.path) : { found: false, value: undefined };
    case "index":
      return typeof scope.index === "number" ? { found: true, value: scope.index } : { found: false, value: undefined };
    case "steps": {
      const step = Object.hasOwn(scope.steps, ref.node) ? scope.steps[ref.node] : undefined;
      if (step === undefined) return { found: false, value: undefined };
      if (ref.field === "status") return { found: true, value: step.status };
      return descend(step.output, ref.path);
    }
  }
}

/** Resolves one expression text (without `${}`); an invalid expression is unreadable too. */
export function resolveExpr(expr: string, scope: Scope): Resolved {
  const ref = parseRef(expr);
  const read = ref ? readRef(ref, scope) : { found: false, value: undefined };
  return read.found ? { ok: true, value: read.value } : { ok: false, code: "reference_unreadable", path: expr.trim() };
}

function stringify(value: unknown): string {
  return typeof value === "string" ? value : canonicalJson(value);
}

/**
 * Resolves a template against a scope. Object keys are kept as written; only string values are
 * substituted. Interpolation writes strings as-is and any other value as canonical JSON
 * (`null`, `42`, `{"a":1}`). The first unreadable reference (document order) is reported.
 */
export function resolveTemplate(template: unknown, scope: Scope): Resolved {
  if (typeof template === "string") {
    const exact = EXACT.exec(template);
    if (exact) return resolveExpr(exact[1] ?? "", scope);
    let failed: Resolved | undefined;
    const text = template.replace(PLACEHOLDER, (_m, expr: string) => {
      if (failed) return "";
      const r = resolveExpr(expr, scope);
      if (!r.ok) {
        failed = r;
        return "";
      }
      return stringify(r.value);
    });
    return failed ?? { ok: true, value: text };
  }
  if (Array.isArray(template)) {
    const out: unknown[] = [];
    for (const v of template) {
      const r = resolveTemplate(v, scope);
      if (!r.ok) return r;
      out.push(r.value);
    }
    return { ok: true, value: out };
  }
  if (typeof template === "object" && template !== null) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(template)) {
      const r = resolveTemplate(v, scope);
      if (!r.ok) return r;
      Object.defineProperty(out, k, { value: r.value, enumerable: true, writable: true, configurable: true });
    }
    return { ok: true, value: out };
  }
  return { ok: true, value: template };
}
