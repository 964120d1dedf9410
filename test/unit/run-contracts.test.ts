import { describe, expect, it } from "vitest";
import { sweepPlan, type Plan } from "../../machines/index.js";
import { DEFAULT_SWEEP, MAP_OUTPUT_LIMIT } from "../../machines/execution/index.js";
import { isPlatformStop, PLATFORM_STOP_CODES } from "../../machines/workflow/index.js";
import { executes, plan, runDriver, type Emitted, rootSeed } from "./run-driver.js";

/** Seed 004 contract rows on the pure run machine: platform stops, tree shape at create, map output bound, lost dispatch. */

const T0 = 1_000_000;

function runner(p: Plan, extra: Record<string, unknown> = {}) {
  return runDriver(p, extra, T0);
}

const seed = rootSeed;
const childSeed = (over: Record<string, unknown> = {}) => seed({ id: "t_c", root_run_id: "t_r", parent_run_id: "t_p", parent_node: "sub", depth: 2, ...over });
const parentView = (over: Record<string, unknown> = {}) => ({ status: "running", tenant: "t", root_run_id: "t_r", depth: 1, waits: true, ...over });
const answer = (effects: Emitted[]) => effects.find((e) => e.type === "runway.answer")?.value;

describe("platform stops (seed 004: a platform stop is never tolerated)", () => {
  it("the never-tolerated set is one list, and each code in it is recognised", () => {
    for (const code of PLATFORM_STOP_CODES) expect(isPlatformStop(code)).toBe(true);
    for (const code of ["child_failed", "handler_error", "depth_exceeded", "map_item_failed", "fanout_output_too_large", "budget_exhausted", undefined])
      expect(isPlatformStop(code)).toBe(false);
  });

  it("C043 a continue_on_error node that fails reference_unreadable ends the run at once; no node after it starts, not even one that needs it `always`", () => {
    const p = plan({
      name: "w",
      nodes: [
        { id: "bad", kind: "code", handler: "h", input: "${input.missing}", continue_on_error: true },
        { id: "after", kind: "code", handler: "h", needs: [{ node: "bad", when: "always" }] },
        { id: "handled", kind: "code", handler: "h", needs: [{ node: "bad", when: "failed" }] },
      ],
    });
    const r = runner(p);
    const effects = r.send({ type: "run.create", run: seed() });
    expect(executes(effects)).toEqual([]);
    expect(r.run.lifecycle.status).toBe("failed");
    expect(r.run.error).toMatchObject({ code: "reference_unreadable", nodes: ["bad"] });
    expect(r.run.nodes.after!.s).toBe("cancelled");
    expect(r.run.nodes.handled!.s).toBe("cancelled");
  });

  it("C043 a platform stop in one parallel branch stops its running sibling at once (its attempt is aborted and fenced), whatever continue_on_error says", () => {
    const p = plan({
      name: "w",
      nodes: [
        { id: "a", kind: "code", handler: "h" },
        {
          id: "par",
          kind: "parallel",
          needs: ["a"],
          continue_on_error: true,
          branches: [
            [{ id: "slow", kind: "code", handler: "h" }],
            [
              { id: "b", kind: "code", handler: "h" },
              { id: "bad", kind: "code", handler: "h", needs: ["b"], input: "${steps.b.output.nope}", continue_on_error: true },
            ],
          ],
        },
        { id: "last", kind: "code", handler: "h", needs: [{ node: "par", when: "always" }] },
      ],
    });
    const r = runner(p);
    const [a] = executes(r.send({ type: "run.create", run: seed() }));
    const started = executes(r.send({ type: "step.result", node: "a", attempt: a!.attempt, lease_epoch: a!.lease_epoch, outcome: "succeeded", output: 1 }));
    expect(started.map((e) => e.node).sort()).toEqual(["b", "slow"]);
    const b = started.find((e) => e.node === "b")!;
    const slow = started.find((e) => e.node === "slow")!;
    const effects = r.send({ type: "step.result", node: "b", attempt: b.attempt, lease_epoch: b.lease_epoch, outcome: "succeeded", output: 7 });
    expect(executes(effects)).toEqual([]);
    expect(r.run.lifecycle.status).toBe("failed");
    expect(r.run.error).toMatchObject({ code: "reference_unreadable" });
    expect(r.run.nodes.last!.s).toBe("cancelled");
    expect(effects).toContainEqual({
      type: "runway.local",
      channel: "step.abort",
      payload: { run: "t_1", attempts: [{ node: "slow", attempt: slow.attempt, lease_epoch: slow.lease_epoch }], reason: "parent_failed" },
    });
  });

  it("C043 an unreadable branch condition stops the run even under continue_on_error", () => {
    const p = plan({
      name: "w",
      nodes: [
        {
          id: "br",
          kind: "branch",
          continue_on_error: true,
          condition: { ref: "${input.flag.deep}", op: "eq", value: true },
          then: [{ id: "x", kind: "code", handler: "h" }],
          else: [{ id: "y", kind: "code", handler: "h" }],
        },
        { id: "after", kind: "code", handler: "h", needs: [{ node: "br", when: "always" }] },
      ],
    });
    const r = runner(p);
    expect(executes(r.send({ type: "run.create", run: seed() }))).toEqual([]);
    expect(r.run.lifecycle.status).toBe("failed");
    expect(r.run.error).toMatchObject({ code: "condition_unreadable" });
  });

  it("C053 a child that ended under a platform stop fails its parent node with that code, and continue_on_error does not tolerate it; an ordinary child failure stays tolerable", () => {
    const p = plan({
      name: "w",
      nodes: [
        { id: "sub", kind: "subworkflow", workflow: "leaf", continue_on_error: true },
        { id: "after", kind: "code", handler: "h", needs: [{ node: "sub", when: "always" }] },
      ],
    });
    const prepared = { child_ids: { sub: "t_c" }, child_definitions: { leaf: { name: "leaf", version: 1, digest: "d2" } } };
    const stopped = runner(p, prepared);
    stopped.send({ type: "run.create", run: seed() });
    const effects = stopped.send({
      type: "child.settled",
      node: "sub",
      child: "t_c",
      status: "failed",
      error: { code: "reference_unreadable", message: "unreadable reference input.x" },
    });
    expect(executes(effects)).toEqual([]);
    expect(stopped.run.lifecycle.status).toBe("failed");
    expect(stopped.run.error).toMatchObject({ code: "reference_unreadable", nodes: ["sub"] });
    expect(stopped.run.nodes.sub!.error).toMatchObject({ code: "reference_unreadable" });

    const tolerated = runner(p, prepared);
    tolerated.send({ type: "run.create", run: seed() });
    const next = tolerated.send({ type: "child.settled", node: "sub", child: "t_c", status: "failed", error: { code: "node_failed", message: "a: failed" } });
    expect(tolerated.run.nodes.sub!.error).toMatchObject({ code: "child_failed" });
    expect(executes(next).map((e) => e.node)).toEqual(["after"]);
    expect(tolerated.run.lifecycle.status).toBe("running");
  });
});

