import { describe, expect, it } from "vitest";
import {
  checkSchemaSubset,
  evaluateCondition,
  mapItemInput,
  mapItems,
  nodeInput,
  parseRef,
  resolveTemplate,
  retryDelay,
  validateAgainstSchema,
  workflowDepth,
  childDepthAllowed,
  type Condition,
  type PlanNode,
  type Scope,
} from "../../machines/workflow/index.js";

const scope: Scope = {
  input: { user: { name: "Ada", tags: ["x", "y"], age: 36, none: null }, list: [1, 2, 3], flag: false },
  steps: {
    fetch: { status: "succeeded", output: { items: [{ name: "first" }, { name: "second" }], total: 2 } },
    empty: { status: "succeeded" },
    gone: { status: "skipped" },
    constructor: { status: "failed" as const },
  },
};

describe("resolveTemplate", () => {
  it("replaces an exact reference with the value, of any JSON type", () => {
    expect(resolveTemplate("${input.user}", scope)).toEqual({ ok: true, value: scope.input && (scope.input as { user: unknown }).user });
    expect(resolveTemplate("${input.user.age}", scope)).toEqual({ ok: true, value: 36 });
    expect(resolveTemplate("${input.user.none}", scope)).toEqual({ ok: true, value: null });
    expect(resolveTemplate("${input.flag}", scope)).toEqual({ ok: true, value: false });
    expect(resolveTemplate("${steps.fetch.output.items.1.name}", scope)).toEqual({ ok: true, value: "second" });
    expect(resolveTemplate("${steps.gone.status}", scope)).toEqual({ ok: true, value: "skipped" });
    expect(resolveTemplate("${ input.list }", scope)).toEqual({ ok: true, value: [1, 2, 3] });
  });

  it("interpolates references inside text, non-strings as canonical JSON", () => {
    expect(resolveTemplate("hi ${input.user.name}, ${input.user.age} (${input.user.none})", scope)).toEqual({ ok: true, value: "hi Ada, 36 (null)" });
    expect(resolveTemplate("tags=${input.user.tags} total=${steps.fetch.output.total}", scope)).toEqual({ ok: true, value: 'tags=["x","y"] total=2' });
    expect(resolveTemplate("no refs, only ${ text", scope)).toEqual({ ok: true, value: "no refs, only ${ text" });
  });

  it("walks arrays and objects, leaving keys and non-string values alone", () => {
    const t = { a: ["${input.user.name}", 1, true, null, { deep: "${input.list.0}" }], "${input.x}": "k" };
    expect(resolveTemplate(t, scope)).toEqual({ ok: true, value: { a: ["Ada", 1, true, null, { deep: 1 }], "${input.x}": "k" } });
    expect(resolveTemplate(42, scope)).toEqual({ ok: true, value: 42 });
  });

  it("reports a missing path as unreadable, never as undefined", () => {
    const unreadable = (t: unknown, path: string) => expect(resolveTemplate(t, scope)).toEqual({ ok: false, code: "reference_unreadable", path });
    unreadable("${input.user.email}", "input.user.email");
    unreadable("${input.list.3}", "input.list.3");
    unreadable("${input.list.length}", "input.list.length");
    unreadable("${input.user.name.0}", "input.user.name.0");
    unreadable("${steps.empty.output}", "steps.empty.output");
    unreadable("${steps.gone.output}", "steps.gone.output");
    unreadable("${steps.nobody.status}", "steps.nobody.status");
    unreadable("${steps.constructor.output}", "steps.constructor.output");
    unreadable("${input.user.constructor}", "input.user.constructor");
    unreadable("${item}", "item");
    unreadable("${index}", "index");
    unreadable(["ok", { x: "a ${input.nope} b" }], "input.nope");
    unreadable("${bogus}", "bogus");
  });

  it("reads item and index in a map scope", () => {
    expect(resolveTemplate({ i: "${index}", n: "${item.name}" }, { ...scope, item: { name: "z" }, index: 4 })).toEqual({ ok: true, value: { i: 4, n: "z" } });
  });

  it("parses the reference grammar", () => {
    expect(parseRef("steps.my-node_1.output.a.0")).toEqual({ root: "steps", node: "my-node_1", field: "output", path: ["a", 0] });
    expect(parseRef("steps.a.status")).toEqual({ root: "steps", node: "a", field: "status" });
    for (const bad of ["steps.a.status.x", "steps.a", "index.0", "input..a", "input.01", "input.a b", "", "env.HOME"]) expect(parseRef(bad)).toBeUndefined();
  });
});

