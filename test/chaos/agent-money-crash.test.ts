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