describe("run.create judges the tree shape and the parent before the run exists", () => {
  const one = plan({ name: "w", nodes: [{ id: "a", kind: "code", handler: "h" }] });

  it("C028 a child whose root, tenant or depth disagrees with its parent's is refused invalid_input, and nothing is created; a root must be its own root", () => {
    for (const [run, parent] of [
      [childSeed({ root_run_id: "t_other" }), parentView()],
      [childSeed({ tenant: "u" }), parentView()],
      [childSeed({ depth: 5 }), parentView()],
      [childSeed({ parent_node: null }), parentView()],
      [seed({ root_run_id: "t_else" }), undefined],
      [seed({ depth: 1 }), undefined],
      [childSeed({ root_run_id: "t_c" }), parentView()],
    ] as const) {
      const r = runner(one);
      const effects = r.send({ type: "run.create", run, ...(parent ? { parent } : {}) });
      expect(answer(effects), JSON.stringify(run)).toMatchObject({ outcome: "invalid_input" });
      expect(effects.filter((e) => e.type !== "runway.answer")).toEqual([]);
      expect(r.snap.value).toBe("new");
      expect(r.run).toBeNull();
    }
  });

  it("C009 a child three levels deep takes its root's id, not its parent's, and is created", () => {
    const r = runner(one);
    r.send({
      type: "run.create",
      run: childSeed({ root_run_id: "t_r", parent_run_id: "t_p", depth: 2 }),
      parent: parentView({ root_run_id: "t_r", depth: 1 }),
    });
    expect(r.run).toMatchObject({ id: "t_c", root_run_id: "t_r", parent_run_id: "t_p", tenant: "t", depth: 2 });
  });

  it("C026 C031 C100 a child whose parent was cancelled (or ended, or no longer waits on it) is refused before it exists", () => {
    const cases: [Record<string, unknown> | null, Record<string, unknown>][] = [
      [parentView({ status: "cancelled" }), { outcome: "parent_cancelled" }],
      [parentView({ status: "succeeded" }), { outcome: "parent_gone", parent_status: "succeeded" }],
      [parentView({ status: "failed" }), { outcome: "parent_gone", parent_status: "failed" }],
      [parentView({ waits: false }), { outcome: "parent_gone", parent_status: "not_waiting" }],
      [null, { outcome: "parent_gone", parent_status: "missing" }],
    ];
    for (const [parent, refusal] of cases) {
      const r = runner(one);
      const effects = r.send({ type: "run.create", run: childSeed(), parent });
      expect(effects).toEqual([{ type: "runway.answer", value: refusal }]);
      expect(r.run).toBeNull();
    }
  });
});

