import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { isTenantId, MAX_JSON_DEPTH, nestingDepth, TenantIdSchema, validateAgainstSchema, WorkflowNameSchema } from "../../machines/index.js";

// Values that reached KV keys and subjects before issue 8, each refused now by the one rule.
const BAD_TOKENS = ["*", ">", "a b", "$KV", "ü", "租户", "\u0000", "", "a.b", "a_b", "-a", "A", "a\n", " a", "a\u200b"];

describe("tenant ids (machines/tenant/settings.ts)", () => {
  it("accepts 1-32 characters of [a-z0-9-] starting with a letter or digit", () => {
    for (const id of ["t1", "a", "0", "acme-eu", "x".repeat(32)]) expect(isTenantId(id), id).toBe(true);
  });

  it("refuses wildcards, separators, spaces, `$`, NUL, non-ASCII, empty, too long and `ops`", () => {
    for (const id of [...BAD_TOKENS, "x".repeat(33), "ops", 7, null, undefined]) {
      expect(isTenantId(id), JSON.stringify(id)).toBe(false);
      expect(TenantIdSchema.safeParse(id).success).toBe(false);
    }
  });

  it("anything accepted is one safe subject token and KV key token", () => {
    fc.assert(fc.property(fc.string({ unit: "binary", maxLength: 40 }), (s) => !isTenantId(s) || /^[a-z0-9-]{1,32}$/.test(s)));
  });
});

describe("workflow names (machines/workflow/definition.ts)", () => {
  it("accepts 1-63 characters of [a-z0-9-] and refuses everything else", () => {
    for (const name of ["ok-flow", "a", "9", "x".repeat(63)]) expect(WorkflowNameSchema.safeParse(name).success, name).toBe(true);
    for (const name of [...BAD_TOKENS, "x".repeat(64)]) expect(WorkflowNameSchema.safeParse(name).success, JSON.stringify(name)).toBe(false);
  });
});

describe("nestingDepth (machines/workflow/canonical.ts)", () => {
  const depthOf = (v: unknown): number => (v !== null && typeof v === "object" ? 1 + Math.max(0, ...Object.values(v).map(depthOf)) : 0);

  it("counts levels of arrays and objects: a scalar is 0, the outermost container is 1", () => {
    expect(nestingDepth(3)).toBe(0);
    expect(nestingDepth(null)).toBe(0);
    expect(nestingDepth([])).toBe(1);
    expect(nestingDepth({ a: [1, { b: {} }], c: "x" })).toBe(4);
    fc.assert(fc.property(fc.jsonValue(), (v) => nestingDepth(v) === depthOf(v)));
  });

  it("measures any depth on a bounded stack and stops once past the limit", () => {
    const deep = JSON.parse(`${"[".repeat(300_000)}${"]".repeat(300_000)}`) as unknown;
    expect(nestingDepth(deep)).toBe(300_000);
    expect(nestingDepth(deep, MAX_JSON_DEPTH)).toBe(MAX_JSON_DEPTH + 1);
  });
});

describe("validateAgainstSchema on deep input", () => {
  it("refuses a value nested past MAX_JSON_DEPTH instead of recursing into it", () => {
    const deep = JSON.parse(`${'{"a":'.repeat(100_000)}1${"}".repeat(100_000)}`) as unknown;
    expect(validateAgainstSchema({ type: "object", const: { a: 1 } }, deep)).toEqual({
      ok: false,
      errors: [{ path: "", message: `arrays and objects nest deeper than ${MAX_JSON_DEPTH} levels` }],
    });
    // At the limit itself it is validated as usual.
    expect(validateAgainstSchema({ type: "array" }, JSON.parse(`${"[".repeat(MAX_JSON_DEPTH)}${"]".repeat(MAX_JSON_DEPTH)}`))).toEqual({ ok: true });
  });
});
