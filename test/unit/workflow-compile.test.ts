import { describe, expect, it } from "vitest";
import {
  canonicalJson,
  compileDefinition,
  MAX_JSON_DEPTH,
  PlanSchema,
  type CompileContext,
  type CompileErrorCode,
  type Plan,
  type PlanNode,
} from "../../machines/workflow/index.js";

const handlers = new Set(["fetch", "charge", "notify", "score"]);
const ctx: CompileContext = { handlers, workflowExists: (n) => n === "child-flow" };

const code = (id: string, extra: Record<string, unknown> = {}) => ({ id, kind: "code", handler: "fetch", ...extra });

/** A definition using every node kind. */
const full = {
  name: "order-flow",
  description: "every kind once",
  input_schema: { type: "object", properties: { list: { type: "array", items: { type: "string" } }, vip: { type: "boolean" } }, required: ["list"] },
  nodes: [
    code("load", { input: { list: "${input.list}" }, retry: { max_attempts: 3, backoff_ms: 100, max_backoff_ms: 1000 } }),
    {
      id: "fan",
      kind: "parallel",
      needs: ["load"],
      branches: [
        [code("a1"), { id: "a2", kind: "sleep", duration_ms: 1000 }],
        [
          {
            id: "m",
            kind: "map",
            items: "${steps.load.output.list}",
            handler: "score",
            input: { item: "${item}", at: "${index}" },
            max_fanout: 100,
            concurrency: 8,
          },
        ],
      ],
    },
    {
      id: "vip",
      kind: "branch",
      needs: ["fan"],
      condition: { ref: "${input.vip}", op: "truthy" },
      then: [{ id: "child", kind: "subworkflow", workflow: "child-flow", input: { scores: "${steps.m.output}" } }],
      else: [code("plain", { handler: "notify" })],
    },
    code("done", { needs: ["vip", { node: "load", when: "always" }], handler: "charge", input: "status ${steps.child.status}" }),
  ],
  result: { done: "${steps.done.output}" },
};

function compiled(def: unknown = full): Plan {
  const r = compileDefinition(def, ctx);
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return r.plan;
}

function codes(def: unknown, c: CompileContext = ctx): CompileErrorCode[] {
  const r = compileDefinition(def, c);
  return r.ok ? [] : r.errors.map((e) => e.code);
}

const node = (plan: Plan, id: string): PlanNode => {
  const n = plan.nodes.find((x) => x.id === id);
  if (!n) throw new Error(`no ${id}`);
  return n;
};

