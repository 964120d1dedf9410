import { describe, expect, it } from "vitest";
import {
  compileDefinition,
  joinOutcome,
  progress,
  readiness,
  runOutcome,
  runResult,
  settleSkips,
  stepsScope,
  type NodeState,
  type Plan,
} from "../../machines/workflow/index.js";

const code = (id: string, extra: Record<string, unknown> = {}) => ({ id, kind: "code", handler: "h", ...extra });

function plan(nodes: unknown[], result?: unknown): Plan {
  const r = compileDefinition({ name: "t", nodes, ...(result !== undefined && { result }) }, { handlers: new Set(["h"]) });
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return r.plan;
}

/**
 * Drives a plan to the end the way an engine would: `progress`, then complete the started work
 * nodes one at a time in the order they were reported, each with its scripted outcome.
 */
function run(p: Plan, fails: ReadonlySet<string>, input: unknown = {}) {
  let states: Record<string, NodeState> = {};
  const started: string[] = [];
  const fatal: string[] = [];
  const queue: string[] = [];
  for (;;) {
    const step = progress(p, states, input);
    states = step.states;
    fatal.push(...step.fatal.map((f) => f.id));
    for (const id of step.ready) {
      states[id] = { status: "active" };
      started.push(id);
      queue.push(id);
    }
    const id = queue.shift();
    if (id === undefined) break;
    states[id] = fails.has(id) ? { status: "failed" } : { status: "succeeded", output: `out:${id}` };
  }
  const status = (id: string) => states[id]?.status;
  return { states, started, fatal, status, outcome: runOutcome(p, states) };
}

describe("parallel", () => {
  const par = (coe: boolean, joinCoe = false) =>
    plan([
      {
        id: "p",
        kind: "parallel",
        continue_on_error: joinCoe,
        branches: [
          [code("a1", { continue_on_error: coe }), code("a2")],
          [code("b1"), code("b2")],
        ],
      },
      code("after", { needs: ["p"] }),
    ]);

  it("a failing branch settles its siblings: the other branch still runs, the join fails", () => {
    const r = run(par(false), new Set(["a1"]));
    expect(r.started).toEqual(["a1", "b1", "b2"]);
    expect(r.status("a2")).toBe("skipped");
    expect(r.status("b2")).toBe("succeeded");
    expect(r.status("p")).toBe("failed");
    expect(r.status("after")).toBe("skipped");
    expect(r.outcome).toEqual({ done: true, status: "failed", failed: ["p"] });
  });

  it("continue_on_error on the failing member: its sequence goes on and the join succeeds", () => {
    const r = run(par(true), new Set(["a1"]));
    expect(r.started).toEqual(["a1", "b1", "a2", "b2", "after"]);
    expect(r.status("p")).toBe("succeeded");
    expect(r.outcome).toEqual({ done: true, status: "succeeded", failed: [] });
  });

  it("continue_on_error on the parallel node: the join fails but the run does not", () => {
    const r = run(par(false, true), new Set(["b2"]));
    expect(r.status("p")).toBe("failed");
    expect(r.status("after")).toBe("skipped");
    expect(r.outcome).toMatchObject({ done: true, status: "succeeded" });
  });

  it("an upstream failure skips every branch and the join", () => {
    const p = plan([code("first"), { id: "p", kind: "parallel", needs: ["first"], branches: [[code("x")], [code("y")]] }]);
    const r = run(p, new Set(["first"]));
    expect(r.started).toEqual(["first"]);
    expect([r.status("x"), r.status("y"), r.status("p")]).toEqual(["skipped", "skipped", "skipped"]);
  });

  it("branches advance independently: the second node of one branch is ready while the other is still active", () => {
    const p = par(false);
    const s1 = progress(p, {}, {});
    expect(s1.ready).toEqual(["a1", "b1"]);
    const s2 = progress(p, { a1: { status: "active" }, b1: { status: "succeeded" } }, {});
    expect(s2.ready).toEqual(["b2"]);
  });

  it("joinOutcome: skipped members are fine; a non-join id is a caller error", () => {
    const p = par(false);
    expect(joinOutcome(p, "p", { a1: { status: "succeeded" }, a2: { status: "skipped" }, b1: { status: "succeeded" }, b2: { status: "succeeded" } })).toBe(
      "succeeded",
    );
    expect(joinOutcome(p, "p", { a1: { status: "succeeded" }, a2: { status: "failed" }, b1: { status: "skipped" }, b2: { status: "skipped" } })).toBe("failed");
    expect(() => joinOutcome(p, "a1", {})).toThrow();
  });
});