describe("evaluateCondition", () => {
  const ev = (c: Condition) => evaluateCondition(c, scope);
  it("compares", () => {
    expect(ev({ ref: "${input.user.name}", op: "eq", value: "Ada" })).toEqual({ ok: true, value: true });
    expect(ev({ ref: "${input.user.tags}", op: "eq", value: ["x", "y"] })).toEqual({ ok: true, value: true });
    expect(ev({ ref: "${input.user.name}", op: "ne", value: "Bob" })).toEqual({ ok: true, value: true });
    expect(ev({ ref: "${input.user.age}", op: "gt", value: 30 })).toEqual({ ok: true, value: true });
    expect(ev({ ref: "${input.user.age}", op: "gte", value: 36 })).toEqual({ ok: true, value: true });
    expect(ev({ ref: "${input.user.age}", op: "lt", value: 36 })).toEqual({ ok: true, value: false });
    expect(ev({ ref: "${input.user.age}", op: "lte", value: 36 })).toEqual({ ok: true, value: true });
    expect(ev({ ref: "${input.user.name}", op: "lt", value: "Bob" })).toEqual({ ok: true, value: true });
    expect(ev({ ref: "${input.user.age}", op: "gt", value: "30" })).toEqual({ ok: true, value: false });
    expect(ev({ ref: "${steps.fetch.status}", op: "in", value: ["succeeded", "skipped"] })).toEqual({ ok: true, value: true });
    expect(ev({ ref: "${input.user.age}", op: "in", value: [1, 2] })).toEqual({ ok: true, value: false });
  });

  it("tests existence and truthiness", () => {
    expect(ev({ ref: "${input.user.email}", op: "exists" })).toEqual({ ok: true, value: false });
    expect(ev({ ref: "${input.user.none}", op: "exists" })).toEqual({ ok: true, value: true });
    expect(ev({ ref: "${input.flag}", op: "falsy" })).toEqual({ ok: true, value: true });
    expect(ev({ ref: "${input.user.tags}", op: "truthy" })).toEqual({ ok: true, value: true });
    expect(evaluateCondition({ ref: "${input.e}", op: "truthy" }, { input: { e: [] }, steps: {} })).toEqual({ ok: true, value: false });
    expect(evaluateCondition({ ref: "${input.e}", op: "falsy" }, { input: { e: {} }, steps: {} })).toEqual({ ok: true, value: true });
  });

  it("combines with all / any / not", () => {
    const t = { ref: "${input.user.age}", op: "gt", value: 1 } as const;
    const f = { ref: "${input.flag}", op: "truthy" } as const;
    expect(ev({ all: [t, f] })).toEqual({ ok: true, value: false });
    expect(ev({ any: [f, t] })).toEqual({ ok: true, value: true });
    expect(ev({ not: f })).toEqual({ ok: true, value: true });
  });

  it("is unreadable on a missing reference, except for exists", () => {
    expect(ev({ ref: "${steps.gone.output}", op: "eq", value: 1 })).toEqual({ ok: false, code: "condition_unreadable", path: "steps.gone.output" });
    expect(ev({ not: { ref: "${input.nope}", op: "truthy" } })).toEqual({ ok: false, code: "condition_unreadable", path: "input.nope" });
    expect(
      ev({
        any: [
          { ref: "${input.nope}", op: "exists" },
          { ref: "${input.user}", op: "exists" },
        ],
      }),
    ).toEqual({ ok: true, value: true });
  });
});

describe("input schema subset", () => {
  const schema = {
    type: "object",
    properties: {
      name: { type: "string", minLength: 2, maxLength: 5, pattern: "^[A-Z]" },
      age: { type: "integer", minimum: 0, maximum: 150 },
      tags: { type: "array", items: { type: "string", enum: ["a", "b"] }, minItems: 1, maxItems: 2 },
      kind: { const: "person" },
      note: { type: ["string", "null"] },
    },
    required: ["name", "kind"],
    additionalProperties: false,
  };

  it("accepts the subset", () => expect(checkSchemaSubset(schema)).toEqual([]));

  it("validates values and reports every violation with its path", () => {
    expect(validateAgainstSchema(schema, { name: "Ada", kind: "person", age: 36, tags: ["a"], note: null })).toEqual({ ok: true });
    const r = validateAgainstSchema(schema, { name: "a", age: 1.5, tags: ["c", "a", "b"], extra: 1, note: 3 });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.errors.map((e) => e.path).sort()).toEqual(["age", "extra", "kind", "name", "name", "note", "tags", "tags[0]"].sort());
    expect(validateAgainstSchema({ type: "number" }, 3)).toEqual({ ok: true });
    expect(validateAgainstSchema({ type: "object" }, [])).toMatchObject({ ok: false, errors: [{ path: "", message: "expected object, got array" }] });
    expect(validateAgainstSchema({ type: "string", maxLength: 1 }, "😀")).toEqual({ ok: true });
  });

  it("refuses what the subset does not hold", () => {
    expect(checkSchemaSubset({ type: "object", $ref: "#/x" })).toEqual([{ path: "$ref", message: "unsupported schema keyword '$ref'" }]);
    expect(checkSchemaSubset({ items: [{ type: "string" }] }).map((e) => e.path)).toEqual(["items"]);
    expect(checkSchemaSubset({ type: [] }).map((e) => e.path)).toEqual(["type"]);
    expect(checkSchemaSubset({ enum: [] }).map((e) => e.path)).toEqual(["enum"]);
    expect(checkSchemaSubset({ required: ["a", "a"] }).map((e) => e.path)).toEqual(["required"]);
  });
});

