import { describe, expect, it } from "vitest";
import type { ExecuteRequest, Plan } from "../../machines/index.js";
import { executes, plan, runDriver, type Emitted, rootSeed } from "./run-driver.js";

/** Seed 004 ceiling rows on the pure run machine: marks travel in fields, maps drain to a prefix, platform stops win, the wall clock counts from the start. */

const T0 = 1_000_000;

const seed = rootSeed;
/** A child run of `t_p` (its root), started by `t_p`'s node `n`; its parent waits on it. */
const childOf = (id: string) => ({
  run: seed({ id, root_run_id: "t_p", parent_run_id: "t_p", parent_node: "n", depth: 1 }),
  parent: { status: "running", tenant: "t", root_run_id: "t_p", depth: 0, waits: true },
});
const answer = (effects: Emitted[]) => effects.find((e) => e.type === "runway.answer")?.value;
const toParent = (effects: Emitted[]) => effects.find((e) => e.type === "runway.send" && e.to?.kind === "run")?.event;
const aborted = (effects: Emitted[]) => effects.filter((e) => e.channel === "step.abort");

type Driver = ReturnType<typeof runDriver>;

/** The attempt asks to record a tool call's intent, as the executor does before calling. */
function intent(r: Driver, e: ExecuteRequest, key = `${e.node}-${e.item ?? "x"}`) {
  return r.send({
    type: "effect.intent",
    node: e.node,
    ...(e.item !== undefined ? { item: e.item } : {}),
    attempt: e.attempt,
    lease_epoch: e.lease_epoch,
    cancellation_epoch: e.cancellation_epoch,
    key,
    server: "fx",
    tool: "charge",
    class: "non_idempotent",
    arguments: {},
  });
}

const children = (...names: string[]) => ({
  child_ids: Object.fromEntries(names.map((n) => [n, `t_${n}`])),
  child_definitions: { leaf: { name: "leaf", version: 1, digest: "d2" } },
});
const sub = (id: string, over: Record<string, unknown> = {}) => ({ id, kind: "subworkflow", workflow: "leaf", ...over });
const marked = (reason = "limit_reached") => ({ code: reason, message: `the run reached its max_steps (1) before any work`, partial_reason: reason });

describe("a handler or a tool answering a ceiling's words marks nothing (C045 C049 C050)", () => {
  const two = plan({
    name: "w",
    nodes: [
      { id: "a", kind: "code", handler: "h" },
      { id: "b", kind: "code", handler: "h", needs: ["a"] },
    ],
  });

  it("C045 C050 a step failing with code budget_exhausted is a plain node failure: the run fails node_failed, with no partial_reason", () => {
    const r = runDriver(two, {}, T0);
    const [a] = executes(r.send({ type: "run.create", run: seed() }));
    const [b] = executes(r.result(a!, "succeeded", 1));
    const effects = r.result(b!, "failed", undefined, { code: "budget_exhausted", message: "vendor quota spent", retryable: false });
    expect(r.run.lifecycle.status).toBe("failed");
    expect(r.run.error).toMatchObject({ code: "node_failed", nodes: ["b"] });
    expect(r.run.error).not.toHaveProperty("partial_reason");
    expect(r.run.partial_reason).toBeUndefined();
    expect(r.run.nodes.b!.error).toEqual({ code: "budget_exhausted", message: "vendor quota spent" });
    expect(effects.find((e) => e.type === "runway.event" && (e.data as { type: string }).type === "run_failed")!.data).not.toHaveProperty("partial_reason");
  });

  it("C050 an output holding partial_reason (or meta carrying it) is the handler's data: the run succeeds unmarked", () => {
    const r = runDriver(two, {}, T0);
    const [a] = executes(r.send({ type: "run.create", run: seed() }));
    const [b] = executes(r.result(a!, "succeeded", { partial_reason: "limit_reached", meta: { partial_reason: "budget_exhausted" } }));
    r.result(b!, "succeeded", { _meta: { partial_reason: "budget_exhausted" } });
    expect(r.run.lifecycle.status).toBe("succeeded");
    expect(r.run.partial_reason).toBeUndefined();
    expect(r.run.result).toEqual({
      a: { partial_reason: "limit_reached", meta: { partial_reason: "budget_exhausted" } },
      b: { _meta: { partial_reason: "budget_exhausted" } },
    });
  });

  it("C049 a child that failed under the money code with no mark fails its parent node and its parent, not partial", () => {
    const p = plan({ name: "w", nodes: [{ id: "a", kind: "code", handler: "h" }, sub("s", { needs: ["a"] })] });
    const r = runDriver(p, children("s"), T0);
    const [a] = executes(r.send({ type: "run.create", run: seed() }));
    r.result(a!, "succeeded", 1);
    r.send({ type: "child.settled", node: "s", child: "t_s", status: "failed", error: { code: "budget_exhausted", message: "c: vendor quota spent" } });
    expect(r.run.nodes.s!.error).toMatchObject({ code: "child_failed" });
    expect(r.run.nodes.s!.error).not.toHaveProperty("partial_reason");
    expect(r.run.lifecycle.status).toBe("failed");
    expect(r.run.error).toMatchObject({ code: "node_failed", nodes: ["s"] });
    expect(r.run.partial_reason).toBeUndefined();
  });
});

