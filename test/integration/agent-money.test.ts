import { afterAll, beforeAll, expect, it } from "vitest";
import { UsageMeter } from "../../actors/index.js";
import { startModelFake, type ModelFakeHandle } from "../fixtures/models/start.js";
import { workflowWorld, type RunAnswer } from "./workflow-support.js";

/** Money for model turns: each priced turn reserves its most on the tree's ceiling before it is asked and settles to its cost after. */
const world = workflowWorld({ name: "agent-money" });
let openai: ModelFakeHandle;

/** 0.1 cent a token, in and out: a turn of 20 + 10 tokens costs 3 cents. */
const PRICE = { input_cents_per_mtok: 100_000, output_cents_per_mtok: 100_000 };
const TURN_CENTS = 3;
const TENANT = "tmoney";

type Ended = RunAnswer & { partial_reason?: string; usage?: { steps: number; tool_calls: number; cost_cents?: number } };
type Line = { kind: string; turn?: number; cost_cents?: number };

beforeAll(async () => {
  openai = await startModelFake("openai", [{ reply: { text: "done", usage: { input_tokens: 20, output_tokens: 10 } } }]);
  expect((await world.client.createTenant(TENANT)).outcome).toBe("created");
  const put = await world
    .clientFor(TENANT)
    .putModelProvider({ name: "oa", kind: "openai", base_url: openai.baseUrl, api_key: "sk-test", prices: { "fake-gpt": PRICE } });
  expect(put.outcome).toBe("created");
}, 60_000);
afterAll(async () => {
  await openai?.stop();
});

const client = () => world.clientFor(TENANT);
const agent = (id: string, extra: Record<string, unknown> = {}) => ({
  id,
  kind: "agent",
  model: "oa/fake-gpt",
  instructions: "Answer.",
  input: "Go.",
  max_tokens: 60,
  ...extra,
});

async function run(def: { name: string } & Record<string, unknown>): Promise<Ended> {
  expect((await client().putDefinition(def)).outcome).toMatch(/published|unchanged/);
  const started = await client().startRun({ definition: def.name });
  expect(started.outcome).toBe("started");
  return (await world.settled((started.run as RunAnswer).id, client())) as Ended;
}

/** The ended children of run `parent`, one each (a run ending while listed may be listed twice). */
async function childrenOf(parent: string): Promise<Ended[]> {
  const listed = await client().listRuns({ limit: 500 });
  expect(listed.outcome).toBe("ok");
  const byId = new Map<string, Ended>();
  for (const run of listed.runs as (Ended & { parent_run_id?: string })[]) if (run.parent_run_id === parent) byId.set(run.id, run);
  return [...byId.values()];
}

it("38.4 a money remainder of zero never calls the model: the run ends budget_exhausted (the fake's counter)", async () => {
  await openai.reset();
  const r = await run({ name: "agent-broke", limits: { max_cost_cents: 0 }, nodes: [agent("ask")] });
  // Before any work: the run fails with the ceiling's code (the one status rule); its step was stopped.
  expect(r.status).toBe("failed");
  expect(r.error?.code).toBe("budget_exhausted");
  expect(r.nodes.ask!.status).toBe("cancelled");
  expect((await openai.requests()).count).toBe(0);
  expect(await new UsageMeter(world.nc).spentByTree(TENANT, r.id)).toBe(0);
  const t = await client().trajectory(r.id);
  expect((t.lines as (Line & { state?: string })[]).filter((l) => l.kind === "model_turn").map((l) => [l.turn, l.state])).toEqual([[0, "failed"]]);
});

it("38.4 a turn the money cannot cover after work: the run succeeds with partial_reason budget_exhausted and keeps its outputs (the one status rule)", async () => {
  await openai.reset();
  const r = await run({
    name: "agent-after-work",
    limits: { max_cost_cents: 0 },
    nodes: [
      { id: "a", kind: "code", handler: "echo", input: "A" },
      { ...agent("ask"), needs: ["a"] },
    ],
  });
  expect(r.status, JSON.stringify(r)).toBe("succeeded");
  expect(r.partial_reason).toBe("budget_exhausted");
  expect(r.result).toMatchObject({ a: "A" });
  expect(r.nodes.ask!.status).toBe("cancelled");
  expect((await openai.requests()).count).toBe(0);
});

it("38.4 a priced turn is charged its cost, not its reservation: usage, the trajectory and the tree's meter agree", async () => {
  await openai.reset();
  const r = await run({ name: "agent-paid", limits: { max_cost_cents: 1_000 }, nodes: [agent("ask")] });
  expect(r.status, JSON.stringify(r)).toBe("succeeded");
  expect(r.usage?.cost_cents).toBe(TURN_CENTS);
  expect(await new UsageMeter(world.nc).spentByTree(TENANT, r.id)).toBe(TURN_CENTS);
  const t = await client().trajectory(r.id);
  expect(t.outcome).toBe("trajectory");
  expect((t.lines as Line[]).filter((l) => l.kind === "model_turn").map((l) => [l.turn, l.cost_cents])).toEqual([[0, TURN_CENTS]]);
});

it("38.4 a ten-child tree shares one money budget: never passed; children that find it spent end budget_exhausted without asking the model; spent = the turns' costs", async () => {
  // Each turn reserves its most (input bytes + 60 output tokens, about 20 cents) and settles to 3:
  // under 30 cents, two reservations never fit at once, and a child whose turn cannot reserve never asks.
  await openai.script([{ delay_ms: 150, reply: { text: "done", usage: { input_tokens: 20, output_tokens: 10 } } }]);
  await openai.reset();
  expect((await client().putDefinition({ name: "money-child", nodes: [agent("ask")] })).outcome).toMatch(/published|unchanged/);
  const children = Array.from({ length: 10 }, (_, i) => ({ id: `c${i}`, kind: "subworkflow", workflow: "money-child", continue_on_error: true }));
  const budget = 30;
  const r = await run({ name: "money-tree", limits: { max_cost_cents: budget }, nodes: children });
  const meter = new UsageMeter(world.nc);
  const spent = await meter.spentByTree(TENANT, r.id);
  expect(spent).toBeLessThanOrEqual(budget);
  const kids = await childrenOf(r.id);
  expect(kids.length).toBe(10);
  const paid = kids.filter((k) => k.status === "succeeded");
  const refused = kids.filter((k) => k.status !== "succeeded");
  expect(paid.length).toBeGreaterThanOrEqual(1);
  expect(refused.length).toBeGreaterThanOrEqual(1);
  for (const k of refused) {
    expect(k.status).toBe("failed");
    expect(k.error?.code).toBe("budget_exhausted");
  }
  // The parent drains on its children's ceiling and, after work, succeeds partially (the one status rule).
  expect(r.status, JSON.stringify(r)).toBe("succeeded");
  expect(r.partial_reason).toBe("budget_exhausted");
  // Only the children that paid asked the model, once each.
  expect((await openai.requests()).count).toBe(paid.length);
  // What the tree spent is the sum of its turns' costs (each reservation came back to its cost).
  for (const k of paid) expect(k.usage?.cost_cents).toBe(TURN_CENTS);
  expect(spent).toBe(paid.length * TURN_CENTS);
}, 60_000);