describe("branch", () => {
  const br = plan([
    code("first"),
    {
      id: "br",
      kind: "branch",
      needs: ["first"],
      condition: { ref: "${input.go}", op: "truthy" },
      then: [code("t1"), code("t2")],
      else: [code("e1")],
    },
    code("after", { needs: ["br"] }),
    code("onFail", { needs: [{ node: "br", when: "failed" }] }),
  ]);

  it("runs exactly one path and skips the other", () => {
    const yes = run(br, new Set(), { go: true });
    expect(yes.started).toEqual(["first", "t1", "t2", "after"]);
    expect(yes.states.br).toEqual({ status: "succeeded", taken: "then" });
    expect([yes.status("e1"), yes.status("br:end"), yes.status("onFail")]).toEqual(["skipped", "succeeded", "skipped"]);
    const no = run(br, new Set(), { go: false });
    expect(no.started).toEqual(["first", "e1", "after"]);
    expect([no.status("t1"), no.status("t2")]).toEqual(["skipped", "skipped"]);
    expect(no.outcome).toMatchObject({ status: "succeeded" });
  });

  it("a failure on the taken path fails the branch end; a `failed` need on the branch handles it", () => {
    const r = run(br, new Set(["t1"]), { go: true });
    expect([r.status("t2"), r.status("br:end"), r.status("after"), r.status("onFail")]).toEqual(["skipped", "failed", "skipped", "succeeded"]);
    expect(r.outcome).toEqual({ done: true, status: "succeeded", failed: [] });
  });

  it("an unreadable condition fails the branch, is reported fatal, and skips both paths", () => {
    const r = run(br, new Set(), {});
    expect(r.fatal).toEqual(["br"]);
    expect([r.status("br"), r.status("t1"), r.status("e1"), r.status("br:end"), r.status("onFail")]).toEqual([
      "failed",
      "skipped",
      "skipped",
      "failed",
      "succeeded",
    ]);
  });

  it("a then-path with no else: taking `else` runs nothing and the branch still completes", () => {
    const p = plan([{ id: "b", kind: "branch", condition: { ref: "${input.x}", op: "eq", value: 1 }, then: [code("t")] }, code("z", { needs: ["b"] })]);
    const r = run(p, new Set(), { x: 2 });
    expect(r.started).toEqual(["z"]);
  });
});

describe("needs", () => {
  it("a `failed` need runs only on failure, and a handled failure does not fail the run", () => {
    const p = plan([code("a"), code("rescue", { needs: [{ node: "a", when: "failed" }] }), code("next", { needs: ["a"] })]);
    const bad = run(p, new Set(["a"]));
    expect(bad.started).toEqual(["a", "rescue"]);
    expect(bad.outcome).toEqual({ done: true, status: "succeeded", failed: [] });
    const good = run(p, new Set());
    expect(good.started).toEqual(["a", "next"]);
    expect(good.status("rescue")).toBe("skipped");
  });

  it("an `always` need runs after success, failure and skip", () => {
    const p = plan([code("a"), code("b", { needs: ["a"] }), code("cleanup", { needs: [{ node: "b", when: "always" }] })]);
    expect(run(p, new Set()).status("cleanup")).toBe("succeeded");
    expect(run(p, new Set(["b"])).status("cleanup")).toBe("succeeded");
    const skipped = run(p, new Set(["a"]));
    expect(skipped.status("b")).toBe("skipped");
    expect(skipped.status("cleanup")).toBe("succeeded");
    expect(skipped.outcome).toEqual({ done: true, status: "failed", failed: ["a"] });
  });

  it("an unhandled failure fails the run even when siblings succeed; continue_on_error tolerates it", () => {
    const p = plan([code("a"), code("b")]);
    expect(run(p, new Set(["b"])).outcome).toEqual({ done: true, status: "failed", failed: ["b"] });
    const q = plan([code("a"), code("b", { continue_on_error: true })]);
    expect(run(q, new Set(["b"])).outcome).toEqual({ done: true, status: "succeeded", failed: [] });
  });
});

