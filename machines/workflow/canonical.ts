/** JSON helpers shared by the workflow modules: canonical text, structural checks, byte size. */
/** Any JSON value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** True for a JSON value: null, boolean, finite number, string, arrays and plain objects of those. */
export function isJson(value: unknown, depth = 0): value is Json {
  if (depth > 200) return false;
  if (value === null || typeof value === "boolean" || typeof value === "string") return true;
  if (typeof value === "number") return Number.isFinite(value);
  if (Array.isArray(value)) return value.every((v) => isJson(v, depth + 1));
  if (typeof value === "object") {
    const proto = Object.getPrototypeOf(value) as unknown;
    if (proto !== Object.prototype && proto !== null) return false;
    return Object.values(value as Record<string, unknown>).every((v) => isJson(v, depth + 1));
  }
  return false;
}

/**
 * The deepest nesting of arrays and objects accepted in a request body or a workflow definition
 * (the outermost value is level 1). Every recursive walk of such data (zod, the compiler,
 * templates, schema validation, msgpack and JSON encoders) stays far from the stack's limit.
 */
export const MAX_JSON_DEPTH = 64;

/**
 * How deeply `value` nests arrays and objects: 0 for a scalar, 1 for `[]` or `{"a": 1}`. Walked
 * without recursion and abandoned once it passes `stopAbove`, so any value, however deep, is
 * measured on a bounded stack.
 */
export function nestingDepth(value: unknown, stopAbove: number = Number.POSITIVE_INFINITY): number {
  let deepest = 0;
  const todo: [unknown, number][] = [[value, 0]];
  for (let next = todo.pop(); next !== undefined; next = todo.pop()) {
    const [v, depth] = next;
    if (v === null || typeof v !== "object") continue;
    const level = depth + 1;
    if (level > deepest) deepest = level;
    if (deepest > stopAbove) return deepest;
    for (const child of Array.isArray(v) ? v : Object.values(v)) if (child !== null && typeof child === "object") todo.push([child, level]);
  }
  return deepest;
}

/**
 * Canonical JSON text: object keys sorted by code unit, no whitespace, `undefined` members
 * omitted (as JSON.stringify does). Equal values give equal text whatever their key order, so the
 * text is fit for hashing and for equality.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== "object") {
    const text = JSON.stringify(value);
    return text === undefined ? "null" : text;
  }
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? "null" : canonicalJson(v))).join(",")}]`;
  const obj = value as Record<string, unknown>;
  const keys = Object.keys(obj)
    .filter((k) => obj[k] !== undefined)
    .sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(obj[k])}`).join(",")}}`;
}

/** Structural equality of JSON values (key order ignored). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  return canonicalJson(a) === canonicalJson(b);
}

/** UTF-8 byte length of a string, computed without any platform API. */
export function utf8Length(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        bytes += 4;
        i++;
      } else bytes += 3;
    } else bytes += 3;
  }
  return bytes;
}

/** A location as text: `nodes[2].then[0].handler`; the root is the empty string. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const seg of path) {
    if (typeof seg === "number") out += `[${seg}]`;
    else out += out === "" ? String(seg) : `.${String(seg)}`;
  }
  return out;
}
