import { beforeAll, expect, it } from "vitest";
import { UsageMeter } from "../../actors/index.js";
import { workflowWorld, type RunAnswer } from "./workflow-support.js";

/** Subagents: an agent delegates to another agent definition (a child run), within its tools and a slice of its money. */
const world = workflowWorld({ name: "agent-subagents" });
const TENANT = "tsub";
/** 0.1 cent a token, in and out. */
const PRICE = { input_cents_per_mtok: 100_000, output_cents_per_mtok: 100_000 };

type Ended = RunAnswer & { parent_run_id?: string; usage?: { steps: number; tool_calls: number; cost_cents?: number } };
type Line = { kind: string; server?: string; tool?: string; state?: string; result?: unknown; cost_cents?: number };

const client = () => world.clientFor(TENANT);

beforeAll(async () => {
  expect((await world.client.createTenant(TENANT)).outcome).toBe("created");
  // The boss delegates in turn 0 and answers with what it got in turn 1; the helper answers at once.
  const boss = {
    turns: [
      { tool_calls: [{ name: "agent__helper", arguments: { task: "add 40 and 2" } }], usage: { input_tokens: 20, output_tokens: 10 } },
      { text: "The helper says 42.", usage: { input_tokens: 40, output_tokens: 10 } },
    ],
  };
  const helper = { turns: [{ text: "42", usage: { input_tokens: 20, output_tokens: 10 } }] };
  for (const [name, script] of [
    ["boss", boss],
    ["helper", helper],
  ] as const) {
    const put = await client().putModelProvider({ name, kind: "scripted", script, prices: { m1: PRICE } });
    expect(put.outcome).toBe("created");
  }
}, 60_000);

const agent = (model: string, extra: Record<string, unknown> = {}) => ({
  id: "ask",
  kind: "agent",
  model,
  instructions: "Answer.",
  input: "${input.task}",
  ...extra,
});

async function publish(def: object): Promise<Record<string, unknown>> {
  return client().putDefinition(def) as Promise<Record<string, unknown>>;
}

it("G7 38.5 a subagent holds no more tools than its delegator: a wider one is published, and its call outside the delegator's tools fails tool_not_allowed (an unpublished subagent is refused unknown_workflow)", async () => {
  // The helper calls a tool the boss does not list (the boss lists none).
  expect(
    (await publish({ name: "helper", nodes: [{ id: "set", kind: "tool", server: "fx", tool: "set_value", arguments: { key: "k", value: "v" } }] })).outcome,
  ).toMatch(/published|unchanged/);
  expect((await publish({ name: "narrow-boss", nodes: [agent("boss/m1", { agents: ["helper"] })] })).outcome).toBe("published");
  const started = await client().startRun({ definition: "narrow-boss", input: { task: "set it" } });
  expect(started.outcome).toBe("started");
  const run = (await world.settled((started.run as RunAnswer).id, client())) as Ended;
  // The child failed for the tool it may not use; the boss heard it as the delegation's error answer and answered.
  expect(run.status, JSON.stringify(run)).toBe("succeeded");
  const listed = await client().listRuns({ limit: 500 });
  const child = (listed.runs as Ended[]).find((r) => r.parent_run_id === run.id)!;
  expect(child.status).toBe("failed");
  const events = (await client().runEvents(child.id)).events as { type: string; error?: { code: string } }[];
  expect(events.find((e) => e.type === "step_failed")?.error?.code).toBe("tool_not_allowed");

  const unknown = await publish({ name: "lonely-boss", nodes: [agent("boss/m1", { agents: ["nobody-here"] })] });
  expect(unknown.outcome).toBe("invalid_definition");
  expect((unknown.errors as { code: string; path: string }[]).map((e) => [e.code, e.path])).toEqual([["unknown_workflow", "nodes[0].agents[0]"]]);
  // A bad `agents` entry is refused by shape, never a crash.
  const bad = await publish({ name: "bad-boss", nodes: [agent("boss/m1", { agents: ["Not A Name"] })] });
  expect(bad.outcome).toBe("invalid_definition");
});