describe("compileDefinition: a valid definition", () => {
  it("compiles every kind into a flat, topologically ordered plan", () => {
    const plan = compiled();
    expect(plan.nodes.map((n) => n.id)).toEqual(["load", "a1", "a2", "m", "fan", "vip", "child", "plain", "vip:end", "done"]);
    const pos = new Map(plan.nodes.map((n, i) => [n.id, i]));
    for (const n of plan.nodes) for (const need of n.needs) expect(pos.get(need.node)).toBeLessThan(pos.get(n.id) ?? -1);
    const reread: Plan = PlanSchema.parse(JSON.parse(JSON.stringify(plan)));
    expect(reread).toEqual(plan);
  });

  it("makes sequencing, joins and branch completion explicit", () => {
    const plan = compiled();
    expect(node(plan, "a1").needs).toEqual([{ node: "load", when: "succeeded" }]);
    expect(node(plan, "a2").needs).toEqual([{ node: "a1", when: "succeeded" }]);
    expect(node(plan, "m").needs).toEqual([{ node: "load", when: "succeeded" }]);
    expect(node(plan, "fan")).toMatchObject({
      kind: "parallel",
      members: ["a1", "a2", "m"],
      branches: [["a1", "a2"], ["m"]],
      needs: [
        { node: "load", when: "succeeded" },
        { node: "a1", when: "always" },
        { node: "a2", when: "always" },
        { node: "m", when: "always" },
      ],
    });
    expect(node(plan, "vip")).toMatchObject({
      kind: "branch",
      then_members: ["child"],
      else_members: ["plain"],
      end: "vip:end",
      needs: [{ node: "fan", when: "succeeded" }],
    });
    expect(node(plan, "child").needs).toEqual([{ node: "vip", when: "then" }]);
    expect(node(plan, "plain").needs).toEqual([{ node: "vip", when: "else" }]);
    expect(node(plan, "vip:end")).toMatchObject({
      kind: "branch_end",
      branch: "vip",
      members: ["vip", "child", "plain"],
      needs: [
        { node: "vip", when: "completed" },
        { node: "child", when: "always" },
        { node: "plain", when: "always" },
      ],
    });
    expect(node(plan, "done").needs).toEqual([
      { node: "vip:end", when: "succeeded" },
      { node: "load", when: "always" },
    ]);
    expect(node(plan, "child").parent).toBe("vip");
    expect(node(plan, "a1").parent).toBe("fan");
    expect(node(plan, "load").parent).toBeNull();
  });

  it("applies defaults: timeout, retry, map concurrency, continue_on_error", () => {
    const plan = compiled();
    expect(node(plan, "load")).toMatchObject({
      timeout_ms: 30_000,
      continue_on_error: false,
      retry: { max_attempts: 3, backoff_ms: 100, max_backoff_ms: 1000, multiplier: 2 },
    });
    expect(node(plan, "a1")).toMatchObject({ retry: { max_attempts: 3, backoff_ms: 200, max_backoff_ms: 10_000, multiplier: 2 } });
    expect(node(plan, "m")).toMatchObject({ kind: "map", max_fanout: 100, concurrency: 8 });
  });

  it("compiles twice to identical canonical JSON, whatever the key order of the input", () => {
    const a = compiled();
    const b = compiled(JSON.parse(JSON.stringify(full)));
    const reversed = JSON.parse(JSON.stringify(full), (_k, v: unknown) =>
      v && typeof v === "object" && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).reverse()) : v,
    );
    const c = compiled(reversed);
    expect(canonicalJson(a)).toBe(canonicalJson(b));
    expect(canonicalJson(a)).toBe(canonicalJson(c));
    expect(a.definition_digest_input).toBe(c.definition_digest_input);
    const { definition_digest_input, ...body } = a;
    expect(definition_digest_input).toBe(canonicalJson(body));
  });

  it("orders ties by definition position, depth first", () => {
    const plan = compiled({
      name: "ties",
      nodes: [code("x"), code("y", { needs: ["x"] }), code("z"), { id: "p", kind: "parallel", branches: [[code("p1")], [code("p2")]] }],
    });
    expect(plan.nodes.map((n) => n.id)).toEqual(["x", "y", "z", "p1", "p2", "p"]);
  });

  it("continues a sequence past a continue_on_error node with a `completed` need", () => {
    const plan = compiled({ name: "coe", nodes: [{ id: "p", kind: "parallel", branches: [[code("a", { continue_on_error: true }), code("b")]] }] });
    expect(node(plan, "b").needs).toEqual([{ node: "a", when: "completed" }]);
  });

  it("canonicalJson sorts keys and drops whitespace", () => {
    expect(canonicalJson({ b: [1, { d: 1, c: "x" }], a: null, u: undefined })).toBe('{"a":null,"b":[1,{"c":"x","d":1}]}');
  });
});

