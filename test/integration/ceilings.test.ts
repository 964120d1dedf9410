import { afterAll, beforeAll, expect, it } from "vitest";
import { waitFor } from "../harness/index.js";
import { startEffectsServer, type EffectsServerHandle } from "../fixtures/mcp/start.js";
import { workflowWorld, type RunAnswer } from "./workflow-support.js";

const world = workflowWorld({ name: "ceilings-node" });
let fx: EffectsServerHandle;
beforeAll(async () => {
  fx = await startEffectsServer({ http: true });
  expect((await world.client.putToolServer({ name: "fx", transport: { type: "http", url: fx.url } })).outcome).toBe("saved");
}, 30_000);
afterAll(async () => {
  await fx?.stop();
});

type Ended = RunAnswer & { partial_reason?: string; usage?: { steps: number; tool_calls: number } };

async function run(def: object, input: unknown = {}): Promise<Ended> {
  expect((await world.client.putDefinition(def)).outcome).toMatch(/published|unchanged/);
  const id = ((await world.client.startRun({ definition: (def as { name: string }).name, input })).run as RunAnswer).id;
  return (await world.settled(id)) as Ended;
}

it("the one status rule: a step ceiling reached after work is a success with partial_reason limit_reached and the work it did", async () => {
  const r = await run({
    name: "three-steps",
    limits: { max_steps: 2 },
    nodes: [
      { id: "a", kind: "code", handler: "echo", input: "A" },
      { id: "b", kind: "code", needs: ["a"], handler: "echo", input: "B" },
      { id: "c", kind: "code", needs: ["b"], handler: "echo", input: "C" },
    ],
  });
  expect(r.status).toBe("succeeded");
  expect(r.partial_reason).toBe("limit_reached");
  expect(r.result).toEqual({ a: "A", b: "B" });
  expect(r.nodes.c!.status).toBe("cancelled");
  expect(r.usage).toMatchObject({ steps: 2 });
});

it("a tool call beyond the run's max_tool_calls is never made: the server's counter proves it", async () => {
  const before = fx.counts().calls.charge ?? 0;
  const r = await run({
    name: "two-charges",
    limits: { max_tool_calls: 1 },
    nodes: [
      { id: "first", kind: "tool", server: "fx", tool: "charge", arguments: { account: "x", amount: 1 } },
      { id: "second", kind: "tool", needs: ["first"], server: "fx", tool: "charge", arguments: { account: "x", amount: 2 } },
    ],
  });
  expect(r.status).toBe("succeeded");
  expect(r.partial_reason).toBe("limit_reached");
  expect(r.result).toMatchObject({ first: { amount: 1 } });
  expect(fx.counts().calls.charge).toBe(before + 1);
});

it("a wall-clock ceiling reached before any work is a failure carrying the code; the stopped handler frees its worker", async () => {
  const r = await run({ name: "too-slow", limits: { max_wall_ms: 300 }, nodes: [{ id: "slow", kind: "code", handler: "slow", input: { ms: 20_000 } }] });
  expect(r.status).toBe("failed");
  expect(r.error).toMatchObject({ code: "limit_reached" });
  await waitFor(() => world.node.executor.inFlight === 0 || undefined, { timeoutMs: 10_000, describe: "the stopped handler to free its worker" });
});

it("a definition's limits are checked at publish", async () => {
  const bad = await world.client.putDefinition({ name: "bad-limits", limits: { max_steps: 0 }, nodes: [{ id: "a", kind: "code", handler: "echo" }] });
  expect(bad.outcome).toBe("invalid_definition");
});
