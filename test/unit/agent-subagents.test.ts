import { describe, expect, it } from "vitest";
import type { ExecuteRequest } from "../../machines/index.js";
import { inputTokenBound, subagentCeiling, turnCents } from "../../actors/agent/money.js";
import { executes, plan, runDriver, type Emitted, rootSeed } from "./run-driver.js";

/**
 * Subagents on the pure run machine (issue 38 §4): a delegation starts its child once (keyed by
 * the call), parks the agent's step until the child's end, which is journaled as the call's
 * receipt and offered back to the agent; and the pure money policies the loop uses.
 */

const HELPER = { name: "helper", version: 1, digest: "d".repeat(64) };
const CHILD = "t1_child0001";
const KEY = "t_1:ask:turn0:abc";

const p = plan({
  name: "boss",
  nodes: [
    { id: "ask", kind: "agent", model: "scripted/m", instructions: "go", agents: ["helper"], retry: { max_attempts: 1, backoff_ms: 0, max_backoff_ms: 0 } },
  ],
});

const fence = (x: ExecuteRequest) => ({ node: x.node, attempt: x.attempt, lease_epoch: x.lease_epoch, cancellation_epoch: x.cancellation_epoch });
const answer = (effects: Emitted[]) => effects.find((e) => e.type === "runway.answer")?.value;
const call = (x: ExecuteRequest, workflow = "helper") => ({
  type: "effect.child",
  ...fence(x),
  key: KEY,
  workflow,
  input: { task: "sum" },
  turn: 0,
  cost_ceiling_cents: 40,
});

function delegated() {
  const r = runDriver(p, { child_definitions: { helper: HELPER }, subagent_child_id: CHILD }, 1_000_000);
  const x = executes(r.send({ type: "run.create", run: { ...rootSeed(), cost_ceiling_cents: 100 } }))[0]!;
  expect(x.agent?.agents).toEqual(["helper"]);
  return { r, x, asked: r.send(call(x)) };
}

describe("G7 a subagent's tools", () => {
  const scoped = plan({
    name: "boss",
    nodes: [{ id: "ask", kind: "agent", model: "scripted/m", instructions: "go", tools: ["fx/get", "fx/set", "fx/del"], agents: ["helper"] }],
  });

  it("G7 38.5 are its own within its delegator's: the child carries the delegating node's tools, narrowed by its parent's own scope, and its agents see only their tools within it", () => {
    // The parent itself runs under a scope (it is a subagent too): the child may hold only what both allow.
    const r = runDriver(scoped, { child_definitions: { helper: HELPER }, subagent_child_id: CHILD }, 1_000_000);
    const x = executes(r.send({ type: "run.create", run: { ...rootSeed(), tool_scope: ["fx/get", "fx/set", "other/x"] } }))[0]!;
    // The parent's model sees its tools within its own scope, and its calls carry the scope.
    expect(x.agent?.tools).toEqual(["fx/get", "fx/set"]);
    expect(x.tool_scope).toEqual(["fx/get", "fx/set", "other/x"]);
    const asked = r.send({ ...call(x), cost_ceiling_cents: undefined });
    const create = asked.find((e) => e.type === "runway.send") as { event: { run: Record<string, unknown> } } | undefined;
    expect(create?.event.run.tool_scope).toEqual(["fx/get", "fx/set"]);

    // The child, an agent listing a wider set, sees only the intersection.
    const helper = plan({
      name: "helper",
      nodes: [{ id: "work", kind: "agent", model: "scripted/m", instructions: "help", tools: ["fx/set", "fx/del", "fx/get"] }],
    });
    const child = runDriver(helper, {}, 1_000_000);
    const y = executes(child.send({ type: "run.create", run: { ...rootSeed({ id: CHILD, root_run_id: CHILD }), tool_scope: ["fx/get", "fx/set"] } }))[0]!;
    expect(y.agent?.tools).toEqual(["fx/set", "fx/get"]);
    expect(y.tool_scope).toEqual(["fx/get", "fx/set"]);
  });

  it("G7 a run with no scope passes none down to a subworkflow, and a scoped one passes its own", () => {
    const sub = plan({ name: "outer", nodes: [{ id: "inner", kind: "subworkflow", workflow: "helper" }] });
    for (const scope of [undefined, ["fx/get"]]) {
      const r = runDriver(sub, { child_definitions: { helper: HELPER }, child_ids: { inner: CHILD } }, 1_000_000);
      const effects = r.send({ type: "run.create", run: { ...rootSeed(), ...(scope ? { tool_scope: scope } : {}) } });
      const create = effects.find((e) => e.type === "runway.send") as { event: { run: Record<string, unknown> } } | undefined;
      expect(create?.event.run.tool_scope).toEqual(scope);
    }
  });
});

