import { expect, it } from "vitest";
import { RunwayClient } from "../../cluster/client.js";
import { UsageMeter } from "../../actors/index.js";
import { waitFor } from "../harness/index.js";
import { startModelFake } from "../fixtures/models/start.js";
import { finished, singleServerWorld, startWorkflowNode } from "./node-process.js";
import type { RunAnswer } from "../integration/workflow-support.js";

/** A priced agent turn under SIGKILL: the turn in flight is asked again, but it holds one reservation and is charged once. */

const world = singleServerWorld();

/** 0.1 cent a token, in and out. */
const PRICE = { input_cents_per_mtok: 100_000, output_cents_per_mtok: 100_000 };

it("38.4 SIGKILL of the node while a priced turn is asked: after the restart the turn is asked again, yet the tree is charged each turn's cost once (the reservation is keyed by the turn)", async () => {
  // Turn 0 answers no JSON (a repair turn follows); the first asking of turn 1 takes 20 s (the node dies), the second answers.
  const openai = await startModelFake("openai", [
    { reply: { text: "not json", usage: { input_tokens: 20, output_tokens: 10 } } },
    { delay_ms: 20_000, reply: { text: '{"answer": 1}', usage: { input_tokens: 40, output_tokens: 10 } } },
    { reply: { text: '{"answer": 1}', usage: { input_tokens: 40, output_tokens: 10 } } },
  ]);
  try {
    let node = await startWorkflowNode(world, "agent-node");
    const client = new RunwayClient(world.nc, "m1");
    await client.createTenant("m1");
    const put = await client.putModelProvider({ name: "oa", kind: "openai", base_url: openai.baseUrl, prices: { "fake-gpt": PRICE } });
    expect(put.outcome).toBe("created");
    const definition = {
      name: "priced-crash",
      limits: { max_cost_cents: 5_000 },
      nodes: [{ id: "ask", kind: "agent", model: "oa/fake-gpt", instructions: "Answer in JSON.", input: "go", output_schema: { type: "object" } }],
    };
    expect((await client.putDefinition(definition)).outcome).toBe("published");
    const id = ((await client.startRun({ definition: "priced-crash" })).run as RunAnswer).id;
    const meter = new UsageMeter(world.nc);

    // Turn 1 is asked (its reservation, hundreds of cents, is on the tree): the node dies before the answer.
    await waitFor(async () => ((await openai.requests()).count >= 2 ? true : undefined), { timeoutMs: 30_000, describe: "turn 1 to be asked" });
    const held = await meter.spentByTree("m1", id);
    expect(held).toBeGreaterThan(100);
    await node.kill("SIGKILL");

    node = await startWorkflowNode(world, "agent-node");
    const done = await finished(client, id);
    expect(done.status, JSON.stringify(done)).toBe("succeeded");
    expect(done.result).toEqual({ ask: { answer: 1 } });
    // Turn 0 was read from the journal; turn 1 (in flight at the kill) was asked again: three requests in all.
    expect((await openai.requests()).count).toBe(3);
    // Turn 0 cost 3 cents, turn 1 cost 5: the killed asking's reservation was the same hold, settled once.
    const lines = (await client.trajectory(id)).lines as { kind: string; cost_cents?: number }[];
    expect(lines.filter((l) => l.kind === "model_turn").map((l) => l.cost_cents)).toEqual([3, 5]);
    expect(await meter.spentByTree("m1", id)).toBe(8);
    expect((done as RunAnswer & { usage?: { cost_cents?: number } }).usage?.cost_cents).toBe(8);
    await node.kill("SIGTERM");
  } finally {
    await openai.stop();
  }
}, 120_000);

it("38.5 SIGKILL of the node while an agent waits on its subagent: after the restart the child is the same one run, the parent's recorded turn is not asked again, and the child's end reaches the model", async () => {
  // Parent turn 0 delegates; the child's first asking takes 20 s (the node dies), its second answers; parent turn 1 ends.
  const openai = await startModelFake("openai", [
    { reply: { tool_calls: [{ name: "agent__helper", arguments: { task: "sum" } }], usage: { input_tokens: 20, output_tokens: 10 } } },
    { delay_ms: 20_000, reply: { text: "42", usage: { input_tokens: 20, output_tokens: 10 } } },
    { reply: { text: "42", usage: { input_tokens: 20, output_tokens: 10 } } },
    { reply: { text: "The helper says 42.", usage: { input_tokens: 40, output_tokens: 10 } } },
  ]);
  try {
    let node = await startWorkflowNode(world, "agent-node");
    const client = new RunwayClient(world.nc, "m2");
    await client.createTenant("m2");
    const put = await client.putModelProvider({ name: "oa", kind: "openai", base_url: openai.baseUrl, prices: { "fake-gpt": PRICE } });
    expect(put.outcome).toBe("created");
    const agent = { id: "ask", kind: "agent", model: "oa/fake-gpt", instructions: "Answer.", input: "${input.task}" };
    expect((await client.putDefinition({ name: "helper", nodes: [agent] })).outcome).toBe("published");
    expect((await client.putDefinition({ name: "boss", limits: { max_cost_cents: 5_000 }, nodes: [{ ...agent, agents: ["helper"] }] })).outcome).toBe(
      "published",
    );
    const id = ((await client.startRun({ definition: "boss", input: { task: "sum" } })).run as RunAnswer).id;

    await waitFor(async () => ((await openai.requests()).count >= 2 ? true : undefined), { timeoutMs: 30_000, describe: "the child's turn to be asked" });
    await node.kill("SIGKILL");

    node = await startWorkflowNode(world, "agent-node");
    const done = await finished(client, id);
    expect(done.status, JSON.stringify(done)).toBe("succeeded");
    expect(done.result).toEqual({ ask: "The helper says 42." });
    // Parent turn 0 once, the child's turn twice (in flight at the kill), parent turn 1 once.
    expect((await openai.requests()).count).toBe(4);
    const listed = await client.listRuns({ limit: 500 });
    const children = new Set((listed.runs as (RunAnswer & { parent_run_id?: string })[]).filter((r) => r.parent_run_id === id).map((r) => r.id));
    expect(children.size).toBe(1);
    const lines = (await client.trajectory(id)).lines as { kind: string; server?: string; state?: string; turn?: number }[];
    expect(lines.filter((l) => l.kind === "model_turn").map((l) => l.turn)).toEqual([0, 1]);
    expect(lines.filter((l) => l.kind === "tool_call" && l.server === "agent").map((l) => l.state)).toEqual(["observed"]);
    // The tree paid parent turns 3 + 5 and the child's one turn 3, once each.
    expect(await new UsageMeter(world.nc).spentByTree("m2", id)).toBe(11);
    await node.kill("SIGTERM");
  } finally {
    await openai.stop();
  }
}, 120_000);