describe("readiness and settleSkips", () => {
  const p = plan([code("a"), code("b", { needs: ["a"] }), code("c", { needs: ["b"] }), code("d", { needs: [{ node: "c", when: "always" }] }), code("e")]);

  it("reports ready and skip in plan order; unsettled needs block both", () => {
    expect(readiness(p, {})).toEqual({ ready: ["a", "e"], skip: [] });
    expect(readiness(p, { a: { status: "active" } })).toEqual({ ready: ["e"], skip: [] });
    expect(readiness(p, { a: { status: "failed" } })).toEqual({ ready: ["e"], skip: ["b"] });
  });

  it("applies skips transitively, converging to what repeated readiness gives", () => {
    const start = { a: { status: "failed" as const } };
    const settled = settleSkips(p, start);
    expect(settled.skipped).toEqual(["b", "c"]);
    expect(start).toEqual({ a: { status: "failed" } });
    let manual: Record<string, NodeState> = { ...start };
    for (let r = readiness(p, manual); r.skip.length > 0; r = readiness(p, manual))
      for (const id of r.skip) manual = { ...manual, [id]: { status: "skipped" } };
    expect(settled.states).toEqual(manual);
    expect(readiness(p, settled.states)).toEqual({ ready: ["d", "e"], skip: [] });
  });

  it("runOutcome is not done while a node is pending or active", () => {
    expect(runOutcome(p, {})).toEqual({ done: false });
    expect(
      runOutcome(p, {
        a: { status: "succeeded" },
        b: { status: "succeeded" },
        c: { status: "succeeded" },
        d: { status: "succeeded" },
        e: { status: "active" },
      }),
    ).toEqual({ done: false });
  });

  it("map and subworkflow failures count like any other", () => {
    const q = plan([
      { id: "m", kind: "map", items: "${input.l}", handler: "h", max_fanout: 5 },
      { id: "s", kind: "subworkflow", workflow: "other" },
    ]);
    expect(run(q, new Set(["m", "s"])).outcome).toEqual({ done: true, status: "failed", failed: ["m", "s"] });
  });
});

describe("runResult", () => {
  const p = plan([code("a"), code("b", { needs: ["a"] }), code("c", { needs: ["b"] }), { id: "p", kind: "parallel", branches: [[code("x")]] }]);

  it("by default holds one key per node that produced an output, none for nodes that did not run", () => {
    const r = run(p, new Set(["b"]));
    expect(runResult(p, r.states, { input: {}, steps: stepsScope(r.states) })).toEqual({ ok: true, value: { a: "out:a", x: "out:x" } });
  });

  it("resolves a selector template, and reports an unreadable one", () => {
    const q = plan([code("a"), code("b", { needs: [{ node: "a", when: "always" }] })], { first: "${steps.a.output}", b: "${steps.b.status}" });
    const ok = run(q, new Set(["b"]));
    expect(runResult(q, ok.states, { input: {}, steps: stepsScope(ok.states) })).toEqual({ ok: true, value: { first: "out:a", b: "failed" } });
    const bad = run(q, new Set(["a"]));
    expect(runResult(q, bad.states, { input: {}, steps: stepsScope(bad.states) })).toEqual({ ok: false, code: "reference_unreadable", path: "steps.a.output" });
  });
});