describe("compileDefinition: publish errors", () => {
  it("invalid_definition: shape errors, unknown fields, bad ids", () => {
    expect(codes({ name: "Bad Name", nodes: [] })).toEqual(["invalid_definition", "invalid_definition"]);
    const r = compileDefinition({ name: "x", nodes: [{ ...code("a"), colour: "red" }] }, ctx);
    expect(r).toMatchObject({ ok: false, errors: [{ code: "invalid_definition", path: "nodes[0]" }] });
    expect(codes({ name: "x", nodes: [code("1a")] })).toEqual(["invalid_definition"]);
    expect(codes({ name: "x", nodes: [{ id: "b", kind: "branch", condition: { ref: "${input.a}", op: "eq" }, then: [] }] })).toEqual(["invalid_definition"]);
    expect(codes({ name: "x", nodes: [{ id: "m", kind: "map", items: "list ${input.a}", handler: "fetch", max_fanout: 3 }] })).toEqual(["invalid_definition"]);
    expect(codes({ name: "x", nodes: [code("a", { timeout_ms: 16 * 60_000 })] })).toEqual(["invalid_definition"]);
    expect(codes(null)).toEqual(["invalid_definition"]);
  });

  it("duplicate_id, also across nesting", () => {
    const r = compileDefinition({ name: "x", nodes: [code("a"), { id: "p", kind: "parallel", branches: [[code("a")]] }] }, ctx);
    expect(r).toMatchObject({ ok: false, errors: [{ code: "duplicate_id", path: "nodes[1].branches[0][0].id" }] });
  });

  it("unknown_node", () => {
    const r = compileDefinition({ name: "x", nodes: [code("a", { needs: ["ghost"] })] }, ctx);
    expect(r).toMatchObject({ ok: false, errors: [{ code: "unknown_node", path: "nodes[0].needs[0]" }] });
  });

  it("cycle, including a self-need and a path that needs its own branch", () => {
    expect(codes({ name: "x", nodes: [code("a", { needs: ["b"] }), code("b", { needs: ["a"] })] })).toEqual(["cycle"]);
    expect(codes({ name: "x", nodes: [code("a", { needs: ["a"] })] })).toEqual(["cycle"]);
    const own = { id: "br", kind: "branch", condition: { ref: "${input.x}", op: "truthy" }, then: [code("t", { needs: ["br"] })] };
    const r = compileDefinition({ name: "x", nodes: [own] }, ctx);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.errors[0]).toMatchObject({ code: "cycle", message: expect.stringContaining("br:end") });
  });

  it("unknown_reference: missing node, not upstream, item outside a map, malformed", () => {
    const at = (input: unknown, extra: unknown[] = []) => codes({ name: "x", nodes: [code("a"), code("b"), ...extra, code("c", { needs: ["a"], input })] });
    expect(at("${steps.ghost.output}")).toEqual(["unknown_reference"]);
    expect(at("${steps.b.output}")).toEqual(["unknown_reference"]);
    expect(at("${steps.a.output.x}")).toEqual([]);
    expect(at("${item}")).toEqual(["unknown_reference"]);
    expect(at("${index}")).toEqual(["unknown_reference"]);
    expect(at("${inputs.x}")).toEqual(["unknown_reference"]);
    expect(at("${steps.a}")).toEqual(["unknown_reference"]);
    expect(at("${steps.c.output}")).toEqual(["unknown_reference"]);
    const cond = {
      id: "br",
      kind: "branch",
      needs: ["a"],
      condition: { all: [{ ref: "${steps.a.status}", op: "eq", value: "succeeded" }, { not: { ref: "${steps.b.output}", op: "exists" } }] },
      then: [],
    };
    expect(codes({ name: "x", nodes: [code("a"), code("b"), cond] })).toEqual(["unknown_reference"]);
    const map = { id: "m", kind: "map", items: "${item}", handler: "fetch", max_fanout: 2 };
    expect(codes({ name: "x", nodes: [map] })).toEqual(["unknown_reference"]);
    expect(codes({ name: "x", nodes: [code("a")], result: "${steps.nope.output}" })).toEqual(["unknown_reference"]);
  });

  it("unknown_handler and unknown_workflow", () => {
    expect(codes({ name: "x", nodes: [code("a", { handler: "nope" })] })).toEqual(["unknown_handler"]);
    expect(codes({ name: "x", nodes: [{ id: "m", kind: "map", items: "${input.l}", handler: "nope", max_fanout: 2 }] })).toEqual(["unknown_handler"]);
    expect(codes({ name: "x", nodes: [{ id: "s", kind: "subworkflow", workflow: "missing" }] })).toEqual(["unknown_workflow"]);
    expect(codes({ name: "x", nodes: [{ id: "s", kind: "subworkflow", workflow: "missing" }] }, { handlers })).toEqual([]);
  });

  it("fanout_too_large", () => {
    expect(codes({ name: "x", nodes: [{ id: "m", kind: "map", items: "${input.l}", handler: "fetch", max_fanout: 1001 }] })).toEqual(["fanout_too_large"]);
    expect(codes({ name: "x", nodes: [{ id: "m", kind: "map", items: "${input.l}", handler: "fetch", max_fanout: 1000 }] })).toEqual([]);
    const small = { ...ctx, limits: { max_fanout: 10 } };
    expect(codes({ name: "x", nodes: [{ id: "m", kind: "map", items: "${input.l}", handler: "fetch", max_fanout: 11 }] }, small)).toEqual(["fanout_too_large"]);
  });

  it("depth_exceeded: parallel/branch nesting above the limit, reported once per chain", () => {
    const nest = (depth: number, i = 0): unknown => (depth === 0 ? code(`leaf${i}`) : { id: `p${i}`, kind: "parallel", branches: [[nest(depth - 1, i + 1)]] });
    expect(codes({ name: "x", nodes: [nest(8)] })).toEqual([]);
    expect(codes({ name: "x", nodes: [nest(10)] })).toEqual(["depth_exceeded"]);
    expect(codes({ name: "x", nodes: [nest(3)] }, { ...ctx, limits: { max_nesting: 2 } })).toEqual(["depth_exceeded"]);
  });

  it("depth_exceeded: a subworkflow tree deeper than the cap, or recursive, when plans can be loaded", () => {
    const plans = new Map<string, Plan>();
    const leaf = compiled({ name: "leaf", nodes: [code("a")] });
    plans.set("leaf", leaf);
    const mid = compileDefinition({ name: "mid", nodes: [{ id: "s", kind: "subworkflow", workflow: "leaf" }] }, { handlers, loadPlan: (n) => plans.get(n) });
    if (!mid.ok) throw new Error("mid");
    plans.set("mid", mid.plan);
    const top = { name: "top", nodes: [{ id: "s", kind: "subworkflow", workflow: "mid" }] };
    expect(codes(top, { handlers, loadPlan: (n) => plans.get(n) })).toEqual([]);
    expect(codes(top, { handlers, loadPlan: (n) => plans.get(n), limits: { max_workflow_depth: 2 } })).toEqual(["depth_exceeded"]);
    const self = { name: "self", nodes: [{ id: "s", kind: "subworkflow", workflow: "self" }] };
    expect(codes(self, { handlers, loadPlan: (n) => plans.get(n) })).toEqual(["depth_exceeded"]);
  });

  it("too_many_nodes", () => {
    const nodes = Array.from({ length: 6 }, (_, i) => code(`n${i}`));
    expect(codes({ name: "x", nodes }, { ...ctx, limits: { max_nodes: 5 } })).toEqual(["too_many_nodes"]);
    expect(codes({ name: "x", nodes }, { ...ctx, limits: { max_nodes: 6 } })).toEqual([]);
  });

  it("too_many_nodes stops before the graph checks: a cycle through 20,000 nodes is no stack overflow", () => {
    const n = 20_000;
    const nodes = Array.from({ length: n }, (_, i) => ({ id: `n${i}`, kind: "sleep", duration_ms: 0, needs: [`n${(i + 1) % n}`] }));
    expect(codes({ name: "x", nodes })).toEqual(["too_many_nodes"]);
  });

  it("too_deep: arrays and objects nested past MAX_JSON_DEPTH are refused before any recursive pass", () => {
    const arrays = (levels: number) => JSON.parse(`${"[".repeat(levels)}${"]".repeat(levels)}`) as unknown;
    // The definition object, `nodes` and the node are three levels; the input fills the rest.
    expect(codes({ name: "x", nodes: [code("a", { input: arrays(MAX_JSON_DEPTH - 3) })] })).toEqual([]);
    expect(compileDefinition({ name: "x", nodes: [code("a", { input: arrays(MAX_JSON_DEPTH - 2) })] }, ctx)).toEqual({
      ok: false,
      errors: [{ code: "too_deep", path: "", message: `arrays and objects nest deeper than ${MAX_JSON_DEPTH} levels` }],
    });
    // Deep enough to overflow any recursive walk: an input, a condition, nested parallels.
    expect(codes({ name: "x", nodes: [code("a", { input: arrays(200_000) })] })).toEqual(["too_deep"]);
    const condition = JSON.parse(`${'{"not":'.repeat(50_000)}{"ref":"\${input.a}","op":"exists"}${"}".repeat(50_000)}`) as unknown;
    expect(codes({ name: "x", nodes: [{ id: "b", kind: "branch", condition, then: [] }] })).toEqual(["too_deep"]);
    let nested: unknown = [code("leaf")];
    for (let i = 0; i < 20_000; i++) nested = [{ id: `p${i}`, kind: "parallel", branches: [nested] }];
    expect(codes({ name: "x", nodes: nested })).toEqual(["too_deep"]);
  });

  it("snapshot_too_large", () => {
    const r = compileDefinition({ name: "x", nodes: [code("a", { input: "é".repeat(600) })] }, { ...ctx, limits: { max_plan_bytes: 1000 } });
    expect(r).toMatchObject({ ok: false, errors: [{ code: "snapshot_too_large" }] });
    expect(compileDefinition({ name: "x", nodes: [code("a", { input: "e".repeat(600) })] }, { ...ctx, limits: { max_plan_bytes: 1000 } }).ok).toBe(true);
  });

  it("invalid_input_schema: unsupported keywords and ill-typed ones, with their paths", () => {
    const r = compileDefinition(
      {
        name: "x",
        nodes: [code("a")],
        input_schema: { type: "object", properties: { a: { type: "strin" }, b: { oneOf: [] } }, additionalProperties: {}, minLength: -1, pattern: "(" },
      },
      ctx,
    );
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(new Set(r.errors.map((e) => e.code))).toEqual(new Set(["invalid_input_schema"]));
      expect(r.errors.map((e) => e.path).sort()).toEqual(
        [
          "input_schema.additionalProperties",
          "input_schema.minLength",
          "input_schema.pattern",
          "input_schema.properties.a.type",
          "input_schema.properties.b.oneOf",
        ].sort(),
      );
    }
  });

  it("reports every error of a definition at once", () => {
    const bad = {
      name: "many",
      input_schema: { type: "object", format: "email" },
      nodes: [
        code("a", { handler: "nope" }),
        code("a"),
        code("b", { needs: ["ghost", "c"], input: "${steps.zzz.output}" }),
        code("c", { needs: ["b"] }),
        { id: "m", kind: "map", items: "${input.list}", handler: "fetch", max_fanout: 5000 },
        { id: "s", kind: "subworkflow", workflow: "nowhere" },
      ],
    };
    const found = new Set(codes(bad));
    expect(found).toEqual(
      new Set<CompileErrorCode>([
        "unknown_handler",
        "duplicate_id",
        "unknown_node",
        "cycle",
        "unknown_reference",
        "fanout_too_large",
        "unknown_workflow",
        "invalid_input_schema",
      ]),
    );
  });
});
