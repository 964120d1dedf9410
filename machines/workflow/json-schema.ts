/**
 * The JSON-Schema subset accepted for a workflow's `input_schema`, and a validator for it.
 * Keywords: type (one name or a list), properties, required, additionalProperties (boolean),
 * items (one schema), enum, const, minimum, maximum, minLength, maxLength, minItems, maxItems,
 * pattern (ECMAScript, unicode mode, unanchored as in JSON Schema). Any other keyword is refused
 * at publish, so a schema never silently means less than its author wrote.
 */
import { formatPath, isJson, jsonEqual, MAX_JSON_DEPTH, nestingDepth } from "./canonical.js";

export type SchemaIssue = { path: string; message: string };
export type SchemaValidation = { ok: true } | { ok: false; errors: SchemaIssue[] };

const TYPES: ReadonlySet<string> = new Set(["object", "array", "string", "number", "integer", "boolean", "null"]);
const COUNTS = ["minLength", "maxLength", "minItems", "maxItems"] as const;
const KEYWORDS: ReadonlySet<string> = new Set([
  "type",
  "properties",
  "required",
  "additionalProperties",
  "items",
  "enum",
  "const",
  "minimum",
  "maximum",
  "minLength",
  "maxLength",
  "minItems",
  "maxItems",
  "pattern",
]);

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function compilePattern(pattern: string): RegExp | undefined {
  try {
    return new RegExp(pattern, "u");
  } catch {
    return undefined;
  }
}

/**
 * Checks that `schema` uses only the supported subset, correctly typed. Returns every problem,
 * each with its location inside the schema (`path` prefixed by `at`).
 */
export function checkSchemaSubset(schema: unknown, at: readonly PropertyKey[] = []): SchemaIssue[] {
  const issues: SchemaIssue[] = [];
  const add = (rel: PropertyKey[], message: string) => issues.push({ path: formatPath([...at, ...rel]), message });
  if (!isObject(schema)) {
    add([], "a schema is an object");
    return issues;
  }
  for (const key of Object.keys(schema)) if (!KEYWORDS.has(key)) add([key], `unsupported schema keyword '${key}'`);
  const { type, properties, required, additionalProperties, items, minimum, maximum, pattern } = schema;
  if (type !== undefined) {
    const names = Array.isArray(type) ? type : [type];
    if (names.length === 0 || !names.every((t) => typeof t === "string" && TYPES.has(t)))
      add(["type"], `type is one of ${[...TYPES].join(", ")}, or a non-empty list of them`);
  }
  if (properties !== undefined) {
    if (!isObject(properties)) add(["properties"], "properties is an object of schemas");
    else for (const [k, sub] of Object.entries(properties)) issues.push(...checkSchemaSubset(sub, [...at, "properties", k]));
  }
  if (required !== undefined && (!Array.isArray(required) || !required.every((r) => typeof r === "string") || new Set(required).size !== required.length))
    add(["required"], "required is a list of distinct property names");
  if (additionalProperties !== undefined && typeof additionalProperties !== "boolean")
    add(["additionalProperties"], "additionalProperties is a boolean in this subset");
  if (items !== undefined) issues.push(...checkSchemaSubset(items, [...at, "items"]));
  if (schema.enum !== undefined && (!Array.isArray(schema.enum) || schema.enum.length === 0 || !isJson(schema.enum)))
    add(["enum"], "enum is a non-empty list of JSON values");
  if ("const" in schema && !isJson(schema.const)) add(["const"], "const is a JSON value");
  for (const [key, v] of [
    ["minimum", minimum],
    ["maximum", maximum],
  ] as const)
    if (v !== undefined && (typeof v !== "number" || !Number.isFinite(v))) add([key], `${key} is a number`);
  for (const key of COUNTS) {
    const v = schema[key];
    if (v !== undefined && (typeof v !== "number" || !Number.isInteger(v) || v < 0)) add([key], `${key} is a non-negative integer`);
  }
  if (pattern !== undefined && (typeof pattern !== "string" || compilePattern(pattern) === undefined))
    add(["pattern"], "pattern is a valid regular expression");
  return issues;
}

function typeOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value;
}

function matchesType(value: unknown, name: string): boolean {
  const actual = typeOf(value);
  return actual === name || (name === "number" && actual === "integer");
}

function validate(schema: Record<string, unknown>, value: unknown, path: PropertyKey[], out: SchemaIssue[]): void {
  const fail = (message: string) => out.push({ path: formatPath(path), message });
  const { type } = schema;
  if (type !== undefined) {
    const names = (Array.isArray(type) ? type : [type]) as string[];
    if (!names.some((t) => matchesType(value, t))) {
      fail(`expected ${names.join(" or ")}, got ${typeOf(value)}`);
      return;
    }
  }
  if (Array.isArray(schema.enum) && !schema.enum.some((e) => jsonEqual(e, value))) fail("not one of the allowed values");
  if ("const" in schema && !jsonEqual(schema.const, value)) fail("not the constant value");
  if (typeof value === "number") {
    if (typeof schema.minimum === "number" && value < schema.minimum) fail(`below the minimum ${schema.minimum}`);
    if (typeof schema.maximum === "number" && value > schema.maximum) fail(`above the maximum ${schema.maximum}`);
  }
  if (typeof value === "string") {
    const length = [...value].length;
    if (typeof schema.minLength === "number" && length < schema.minLength) fail(`shorter than ${schema.minLength}`);
    if (typeof schema.maxLength === "number" && length > schema.maxLength) fail(`longer than ${schema.maxLength}`);
    if (typeof schema.pattern === "string" && compilePattern(schema.pattern)?.test(value) === false) fail(`does not match ${schema.pattern}`);
  }
  if (Array.isArray(value)) {
    if (typeof schema.minItems === "number" && value.length < schema.minItems) fail(`fewer than ${schema.minItems} items`);
    if (typeof schema.maxItems === "number" && value.length > schema.maxItems) fail(`more than ${schema.maxItems} items`);
    if (isObject(schema.items)) {
      const items = schema.items;
      value.forEach((v, i) => validate(items, v, [...path, i], out));
    }
  }
  if (isObject(value)) {
    const properties = isObject(schema.properties) ? schema.properties : {};
    if (Array.isArray(schema.required))
      for (const r of schema.required) if (typeof r === "string" && !Object.hasOwn(value, r)) out.push({ path: formatPath([...path, r]), message: "required" });
    for (const [k, v] of Object.entries(value)) {
      const sub = properties[k];
      if (isObject(sub)) validate(sub, v, [...path, k], out);
      else if (schema.additionalProperties === false && !Object.hasOwn(properties, k))
        out.push({ path: formatPath([...path, k]), message: "unexpected property" });
    }
  }
}

/**
 * Validates `value` against a schema of the subset (check the schema with `checkSchemaSubset`
 * first; unsupported keywords are ignored here). Reports every violation, depth first. A value
 * nested deeper than `MAX_JSON_DEPTH` is refused whatever the schema says, so that `enum` and
 * `const`, which compare whole values recursively, stay on a bounded stack.
 */
export function validateAgainstSchema(schema: unknown, value: unknown): SchemaValidation {
  if (!isObject(schema)) return { ok: false, errors: [{ path: "", message: "the schema is not an object" }] };
  if (nestingDepth(value, MAX_JSON_DEPTH) > MAX_JSON_DEPTH)
    return { ok: false, errors: [{ path: "", message: `arrays and objects nest deeper than ${MAX_JSON_DEPTH} levels` }] };
  const errors: SchemaIssue[] = [];
  validate(schema, value, [], errors);
  return errors.length === 0 ? { ok: true } : { ok: false, errors };
}