it("38.5 a subagent's result returns to the model as the tool's result, and its unused budget returns to the parent: spent = the parent's turns + the child's actual spend, not its slice", async () => {
  expect((await publish({ name: "helper", nodes: [agent("helper/m1")] })).outcome).toMatch(/published|unchanged/);
  expect((await publish({ name: "boss", limits: { max_cost_cents: 1_000 }, nodes: [agent("boss/m1", { agents: ["helper"] })] })).outcome).toMatch(
    /published|unchanged/,
  );
  const started = await client().startRun({ definition: "boss", input: { task: "add 40 and 2" } });
  expect(started.outcome).toBe("started");
  const run = (await world.settled((started.run as RunAnswer).id, client())) as Ended;
  expect(run.status, JSON.stringify(run)).toBe("succeeded");
  expect(run.result).toEqual({ ask: "The helper says 42." });

  // The child: a run of `helper` below the boss, given the model's arguments as its input.
  const listed = await client().listRuns({ limit: 500 });
  const child = (listed.runs as Ended[]).find((r) => r.parent_run_id === run.id);
  expect(child, "the subagent's child run").toBeDefined();
  expect(child!.status).toBe("succeeded");
  expect(child!.result).toEqual({ ask: "42" });

  // The delegation is a call in the boss's trajectory: its receipt is the child's end.
  const t = await client().trajectory(run.id);
  const lines = t.lines as Line[];
  const delegated = lines.filter((l) => l.kind === "tool_call" && l.server === "agent");
  expect(delegated.map((l) => [l.tool, l.state])).toEqual([["helper", "observed"]]);
  expect(delegated[0]!.result).toEqual({ status: "succeeded", result: { ask: "42" } });

  // Money: boss turns 3 + 5 cents, helper's turn 3 cents. The helper's slice was about half the
  // tree's remainder (hundreds of cents); what it did not spend was never taken from the boss.
  const bossTurns = lines.filter((l) => l.kind === "model_turn").map((l) => l.cost_cents);
  expect(bossTurns).toEqual([3, 5]);
  expect(run.usage?.cost_cents).toBe(8);
  expect(child!.usage?.cost_cents).toBe(3);
  expect(await new UsageMeter(world.nc).spentByTree(TENANT, run.id)).toBe(8 + 3);
}, 60_000);

it("G7 38.5 a subagent spends only its slice (half of what its tree has left): over it, the child fails budget_exhausted without asking its model, and the parent's model reads the failure and goes on", async () => {
  // A turn with no max_tokens reserves about 420 cents (4,096 output tokens at 0.1 cent, plus its
  // input): under 600 the boss's turns fit, but the helper's slice (3 + 597 / 2 = 301) does not.
  expect((await publish({ name: "helper", nodes: [agent("helper/m1")] })).outcome).toMatch(/published|unchanged/);
  expect((await publish({ name: "thrifty-boss", limits: { max_cost_cents: 600 }, nodes: [agent("boss/m1", { agents: ["helper"] })] })).outcome).toMatch(
    /published|unchanged/,
  );
  const started = await client().startRun({ definition: "thrifty-boss", input: { task: "add 40 and 2" } });
  expect(started.outcome).toBe("started");
  const run = (await world.settled((started.run as RunAnswer).id, client())) as Ended;
  expect(run.status, JSON.stringify(run)).toBe("succeeded");
  const listed = await client().listRuns({ limit: 500 });
  const child = (listed.runs as Ended[]).find((r) => r.parent_run_id === run.id);
  expect(child!.status).toBe("failed");
  expect(child!.error?.code).toBe("budget_exhausted");
  const lines = (await client().trajectory(run.id)).lines as Line[];
  const delegated = lines.find((l) => l.kind === "tool_call" && l.server === "agent");
  expect(delegated?.result).toMatchObject({ status: "failed", error: { code: "budget_exhausted" } });
  // The child spent nothing; the tree spent the boss's two turns.
  expect(await new UsageMeter(world.nc).spentByTree(TENANT, run.id)).toBe(8);
}, 60_000);
