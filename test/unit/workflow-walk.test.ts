/**
 * "A workflow node walk over the same definition and the same recorded outputs produces the same
 * node order" (seed 004, minimum contract tests), as a property over random definitions with
 * nested parallel and branch nodes, random needs, random recorded outcomes and random completion
 * orders.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { compileDefinition, progress, runOutcome, SETTLED, type NodeState, type Plan } from "../../machines/workflow/index.js";

/** True about one time in four. */
const rarely = fc.nat(3).map((n) => n === 0);

type Shape =
  | { kind: "code" | "sleep" | "map" | "subworkflow"; coe: boolean }
  | { kind: "parallel"; coe: boolean; branches: Shape[][] }
  | { kind: "branch"; coe: boolean; flag: number; then: Shape[]; else: Shape[] | null };
type Top = { shape: Shape; needs: { back: number; when: "succeeded" | "failed" | "always" }[] };

const shapes = fc.letrec<{ node: Shape; parallel: Shape; branch: Shape; leaf: Shape }>((tie) => ({
  leaf: fc.record({ kind: fc.constantFrom("code" as const, "code" as const, "sleep" as const, "map" as const, "subworkflow" as const), coe: rarely }),
  node: fc.oneof({ depthSize: "small" }, tie("leaf"), tie("leaf"), tie("parallel"), tie("branch")),
  parallel: fc.record({
    kind: fc.constant("parallel" as const),
    coe: rarely,
    branches: fc.array(fc.array(tie("node"), { minLength: 1, maxLength: 3 }), { minLength: 1, maxLength: 3 }),
  }),
  branch: fc.record({
    kind: fc.constant("branch" as const),
    coe: rarely,
    flag: fc.nat(4),
    then: fc.array(tie("node"), { maxLength: 3 }),
    else: fc.option(fc.array(tie("node"), { maxLength: 3 }), { nil: null }) as fc.Arbitrary<Shape[] | null>,
  }),
}));

const tops = fc.array(
  fc.record({
    shape: shapes.node,
    needs: fc.array(fc.record({ back: fc.nat(4), when: fc.constantFrom("succeeded" as const, "failed" as const, "always" as const) }), { maxLength: 2 }),
  }),
  { minLength: 1, maxLength: 6 },
);

/** Turns shapes into a definition; ids n0, n1, … in definition pre-order. */
function definition(top: Top[]): unknown {
  let next = 0;
  const build = (s: Shape): Record<string, unknown> => {
    const id = `n${next++}`;
    const base = { id, ...(s.coe && { continue_on_error: true }) };
    switch (s.kind) {
      case "code":
        return { ...base, kind: "code", handler: "h", input: { v: "${input.v}" } };
      case "sleep":
        return { ...base, kind: "sleep", duration_ms: 10 };
      case "map":
        return { ...base, kind: "map", handler: "h", items: "${input.list}", max_fanout: 10 };
      case "subworkflow":
        return { ...base, kind: "subworkflow", workflow: "child" };
      case "parallel":
        return { ...base, kind: "parallel", branches: s.branches.map((b) => b.map(build)) };
      case "branch": {
        const cond = s.flag === 4 ? { ref: "${input.missing}", op: "truthy" } : { ref: `\${input.flags.${s.flag}}`, op: "truthy" };
        return { ...base, kind: "branch", condition: cond, then: s.then.map(build), ...(s.else && { else: s.else.map(build) }) };
      }
    }
  };
  const ids: string[] = [];
  return {
    name: "random",
    nodes: top.map((t, i) => {
      const node = build(t.shape);
      const needs = t.needs.filter((n) => n.back < i).map((n) => ({ node: ids[i - 1 - n.back] as string, when: n.when }));
      ids.push(node.id as string);
      return needs.length > 0 ? { ...node, needs } : node;
    }),
  };
}

function compile(def: unknown): Plan {
  // Random nesting may go deeper than the default publish limit; depth is not what is tested here.
  const r = compileDefinition(def, { handlers: new Set(["h"]), limits: { max_nesting: 64 } });
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return r.plan;
}