describe("a child's ceiling travels in a field (C046 C051)", () => {
  it("C046 a run stopped by a ceiling before any work fails with the clock in its error's partial_reason, and tells its parent so", () => {
    const p = plan({ name: "leaf", limits: { max_wall_ms: 500 }, nodes: [{ id: "slow", kind: "code", handler: "h" }] });
    const r = runDriver(p, {}, T0);
    const [slow] = executes(r.send({ type: "run.create", ...childOf("t_c") }));
    const effects = r.send({ type: "timer.fired", kind: "ceiling", node: "(run)" }, T0 + 500);
    expect(r.run.lifecycle.status).toBe("failed");
    expect(r.run.error).toMatchObject({ code: "limit_reached", partial_reason: "limit_reached" });
    expect(toParent(effects)).toMatchObject({ type: "child.settled", status: "failed", error: { code: "limit_reached", partial_reason: "limit_reached" } });
    expect(aborted(effects)[0]!.payload).toMatchObject({ attempts: [{ node: slow!.node }] });
  });

  it("C046 a child's marked stop stops its parent node and the parent under the one status rule: after work a partial success, not a tolerated failure", () => {
    const p = plan({
      name: "w",
      nodes: [{ id: "a", kind: "code", handler: "h" }, sub("s", { needs: ["a"] }), { id: "after", kind: "code", handler: "h", needs: ["s"] }],
    });
    const r = runDriver(p, children("s"), T0);
    const [a] = executes(r.send({ type: "run.create", run: seed() }));
    r.result(a!, "succeeded", "A");
    const effects = r.send({ type: "child.settled", node: "s", child: "t_s", status: "failed", error: marked() });
    expect(executes(effects)).toEqual([]);
    expect(r.run.nodes.s!.error).toMatchObject({ code: "limit_reached", partial_reason: "limit_reached" });
    expect(r.run.nodes.after!.s).toBe("cancelled");
    expect(r.run.lifecycle.status).toBe("succeeded");
    expect(r.run.partial_reason).toBe("limit_reached");
    expect(r.run.result).toEqual({ a: "A" });
  });

  it("C046 continue_on_error does not tolerate a child's marked stop; the parent reads the field, not the code: the same code unmarked is tolerated", () => {
    const p = plan({
      name: "w",
      nodes: [sub("s", { continue_on_error: true }), { id: "after", kind: "code", handler: "h", needs: [{ node: "s", when: "always" }] }],
    });
    const stopped = runDriver(p, children("s"), T0);
    stopped.send({ type: "run.create", run: seed() });
    const effects = stopped.send({ type: "child.settled", node: "s", child: "t_s", status: "failed", error: marked("budget_exhausted") });
    expect(executes(effects)).toEqual([]);
    expect(stopped.run.lifecycle.status).toBe("failed");
    // Nothing was done: a failure carrying the child's clock, in the code and in the field.
    expect(stopped.run.error).toMatchObject({ code: "budget_exhausted", partial_reason: "budget_exhausted" });

    const tolerated = runDriver(p, children("s"), T0);
    tolerated.send({ type: "run.create", run: seed() });
    const next = tolerated.send({
      type: "child.settled",
      node: "s",
      child: "t_s",
      status: "failed",
      error: { code: "limit_reached", message: "a handler's words" },
    });
    expect(tolerated.run.nodes.s!.error).toEqual({ code: "child_failed", message: "a handler's words", error_code: "limit_reached" });
    expect(executes(next).map((e) => e.node)).toEqual(["after"]);
  });

  it("C051 a child that succeeded with partial_reason leaves its node succeeded and the walk going; the parent succeeds with the same reason, in a sequence", () => {
    const p = plan({ name: "w", nodes: [sub("s"), { id: "after", kind: "code", handler: "h", needs: ["s"] }] });
    const r = runDriver(p, children("s"), T0);
    r.send({ type: "run.create", run: seed() });
    const [after] = executes(
      r.send({ type: "child.settled", node: "s", child: "t_s", status: "succeeded", result: { x: 1 }, partial_reason: "approval_expired" }),
    );
    expect(after!.node).toBe("after");
    expect(r.run.partial_reason).toBeUndefined();
    r.result(after!, "succeeded", 2);
    expect(r.run.lifecycle.status).toBe("succeeded");
    expect(r.run.partial_reason).toBe("approval_expired");
    expect(r.run.result).toEqual({ s: { x: 1 }, after: 2 });
  });

  it("C051 in a parallel, too; and a partial child run tells its parent the reason", () => {
    const p = plan({
      name: "w",
      nodes: [{ id: "par", kind: "parallel", branches: [[sub("s")], [{ id: "b", kind: "code", handler: "h" }]] }],
    });
    const r = runDriver(p, children("s"), T0);
    const [b] = executes(r.send({ type: "run.create", ...childOf("t_m") }));
    r.send({ type: "child.settled", node: "s", child: "t_s", status: "succeeded", result: 1, partial_reason: "limit_reached" });
    const effects = r.result(b!, "succeeded", 2);
    expect(r.run.lifecycle.status).toBe("succeeded");
    expect(r.run.partial_reason).toBe("limit_reached");
    expect(toParent(effects)).toMatchObject({ type: "child.settled", status: "succeeded", partial_reason: "limit_reached" });
  });
});