describe("map items", () => {
  const node = { items: "${input.list}", max_fanout: 3 };
  it("an empty list is a valid, empty fan-out", () => {
    expect(mapItems(node, { input: { list: [] }, steps: {} })).toEqual({ ok: true, items: [] });
  });
  it("a list over max_fanout fails before any call; a list at the limit is fine", () => {
    expect(mapItems(node, { input: { list: [1, 2, 3, 4] }, steps: {} })).toMatchObject({ ok: false, code: "fanout_exceeded" });
    expect(mapItems(node, { input: { list: [1, 2, 3] }, steps: {} })).toEqual({ ok: true, items: [1, 2, 3] });
  });
  it("a non-list or an unreadable list fails", () => {
    expect(mapItems(node, { input: { list: { a: 1 } }, steps: {} })).toMatchObject({ ok: false, code: "items_not_a_list" });
    expect(mapItems(node, { input: { list: "abc" }, steps: {} })).toMatchObject({ ok: false, code: "items_not_a_list" });
    expect(mapItems(node, { input: {}, steps: {} })).toEqual({ ok: false, code: "reference_unreadable", detail: "input.list" });
  });
  it("binds item and index into each item's input, the item itself by default", () => {
    const s: Scope = { input: { k: "K" }, steps: {} };
    expect(mapItemInput({ input: { at: "${index}", v: "${item.v}", k: "${input.k}" } }, s, { v: 7 }, 2)).toEqual({ ok: true, value: { at: 2, v: 7, k: "K" } });
    expect(mapItemInput({}, s, { v: 7 }, 0)).toEqual({ ok: true, value: { v: 7 } });
    expect(nodeInput({}, s)).toEqual({ ok: true, value: null });
  });
});

describe("retry and subworkflow depth", () => {
  it("backs off exponentially up to the cap, and stops after max_attempts", () => {
    const r = { max_attempts: 4, backoff_ms: 100, max_backoff_ms: 250, multiplier: 2 };
    expect([1, 2, 3, 4].map((a) => retryDelay(r, a))).toEqual([100, 200, 250, undefined]);
  });

  it("measures the subworkflow tree and refuses a start over the cap", () => {
    const sub = (id: string, workflow: string): PlanNode => ({ id, kind: "subworkflow", workflow, needs: [], continue_on_error: false, parent: null });
    const plans = new Map([
      ["a", { name: "a", nodes: [sub("x", "b")] }],
      ["b", { name: "b", nodes: [sub("y", "c")] }],
      ["c", { name: "c", nodes: [] }],
      ["loop", { name: "loop", nodes: [sub("z", "loop")] }],
    ]);
    const load = (n: string) => plans.get(n);
    expect(workflowDepth(plans.get("a") ?? { name: "", nodes: [] }, load, 3)).toEqual({ ok: true, depth: 3 });
    expect(workflowDepth(plans.get("a") ?? { name: "", nodes: [] }, load, 2)).toMatchObject({ ok: false, code: "depth_exceeded" });
    expect(workflowDepth(plans.get("loop") ?? { name: "", nodes: [] }, load, 3)).toEqual({ ok: false, code: "workflow_cycle", chain: ["loop", "loop"] });
    expect(workflowDepth({ name: "q", nodes: [sub("w", "nowhere")] }, load, 3)).toEqual({
      ok: false,
      code: "subworkflow_unresolvable",
      chain: ["q", "nowhere"],
    });
    expect(childDepthAllowed(1, 2, 3)).toBe(true);
    expect(childDepthAllowed(2, 2, 3)).toBe(false);
  });
});