describe("a map's combined output is bounded", () => {
  it("C068 a map whose items' outputs would pass the bound together fails fanout_output_too_large; its other items stop; the head holds none of them", () => {
    const width = 40;
    const p = plan({ name: "w", nodes: [{ id: "m", kind: "map", items: "${input.list}", handler: "h", concurrency: width, max_fanout: width }] });
    const r = runner(p);
    const pending = executes(r.send({ type: "run.create", run: seed({ input: { list: Array.from({ length: width }, (_, i) => i) } }) }));
    expect(pending).toHaveLength(width);
    const chunk = "x".repeat(512 * 1024);
    let effects: Emitted[] = [];
    let sent = 0;
    while (r.run.nodes.m!.s === "active") {
      effects = r.result(pending.shift()!, "succeeded", chunk);
      sent++;
    }
    expect(sent).toBeLessThan(width);
    expect(sent * (chunk.length + 2)).toBeGreaterThan(MAP_OUTPUT_LIMIT);
    expect(r.run.nodes.m!.error).toMatchObject({ code: "fanout_output_too_large" });
    expect(r.run.lifecycle.status).toBe("failed");
    // Item outputs are journal facts, never in the head.
    expect(JSON.stringify(r.run).length).toBeLessThan(16 * 1024);
    const abort = effects.find((e) => e.channel === "step.abort")!.payload as { attempts: unknown[] };
    expect(abort.attempts).toHaveLength(width - sent);
  });
});

describe("a lost dispatch is re-offered once, then fails its attempt (C106 C123 vs C133)", () => {
  const one = plan({ name: "w", nodes: [{ id: "a", kind: "code", handler: "h", retry: { max_attempts: 2, backoff_ms: 0, max_backoff_ms: 0 } }] });

  it("C106 C123 an offer lost twice fails dispatch_lost and follows the retry policy: retried while attempts remain, then the node fails", () => {
    const r = runner(one);
    r.send({ type: "run.create", run: seed() });
    const after = DEFAULT_SWEEP.reoffer_after_ms;
    expect(sweepPlan(r.run, T0 + after)).toEqual([{ action: "reoffer", node: "a" }]);
    r.send({ type: "run.sweep", at: T0 + after }, T0 + after);
    expect(r.run.nodes.a).toMatchObject({ offered: 1, reoffered: true });
    // Still not leased a pass later: the attempt fails and is offered anew (attempt 2), the stale ticket released.
    expect(sweepPlan(r.run, T0 + 2 * after)).toEqual([{ action: "dispatch_lost", node: "a" }]);
    const lost = r.send({ type: "run.sweep", at: T0 + 2 * after }, T0 + 2 * after);
    expect(lost).toContainEqual({ type: "runway.local", channel: "step.lapsed", payload: { ticket: "t_1/a/1" } });
    expect(lost.find((e) => e.channel === "step.ready")!.payload).toMatchObject({ id: "t_1/a/2", attempt: 2 });
    expect(r.run.nodes.a!.step).toMatchObject({ status: "ready", attempt: 1, last_error: { code: "dispatch_lost" } });
    // A grant for the lost attempt arriving late is refused.
    expect(r.send({ type: "step.result", node: "a", attempt: 1, lease_epoch: 1, outcome: "succeeded" }, T0 + 2 * after)).toEqual([
      { type: "runway.answer", value: { outcome: "stale_lease" } },
    ]);
    expect(r.run.nodes.a!.step).toMatchObject({ status: "ready", attempt: 1 });
    // Lost twice more: no attempt left, the node fails dispatch_lost and the run ends; nothing loops.
    r.send({ type: "run.sweep", at: T0 + 3 * after }, T0 + 3 * after);
    r.send({ type: "run.sweep", at: T0 + 4 * after }, T0 + 4 * after);
    expect(r.run.nodes.a).toMatchObject({ s: "failed", error: { code: "dispatch_lost" } });
    expect(r.run.lifecycle.status).toBe("failed");
    expect(sweepPlan(r.run, T0 + 10 * after)).toEqual([]);
  });

  it("C133 a run queued behind its tenant's cap is never failed by a pass, at any age (it only asks its tenant again)", () => {
    const r = runner(one);
    r.send({ type: "run.create", run: seed({ admission: "queued" }) });
    for (const minutes of [10, 60, 24 * 60, 30 * 24 * 60]) {
      expect(sweepPlan(r.run, T0 + minutes * 60_000)).toEqual([{ action: "recheck_admission", tenant: "t" }]);
      expect(r.can({ type: "run.sweep", at: T0 + minutes * 60_000 })).toBe(false);
    }
    expect(r.run.lifecycle.status).toBe("queued");
  });
});