describe("a platform stop wins over a ceiling (C052)", () => {
  for (const order of [
    ["ceiling", "stop"],
    ["stop", "ceiling"],
  ] as const)
    for (const arrival of ["ceiling first", "stop first"] as const)
      it(`C052 a parallel with a marked ceiling and a bare platform stop fails the run (declared ${order.join(" then ")}, ${arrival})`, () => {
        const p = plan({
          name: "w",
          nodes: [
            { id: "a", kind: "code", handler: "h" },
            { id: "par", kind: "parallel", needs: ["a"], continue_on_error: true, branches: order.map((k) => [sub(k, { continue_on_error: true })]) },
          ],
        });
        const r = runDriver(p, children("ceiling", "stop"), T0);
        const [a] = executes(r.send({ type: "run.create", run: seed() }));
        r.result(a!, "succeeded", "A");
        const settle = {
          ceiling: () => r.send({ type: "child.settled", node: "ceiling", child: "t_ceiling", status: "failed", error: marked() }),
          stop: () =>
            r.send({ type: "child.settled", node: "stop", child: "t_stop", status: "failed", error: { code: "metering_unavailable", message: "no meter" } }),
        };
        if (arrival === "ceiling first") {
          settle.ceiling();
          // The ceiling drains: the run waits for the branch still in flight.
          expect(r.run.lifecycle.status).toBe("running");
          settle.stop();
        } else {
          settle.stop();
          expect(r.can({ type: "child.settled", node: "ceiling", child: "t_ceiling", status: "failed", error: marked() })).toBe(false);
        }
        expect(r.run.lifecycle.status).toBe("failed");
        expect(r.run.error).toMatchObject({ code: "metering_unavailable", nodes: ["stop"] });
        expect(r.run.partial_reason).toBeUndefined();
      });
});