describe("an agent's subagent call", () => {
  it("38.5 starts the child once (its input the arguments, its ceiling the slice), parks the step; the child's end is the call's receipt and the step is offered again", () => {
    const { r, x, asked } = delegated();
    expect(answer(asked)).toEqual({ outcome: "awaiting_subagent", child: CHILD });
    const create = asked.find((e) => e.type === "runway.send") as { to: { id: string }; event: { run: Record<string, unknown> } } | undefined;
    expect(create?.to.id).toBe(CHILD);
    expect(create?.event.run).toMatchObject({
      parent_run_id: "t_1",
      parent_node: "ask",
      depth: 1,
      definition: HELPER,
      input: { task: "sum" },
      cost_ceiling_cents: 40,
    });
    expect(r.run.nodes.ask).toMatchObject({ s: "active", child: CHILD, parks: 1, subagent: { key: KEY, workflow: "helper", turn: 0 } });
    // The parked attempt is gone: asked again by it, the call is stale; nothing is offered while the child runs.
    expect(answer(r.send(call(x)))).toEqual({ outcome: "stale_lease" });
    expect(executes(asked)).toEqual([]);
    // However long the child runs, the sweep sees nothing lost: the parked step is not a lost offer.
    expect(r.can({ type: "run.sweep", at: 1_000_000 + 3_600_000 })).toBe(false);
    const ended = r.send({ type: "child.settled", node: "ask", child: CHILD, status: "succeeded", result: { ask: "42" } });
    expect(ended.filter((e) => e.type === "runway.journal").map((e) => e.data)).toContainEqual(
      expect.objectContaining({ t: "receipt", key: KEY, state: "observed", value: { status: "succeeded", result: { ask: "42" } } }),
    );
    const y = executes(ended)[0]!;
    expect(y).toMatchObject({ node: "ask", attempt: 2 });
    expect(r.run.nodes.ask!.subagent).toBeUndefined();
    // The next attempt's call meets the stored end: no second child.
    const again = r.send(call(y));
    expect(answer(again)).toEqual({ outcome: "observed", value: { status: "succeeded", result: { ask: "42" } } });
    expect(again.some((e) => e.type === "runway.send")).toBe(false);
  });

  it("G7 no subagent past the depth limit: an agent of a run at depth 5 is refused depth_exceeded, and nothing is started (its capabilities and budget: the 38.5 tests)", () => {
    const r = runDriver(p, { child_definitions: { helper: HELPER }, subagent_child_id: CHILD }, 1_000_000);
    // A child at the depth limit (its parent one level up, waiting on it).
    const seed = rootSeed({ root_run_id: "t_p", parent_run_id: "t_p", parent_node: "n", depth: 5 });
    const x = executes(r.send({ type: "run.create", run: seed, parent: { status: "running", tenant: "t", root_run_id: "t_p", depth: 4, waits: true } }))[0]!;
    const deep = r.send(call(x));
    expect(answer(deep)).toMatchObject({ outcome: "refused", code: "depth_exceeded" });
    expect(deep.some((e) => e.type === "runway.send")).toBe(false);
  });

  it("38.5 a definition the node does not list is refused, never started", () => {
    const r = runDriver(p, { child_definitions: { helper: HELPER }, subagent_child_id: CHILD }, 1_000_000);
    const x = executes(r.send({ type: "run.create", run: rootSeed() }))[0]!;
    const refused = r.send(call(x, "stranger"));
    expect(answer(refused)).toMatchObject({ outcome: "refused", code: "unknown_workflow" });
    expect(refused.some((e) => e.type === "runway.send")).toBe(false);
  });

  it("38.5 a failed child is the call's (failed) result, not the agent's failure", () => {
    const { r } = delegated();
    const ended = r.send({ type: "child.settled", node: "ask", child: CHILD, status: "failed", error: { code: "budget_exhausted", message: "spent" } });
    expect(ended.filter((e) => e.type === "runway.journal").map((e) => e.data)).toContainEqual(
      expect.objectContaining({ key: KEY, value: { status: "failed", error: { code: "budget_exhausted", message: "spent" } } }),
    );
    expect(r.run.nodes.ask!.s).toBe("active");
  });
});

describe("money policies of the agent loop", () => {
  it("38.4 a turn costs its tokens at the price, rounded up to a whole cent; no tokens cost nothing", () => {
    const price = { input_cents_per_mtok: 100_000, output_cents_per_mtok: 200_000 };
    expect(turnCents(price, { input_tokens: 20, output_tokens: 10 })).toBe(4);
    expect(turnCents(price, { input_tokens: 1, output_tokens: 0 })).toBe(1);
    expect(turnCents(price, { input_tokens: 0, output_tokens: 0 })).toBe(0);
    expect(turnCents({ input_cents_per_mtok: 15, output_cents_per_mtok: 60 }, { input_tokens: 1_000_000, output_tokens: 1_000_000 })).toBe(75);
  });

  it("38.4 the reservation's input bound is at least the request's UTF-8 bytes", () => {
    const messages = [{ role: "user", content: "héllo wörld" }];
    expect(inputTokenBound({ messages })).toBeGreaterThanOrEqual(new TextEncoder().encode("héllo wörld").length + 16);
  });

  it("38.5 a subagent's ceiling is what its tree spent plus half of what is left, never above the tree's", () => {
    expect(subagentCeiling({ ceiling_cents: 1_000, spent_cents: 3 })).toBe(3 + 498);
    expect(subagentCeiling({ ceiling_cents: 100, spent_cents: 100 })).toBe(100);
    expect(subagentCeiling({ ceiling_cents: 100, spent_cents: 130 })).toBe(100);
    expect(subagentCeiling({ ceiling_cents: 0, spent_cents: 0 })).toBe(0);
  });
});