type Recorded = { fails: boolean[]; input: { v: number; flags: boolean[]; list: number[] } };

/**
 * Walks a plan to the end. `choose` picks which active work node completes next; its outcome is
 * the recorded one. Returns the order in which readiness reported nodes (structural nodes settled
 * by `progress` included) and the final states, and checks on the way that a node is reported at
 * most once and only when all its needs are settled.
 */
function walk(plan: Plan, rec: Recorded, choose: (active: string[]) => number) {
  const index = new Map(plan.nodes.map((n, i) => [n.id, i]));
  let states: Record<string, NodeState> = {};
  const reported: string[] = [];
  const active: string[] = [];
  for (let guard = 0; guard < 10_000; guard++) {
    const before = states;
    const step = progress(plan, states, rec.input);
    for (const s of step.settled) reported.push(s.id);
    for (const id of [...step.settled.map((s) => s.id), ...step.ready]) {
      const node = plan.nodes[index.get(id) ?? -1];
      for (const need of node?.needs ?? []) expect(SETTLED.has(step.states[need.node]?.status ?? "pending")).toBe(true);
      expect(before[id]?.status ?? "pending").toBe("pending");
    }
    expect(step.ready).toEqual([...step.ready].sort((a, b) => (index.get(a) ?? 0) - (index.get(b) ?? 0)));
    states = step.states;
    for (const id of step.ready) {
      reported.push(id);
      states[id] = { status: "active" };
      active.push(id);
    }
    if (active.length === 0) break;
    const [id] = active.splice(choose(active) % active.length, 1) as [string];
    const fail = rec.fails[(index.get(id) ?? 0) % rec.fails.length] ?? false;
    states[id] = fail ? { status: "failed" } : { status: "succeeded", output: { of: id, v: rec.input.v } };
  }
  expect(new Set(reported).size).toBe(reported.length);
  return { reported, states };
}

const recorded = fc.record({
  fails: fc.array(rarely, { minLength: 1, maxLength: 40 }),
  input: fc.record({ v: fc.integer(), flags: fc.array(fc.boolean(), { minLength: 4, maxLength: 4 }), list: fc.array(fc.nat(), { maxLength: 3 }) }),
});

describe("workflow walk determinism", () => {
  it("the same definition and recorded outcomes give the same order, and every node ends settled", () => {
    fc.assert(
      fc.property(tops, recorded, fc.array(fc.nat(), { maxLength: 60 }), (top, rec, picks) => {
        const def = definition(top);
        const plan = compile(def);
        const again = compile(JSON.parse(JSON.stringify(def)));
        expect(again.definition_digest_input).toBe(plan.definition_digest_input);

        // A replay (first reported, first completed) is identical on a recompiled plan.
        const fifo = walk(plan, rec, () => 0);
        const replay = walk(again, rec, () => 0);
        expect(replay.reported).toEqual(fifo.reported);
        expect(replay.states).toEqual(fifo.states);

        // Any other completion order reaches the same settled states and the same run outcome.
        let k = 0;
        const random = walk(plan, rec, (active) => (picks[k++] ?? 0) % active.length);
        expect(new Set(random.reported)).toEqual(new Set(fifo.reported));
        expect(random.states).toEqual(fifo.states);
        for (const n of plan.nodes) expect(SETTLED.has(random.states[n.id]?.status ?? "pending")).toBe(true);
        expect(runOutcome(plan, random.states)).toEqual(runOutcome(plan, fifo.states));
        expect(runOutcome(plan, random.states).done).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it("wide fan-out: a 200-wide parallel reports its members in definition order", () => {
    const branches = Array.from({ length: 200 }, (_, i) => [{ id: `w${i}`, kind: "code", handler: "h" }]);
    const plan = compile({ name: "wide", nodes: [{ id: "p", kind: "parallel", branches }] });
    const first = progress(plan, {}, {});
    expect(first.ready).toEqual(branches.map((b) => b[0]?.id));
    const done = Object.fromEntries(first.ready.map((id) => [id, { status: "succeeded" as const }]));
    expect(progress(plan, done, {}).settled).toEqual([{ id: "p", status: "succeeded" }]);
  });
});