describe("a call ceiling in a map drains the batch and keeps an ordered prefix (C061 C062 C063)", () => {
  const mapPlan = (width: number, concurrency: number, calls: number): Plan =>
    plan({
      name: "w",
      limits: { max_tool_calls: calls },
      nodes: [{ id: "m", kind: "map", items: "${input.list}", handler: "h", concurrency, max_fanout: 100 }],
    });
  const list = (n: number) => ({ input: { list: Array.from({ length: n }, (_, i) => `v${i}`) } });

  it("C061 the item whose call the ceiling refuses stops the map: nothing more starts, in-flight items finish, the output keeps the prefix before it; the run is partial", () => {
    const r = runDriver(mapPlan(5, 2, 2), {}, T0);
    const [i0, i1] = executes(r.send({ type: "run.create", run: seed(list(5)) }));
    expect(answer(intent(r, i0!))).toEqual({ outcome: "recorded" });
    expect(answer(intent(r, i1!))).toEqual({ outcome: "recorded" });
    const [i2] = executes(r.result(i0!, "succeeded", "r0"));
    expect(i2!.item).toBe(2);
    const refused = intent(r, i2!);
    expect(answer(refused)).toEqual({ outcome: "limit_reached" });
    // Nothing new is offered, and item 1 (in flight, its call made) is not aborted: it drains.
    expect(executes(refused)).toEqual([]);
    expect(aborted(refused)).toEqual([]);
    expect(r.run.lifecycle.status).toBe("running");
    expect(r.run.nodes.m!.map).toMatchObject({ stopped_at: 2 });
    // A late report of the refused attempt is refused too.
    expect(answer(r.result(i2!, "failed", undefined, { code: "terminal", message: "stopped", retryable: false }))).toEqual({ outcome: "stale_lease" });
    r.result(i1!, "succeeded", "r1");
    expect(r.run.lifecycle.status).toBe("succeeded");
    expect(r.run.partial_reason).toBe("limit_reached");
    expect(r.run.result).toEqual({ m: ["r0", "r1"] });
    expect(r.run.usage).toMatchObject({ tool_calls: 2 });
  });

  it("C062 a later item that finished before an earlier item's ceiling stop is dropped: the output is a contiguous prefix with no hole", () => {
    const r = runDriver(mapPlan(3, 3, 2), {}, T0);
    const [i0, i1, i2] = executes(r.send({ type: "run.create", run: seed(list(3)) }));
    intent(r, i0!);
    intent(r, i2!);
    r.result(i2!, "succeeded", "r2");
    expect(answer(intent(r, i1!))).toEqual({ outcome: "limit_reached" });
    r.result(i0!, "succeeded", "r0");
    expect(r.run.lifecycle.status).toBe("succeeded");
    expect(r.run.partial_reason).toBe("limit_reached");
    expect(r.run.result).toEqual({ m: ["r0"] });
  });

  it("C061 a ceiling at the first position keeps nothing: the map did nothing, and a run with no other work fails limit_reached, the clock in its error", () => {
    const r = runDriver(mapPlan(2, 2, 1), {}, T0);
    const [i0, i1] = executes(r.send({ type: "run.create", run: seed(list(2)) }));
    intent(r, i1!);
    expect(answer(intent(r, i0!))).toEqual({ outcome: "limit_reached" });
    r.result(i1!, "succeeded", "r1");
    expect(r.run.nodes.m!.s).toBe("cancelled");
    expect(r.run.lifecycle.status).toBe("failed");
    expect(r.run.error).toMatchObject({ code: "limit_reached", partial_reason: "limit_reached" });
  });

  it("C061 an item retrying when the ceiling answers does not run again; one failed before the stopping position fails the map and the run", () => {
    const p = plan({
      name: "w",
      limits: { max_tool_calls: 1 },
      nodes: [
        {
          id: "m",
          kind: "map",
          items: "${input.list}",
          handler: "h",
          concurrency: 3,
          max_fanout: 10,
          retry: { max_attempts: 3, backoff_ms: 1_000, max_backoff_ms: 1_000 },
        },
      ],
    });
    const r = runDriver(p, {}, T0);
    const [i0, i1, i2] = executes(r.send({ type: "run.create", run: seed(list(3)) }));
    // Item 0 fails for good; item 2 fails retryably and waits on its backoff; item 1 is refused its second call.
    r.result(i0!, "failed", undefined, { code: "terminal", message: "bad item", retryable: false });
    r.result(i2!, "failed", undefined, { code: "retryable", message: "again", retryable: true });
    intent(r, i1!, "first");
    expect(answer(intent(r, i1!, "second"))).toEqual({ outcome: "limit_reached" });
    expect(r.can({ type: "timer.fired", kind: "retry", node: "m", item: 2 }, T0 + 5_000)).toBe(false);
    expect(r.run.nodes.m!.error).toMatchObject({ code: "map_item_failed" });
    expect(r.run.lifecycle.status).toBe("failed");
    expect(r.run.error).toMatchObject({ code: "node_failed", nodes: ["m"] });
  });

  for (const first of ["ceiling", "platform stop"] as const)
    it(`C063 a returned platform stop in the same batch as a call ceiling fails the node and the run with the stop (${first} first)`, () => {
      const r = runDriver(mapPlan(3, 3, 1), {}, T0);
      const [i0, i1, i2] = executes(r.send({ type: "run.create", run: seed(list(3)) }));
      intent(r, i0!);
      r.result(i0!, "succeeded", "r0");
      const stop = () => r.result(i2!, "failed", undefined, { code: "metering_unavailable", message: "cannot serve it", retryable: false });
      if (first === "ceiling") {
        expect(answer(intent(r, i1!))).toEqual({ outcome: "limit_reached" });
        expect(r.run.lifecycle.status).toBe("running");
        stop();
      } else {
        stop();
        // Item 1 comes before the stop, so it finishes (it might return a lower stop, C064): its call meets the ceiling.
        expect(r.run.lifecycle.status).toBe("running");
        expect(answer(intent(r, i1!))).toEqual({ outcome: "limit_reached" });
      }
      expect(r.run.nodes.m!.error).toMatchObject({ code: "metering_unavailable" });
      expect(r.run.lifecycle.status).toBe("failed");
      expect(r.run.error).toMatchObject({ code: "metering_unavailable", nodes: ["m"] });
      expect(r.run.partial_reason).toBeUndefined();
    });
});

