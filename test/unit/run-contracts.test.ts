import { describe, expect, it } from "vitest";
import { sweepPlan, type Plan } from "../../machines/index.js";
import type { ExecuteRequest } from "../../machines/index.js";
import { DEFAULT_SWEEP, MAP_OUTPUT_LIMIT } from "../../machines/execution/index.js";
import { CHILD_START_CODES, isPlatformStop, PLATFORM_STOP_CODES } from "../../machines/workflow/index.js";
import { writeRefs } from "../../machines/tools/index.js";
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
  // Written out here from seed 004 ("A platform stop is never tolerated"), not read from the list
  // under test: the seed's codes a Runway path produces (issue 41 §3 removed the rest).
  const neverTolerated = [
    "reference_unreadable",
    "condition_unreadable",
    "snapshot_unbuildable",
    "invalid_snapshot",
    "policy_unavailable",
    "metering_unavailable",
  ];
  // How a child's code reads at its parent's node (seed 004, "Child Run rules").
  const atParent = (code: string) => (code === "snapshot_unbuildable" ? "invalid_snapshot" : code);
  // Codes the runtime read and answered: continue_on_error decides them.
  const tolerated = [
    "child_failed",
    "handler_error",
    "depth_exceeded",
    "map_item_failed",
    "fanout_output_too_large",
    "budget_exhausted",
    "node_failed",
    "start_refused",
    "tenant_killed",
    "read_tool_needs_approval",
  ];

  it("the never-tolerated set is the seed's list, and a child ending under each of its codes (and no other) stops a continue_on_error parent; the node's error carries the child's own code", () => {
    expect([...PLATFORM_STOP_CODES].sort()).toEqual([...neverTolerated].sort());
    expect(isPlatformStop(undefined)).toBe(false);
    const p = plan({
      name: "w",
      nodes: [
        { id: "sub", kind: "subworkflow", workflow: "leaf", continue_on_error: true },
        { id: "after", kind: "code", handler: "h", needs: [{ node: "sub", when: "always" }] },
      ],
    });
    const prepared = { child_ids: { sub: "t_c" }, child_definitions: { leaf: { name: "leaf", version: 1, digest: "d2" } } };
    const settle = (code: string) => {
      const r = runner(p, prepared);
      r.send({ type: "run.create", run: seed() });
      const effects = r.send({ type: "child.settled", node: "sub", child: "t_c", status: "failed", error: { code, message: `c: ${code}` } });
      return { r, started: executes(effects).map((e) => e.node) };
    };
    for (const code of neverTolerated) {
      const { r, started } = settle(code);
      expect(started, code).toEqual([]);
      expect(r.run.nodes.sub!.error, code).toMatchObject({ code: atParent(code), error_code: code });
      expect(r.run.lifecycle.status, code).toBe("failed");
      expect(r.run.error, code).toMatchObject({ code: atParent(code), nodes: ["sub"], error_code: code });
    }
    for (const code of tolerated) {
      const { r, started } = settle(code);
      expect(started, code).toEqual(["after"]);
      expect(r.run.nodes.sub!.error, code).toMatchObject({ code: code === "tenant_killed" ? "start_refused" : "child_failed", error_code: code });
      expect(r.run.lifecycle.status, code).toBe("running");
    }
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

describe("a child's start gate (C047, C048)", () => {
  const leaf = plan({ name: "leaf", nodes: [{ id: "work", kind: "code", handler: "h" }] });
  // What the run actor's prepare hands the machine when the pinned plan does not read (actors/run/actor.ts).
  const unreadable: Plan = { plan_version: 1, name: "leaf", nodes: [], definition_digest_input: "" };
  const parentPlan = plan({
    name: "w",
    nodes: [
      { id: "sub", kind: "subworkflow", workflow: "leaf", continue_on_error: true },
      { id: "after", kind: "code", handler: "h", needs: [{ node: "sub", when: "always" }] },
    ],
  });
  const prepared = { child_ids: { sub: "t_c" }, child_definitions: { leaf: { name: "leaf", version: 1, digest: "d2" } } };
  const child = () => childSeed({ root_run_id: "t_1", parent_run_id: "t_1", depth: 1 });
  const parent = () => parentView({ root_run_id: "t_1", depth: 0 });

  /** The child created with its gate's refusal, and the parent told what the child sent it (as JSON, as it crosses). */
  function refusedChild(code: string) {
    const c = runner(code === "snapshot_unbuildable" ? unreadable : leaf);
    const created = c.send({ type: "run.create", run: child(), parent: parent(), refused: { code, message: `gate: ${code}` } });
    const told = created.find((e) => e.type === "runway.send" && e.to?.kind === "run");
    const p = runner(parentPlan, prepared);
    p.send({ type: "run.create", run: seed() });
    const after = told ? p.send(JSON.parse(JSON.stringify(told.event))) : [];
    return { c, created, told, p, started: executes(after).map((e) => e.node) };
  }

  it("C047 a child whose start answers snapshot_unbuildable or policy_unavailable stops its continue_on_error parent (invalid_snapshot, policy_unavailable); a killed tenant's refusal answers start_refused, which the parent tolerates", () => {
    expect([...CHILD_START_CODES].sort()).toEqual(["policy_unavailable", "snapshot_unbuildable", "tenant_killed"]);
    for (const [code, atNode, stops] of [
      ["snapshot_unbuildable", "invalid_snapshot", true],
      ["policy_unavailable", "policy_unavailable", true],
      ["tenant_killed", "start_refused", false],
    ] as const) {
      const { c, created, told, p, started } = refusedChild(code);
      // The child exists, already failed under its gate's code, and ran nothing.
      expect(c.run.lifecycle.status, code).toBe("failed");
      expect(c.run.error, code).toMatchObject({ code });
      expect(executes(created), code).toEqual([]);
      expect(told?.event, code).toMatchObject({ type: "child.settled", node: "sub", child: "t_c", status: "failed", error: { code } });
      expect(p.run.nodes.sub!.error, code).toMatchObject({ code: atNode, error_code: code });
      if (stops) {
        expect(started, code).toEqual([]);
        expect(p.run.lifecycle.status, code).toBe("failed");
        expect(p.run.error, code).toMatchObject({ code: atNode, nodes: ["sub"], error_code: code });
        expect(p.run.nodes.after!.s, code).toBe("cancelled");
      } else {
        expect(started, code).toEqual(["after"]);
        expect(p.run.lifecycle.status, code).toBe("running");
      }
    }
  });

  it("C047 a refused start of a child whose parent was cancelled meanwhile is the parent's refusal: nothing is created", () => {
    const c = runner(leaf);
    const effects = c.send({
      type: "run.create",
      run: child(),
      parent: parentView({ root_run_id: "t_1", depth: 0, status: "cancelled" }),
      refused: { code: "policy_unavailable", message: "gate" },
    });
    expect(effects).toEqual([{ type: "runway.answer", value: { outcome: "parent_cancelled" } }]);
    expect(c.run).toBeNull();
  });

  it("C048 a child ended at its create answers started with its code as error_code, and its parent's node carries the child's own code whatever it reads as; a top-level run has no child gate", () => {
    const { c, created, p } = refusedChild("policy_unavailable");
    expect(answer(created)).toEqual({
      outcome: "started",
      run: expect.objectContaining({ id: "t_c", status: "failed", started_at: null }),
      error_code: "policy_unavailable",
    });
    expect(c.run.nodes.work).toEqual({ s: "pending" });
    expect(p.run.nodes.sub!.error).toMatchObject({ code: "policy_unavailable", error_code: "policy_unavailable" });
    // A child that ran and failed: the node reads child_failed, and the child's own code rides beside it.
    const q = runner(parentPlan, prepared);
    q.send({ type: "run.create", run: seed() });
    q.send({ type: "child.settled", node: "sub", child: "t_c", status: "failed", error: { code: "node_failed", message: "work: boom", nodes: ["work"] } });
    expect(q.run.nodes.sub!.error).toMatchObject({ code: "child_failed", error_code: "node_failed" });
    expect(q.run.lifecycle.status).toBe("running");
    // Only a child's create reads a gate: a top-level run given one starts as usual.
    const top = runner(leaf);
    const started = top.send({ type: "run.create", run: seed(), refused: { code: "policy_unavailable", message: "gate" } });
    expect(answer(started)).toMatchObject({ outcome: "started", run: { status: "running" } });
    expect(answer(started)).not.toHaveProperty("error_code");
    expect(executes(started).map((e) => e.node)).toEqual(["work"]);
  });
});

describe("a workflow's refs (C074)", () => {
  it("C074 writeRefs: a write with an item_kind adds one ref per returned row with an id, in returned order; a read, a node with no item_kind and a row without an id add none", () => {
    expect(writeRefs("lead", "non_idempotent", { id: "L1", name: "x" })).toEqual([{ kind: "lead", id: "L1" }]);
    expect(writeRefs("lead", "idempotent", [{ id: "L2" }, { name: "no id" }, { id: 7 }, "text", { id: "" }])).toEqual([
      { kind: "lead", id: "L2" },
      { kind: "lead", id: "7" },
    ]);
    expect(writeRefs("lead", "non_idempotent", { items: [{ id: "b" }, { id: "a" }], total: 2 })).toEqual([
      { kind: "lead", id: "b" },
      { kind: "lead", id: "a" },
    ]);
    expect(writeRefs("lead", "read_only", { id: "L1" })).toEqual([]);
    expect(writeRefs(undefined, "non_idempotent", { id: "L1" })).toEqual([]);
    expect(writeRefs("lead", "non_idempotent", { name: "no id" })).toEqual([]);
    expect(writeRefs("lead", "non_idempotent", null)).toEqual([]);
  });

  it("C074 a run's refs are its tool nodes' in declaration order (not finish order), each (kind, id) once with the first kept; a failed call adds none, even if its report names some", () => {
    const p = plan({
      name: "w",
      nodes: [
        { id: "a", kind: "tool", server: "crm", tool: "create", item_kind: "lead" },
        { id: "b", kind: "tool", server: "crm", tool: "create", item_kind: "lead" },
        { id: "c", kind: "tool", server: "crm", tool: "create", item_kind: "lead", continue_on_error: true },
        { id: "d", kind: "tool", server: "crm", tool: "create", item_kind: "deal" },
        { id: "e", kind: "code", handler: "h" },
      ],
    });
    const r = runner(p);
    const started = executes(r.send({ type: "run.create", run: seed() }));
    const by = (id: string) => started.find((e) => e.node === id)!;
    expect(by("a").tool).toEqual({ server: "crm", tool: "create", item_kind: "lead" });
    const report = (id: string, outcome: "succeeded" | "failed", refs: string[], kind = "lead") =>
      r.send({
        type: "step.result",
        node: id,
        attempt: by(id).attempt,
        lease_epoch: by(id).lease_epoch,
        outcome,
        ...(outcome === "succeeded" ? { output: { ok: true } } : { error: { code: "tool_error", message: "boom", retryable: false } }),
        refs: refs.map((ref) => ({ kind, id: ref })),
      });
    report("d", "succeeded", ["L1"], "deal");
    report("b", "succeeded", ["L2", "L1", "L3"]);
    report("c", "failed", ["L9"]);
    report("a", "succeeded", ["L1"]);
    r.result(by("e"), "succeeded", { id: "not a tool" });
    expect(r.run.lifecycle.status).toBe("succeeded");
    expect(r.run.nodes.c!.refs).toBeUndefined();
    expect(r.run.refs).toEqual([
      { kind: "lead", id: "L1" },
      { kind: "lead", id: "L2" },
      { kind: "lead", id: "L3" },
      { kind: "deal", id: "L1" },
    ]);
  });

  it("C074 a run whose tool nodes wrote nothing has no refs", () => {
    const r = runner(plan({ name: "w", nodes: [{ id: "a", kind: "tool", server: "crm", tool: "find", item_kind: "lead" }] }));
    const [a] = executes(r.send({ type: "run.create", run: seed() }));
    r.result(a!, "succeeded", { id: "L1" });
    expect(r.run.lifecycle.status).toBe("succeeded");
    expect(r.run).not.toHaveProperty("refs");
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

describe("among a map's returned platform stops, the lowest input position's wins, whatever the finish order (C064)", () => {
  const map = (width: number, concurrency: number) =>
    plan({
      name: "w",
      nodes: [
        { id: "m", kind: "map", items: "${input.list}", handler: "h", concurrency, max_fanout: width, continue_on_error: true },
        { id: "after", kind: "code", handler: "h", needs: [{ node: "m", when: "always" }] },
      ],
    });
  const list = (width: number) => seed({ input: { list: Array.from({ length: width }, (_, i) => i) } });
  const stop = (code: string, i: number) => ({ code, message: `item ${i} could not be served`, retryable: false });

  for (const order of [
    [0, 1, 2],
    [0, 2, 1],
    [1, 0, 2],
    [1, 2, 0],
    [2, 0, 1],
    [2, 1, 0],
  ])
    it(`C064 items 0 and 2 return platform stops and item 1 succeeds, finishing ${order.join(", ")}: the node and the run fail with item 0's stop`, () => {
      const r = runner(map(3, 3));
      const batch = executes(r.send({ type: "run.create", run: list(3) }));
      expect(batch.map((e) => e.item)).toEqual([0, 1, 2]);
      const codes: Record<number, string> = { 0: "policy_unavailable", 2: "metering_unavailable" };
      const started = order.flatMap((i) =>
        executes(codes[i] ? r.result(batch[i]!, "failed", undefined, stop(codes[i], i)) : r.result(batch[i]!, "succeeded", i)),
      );
      expect(started).toEqual([]);
      expect(r.run.nodes.m!.error).toMatchObject({ code: "policy_unavailable", message: expect.stringContaining("item #0") });
      expect(r.run.lifecycle.status).toBe("failed");
      expect(r.run.error).toMatchObject({ code: "policy_unavailable", nodes: ["m"] });
    });

  it("C064 a later item's stop that returns first stops the items after it and starts nothing; the items before it finish, and the lowest stop among them wins", () => {
    const r = runner(map(5, 4));
    const batch = executes(r.send({ type: "run.create", run: list(5) }));
    expect(batch.map((e) => e.item)).toEqual([0, 1, 2, 3]);
    const first = r.result(batch[2]!, "failed", undefined, stop("metering_unavailable", 2));
    expect(executes(first)).toEqual([]);
    expect(
      first.filter((e) => e.channel === "step.abort").flatMap((e) => (e.payload as { attempts: { item?: number }[] }).attempts.map((a) => a.item)),
    ).toEqual([3]);
    expect(r.run.lifecycle.status).toBe("running");
    expect(answer(r.result(batch[3]!, "failed", undefined, stop("policy_unavailable", 3)))).toMatchObject({ outcome: expect.stringMatching(/^stale/) });
    expect(executes(r.result(batch[1]!, "failed", undefined, stop("condition_unreadable", 1)))).toEqual([]);
    expect(r.run.lifecycle.status).toBe("running");
    r.result(batch[0]!, "succeeded", 0);
    expect(r.run.nodes.m!.error).toMatchObject({ code: "condition_unreadable", message: expect.stringContaining("item #1") });
    expect(r.run.lifecycle.status).toBe("failed");
    expect(r.run.error).toMatchObject({ code: "condition_unreadable", nodes: ["m"] });
  });

  it("C064 a stop held for the items before it, released as a call ceiling drains the run, stops the run at once: a node still running is aborted", () => {
    const p = plan({
      name: "w",
      limits: { max_tool_calls: 1 },
      nodes: [
        { id: "m", kind: "map", items: "${input.list}", handler: "h", concurrency: 2, max_fanout: 2 },
        { id: "other", kind: "code", handler: "h" },
      ],
    });
    const r = runner(p);
    const started = executes(r.send({ type: "run.create", run: list(2) }));
    const [i0, i1] = started.filter((e) => e.node === "m");
    const other = started.find((e) => e.node === "other")!;
    const call = (e: ExecuteRequest) =>
      r.send({
        type: "effect.intent",
        node: e.node,
        ...(e.item !== undefined ? { item: e.item } : {}),
        attempt: e.attempt,
        lease_epoch: e.lease_epoch,
        cancellation_epoch: e.cancellation_epoch,
        key: `${e.node}-${e.item ?? "x"}`,
        server: "fx",
        tool: "t",
        class: "idempotent",
        arguments: {},
      });
    expect(answer(call(other))).toMatchObject({ outcome: "recorded" });
    r.result(i1!, "failed", undefined, stop("metering_unavailable", 1));
    expect(r.run.lifecycle.status).toBe("running");
    const refused = call(i0!);
    expect(answer(refused)).toEqual({ outcome: "limit_reached" });
    expect(r.run.lifecycle.status).toBe("failed");
    expect(r.run.error).toMatchObject({ code: "metering_unavailable", nodes: ["m"] });
    expect(
      refused.filter((e) => e.channel === "step.abort").flatMap((e) => (e.payload as { attempts: { node: string }[] }).attempts.map((a) => a.node)),
    ).toContain("other");
  });

  it("C064 a stop held for the items before it still wins when the run's wall clock runs out first", () => {
    const p = plan({
      name: "w",
      limits: { max_wall_ms: 1_000 },
      nodes: [{ id: "m", kind: "map", items: "${input.list}", handler: "h", concurrency: 2, max_fanout: 2 }],
    });
    const r = runner(p);
    const [i0, i1] = executes(r.send({ type: "run.create", run: list(2) }, T0));
    r.result(i1!, "failed", undefined, stop("metering_unavailable", 1));
    expect(r.run.lifecycle.status).toBe("running");
    r.send({ type: "timer.fired", kind: "ceiling", node: "(run)" }, T0 + 1_000);
    expect(r.run.lifecycle.status).toBe("failed");
    expect(r.run.error).toMatchObject({ code: "metering_unavailable", nodes: ["m"] });
    expect(r.run.partial_reason).toBeUndefined();
    expect(answer(r.result(i0!, "failed", undefined, stop("policy_unavailable", 0)))).toMatchObject({ outcome: expect.stringMatching(/^stale/) });
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