describe("the wall clock counts from the start (C075)", () => {
  it("C075 a run queued behind its tenant's cap for ten times its max_wall_ms still runs: the clock starts when it is admitted", () => {
    const wall = 1_000;
    const p = plan({
      name: "w",
      limits: { max_wall_ms: wall },
      nodes: [
        { id: "a", kind: "code", handler: "h" },
        { id: "b", kind: "code", handler: "h", needs: ["a"] },
      ],
    });
    const r = runDriver(p, {}, T0);
    expect(executes(r.send({ type: "run.create", run: seed({ admission: "queued" }) }))).toEqual([]);
    const admittedAt = T0 + 10 * wall;
    const started = r.send({ type: "run.admitted" }, admittedAt);
    expect(started.find((e) => e.name === "ceiling-wall")).toMatchObject({ at: admittedAt + wall });
    const done = (e: ExecuteRequest, at: number) =>
      r.send({ type: "step.result", node: e.node, attempt: e.attempt, lease_epoch: e.lease_epoch, outcome: "succeeded", output: e.node }, at);
    const [a] = executes(started);
    const [b] = executes(done(a!, admittedAt + wall / 2));
    done(b!, admittedAt + wall - 1);
    expect(r.run.lifecycle.status).toBe("succeeded");
    expect(r.run.partial_reason).toBeUndefined();
    expect(r.run.lifecycle.started_at! - r.run.created_at).toBeGreaterThan(wall);
  });
});
