import { expect, it } from "vitest";
import { RunwayClient } from "../../cluster/client.js";
import { waitFor } from "../harness/index.js";
import { startEffectsServer } from "../fixtures/mcp/start.js";
import { startModelFake } from "../fixtures/models/start.js";
import { finished, singleServerWorld, startWorkflowNode } from "./node-process.js";
import type { RunAnswer } from "../integration/workflow-support.js";

/** An agent node under SIGKILL: the conversation is rebuilt from the run's journal; no recorded turn is asked again, no tool effect happens twice. */

const world = singleServerWorld();

const definition = {
  name: "agent-crash",
  nodes: [
    {
      id: "ask",
      kind: "agent",
      model: "oa/fake-gpt",
      instructions: "Set, read, then charge.",
      input: "go",
      tools: ["fx/set_value", "fx/get_value", "fx/charge"],
    },
  ],
};

it("SIGKILL of the node after turn 2's tool intent and before its receipt: after the restart no recorded turn is requested again (the fake server's counter) and the tool's effect happened once", async () => {
  const fx = await startEffectsServer({ http: true });
  // Turn 2 proposes a charge that applies its effect at once, then takes 20 s to answer: the node dies in between.
  const openai = await startModelFake("openai", [
    { reply: { tool_calls: [{ name: "fx__set_value", arguments: { key: "k", value: "v" } }], usage: { input_tokens: 10, output_tokens: 5 } } },
    { reply: { tool_calls: [{ name: "fx__get_value", arguments: { key: "k" } }], usage: { input_tokens: 20, output_tokens: 5 } } },
    {
      reply: {
        tool_calls: [{ name: "fx__charge", arguments: { account: "acme", amount: 7, delay_ms: 20_000 } }],
        usage: { input_tokens: 30, output_tokens: 5 },
      },
    },
    { reply: { text: "Charged acme 7.", usage: { input_tokens: 40, output_tokens: 5 } } },
  ]);
  try {
    let node = await startWorkflowNode(world, "agent-node");
    const client = new RunwayClient(world.nc, "a1");
    await client.createTenant("a1");
    expect((await client.putToolServer({ name: "fx", transport: { type: "http", url: fx.url }, lookups: { charge: "find_charge" } })).outcome).toBe("saved");
    expect((await client.putModelProvider({ name: "oa", kind: "openai", base_url: openai.baseUrl })).outcome).toBe("created");
    expect((await client.putDefinition(definition)).outcome).toBe("published");
    const id = ((await client.startRun({ definition: "agent-crash" })).run as RunAnswer).id;

    // Turn 2's charge intent is recorded and its effect applied; its receipt cannot be (the call answers in 20 s).
    await waitFor(() => (fx.counts().effects.charge ?? 0) >= 1 || undefined, { timeoutMs: 30_000, describe: "turn 2's charge to take effect" });
    expect((await openai.requests()).count).toBe(3);
    await node.kill("SIGKILL");

    node = await startWorkflowNode(world, "agent-node");
    const done = await finished(client, id);
    expect(done.status, JSON.stringify(done)).toBe("succeeded");
    expect(done.result).toEqual({ ask: "Charged acme 7." });
    // The new attempt read turns 0–2 from the journal: only turn 3 was asked.
    expect((await openai.requests()).count).toBe(4);
    // The charge's outcome was looked up by its effect key (found), never made again.
    expect(fx.counts().effects.charge).toBe(1);
    expect(fx.counts().calls.charge).toBe(1);
    expect(fx.counts().calls.find_charge).toBe(1);
    expect(fx.counts().effects.set_value).toBe(1);
    expect(done.nodes.ask!.attempt).toBeGreaterThan(1);
    const lines = (await client.trajectory(id)).lines as { kind: string; turn?: number; tool?: string; state?: string }[];
    expect(lines.filter((l) => l.kind === "model_turn").map((l) => l.turn)).toEqual([0, 1, 2, 3]);
    expect(lines.filter((l) => l.kind === "tool_call").map((l) => [l.tool, l.state])).toEqual([
      ["set_value", "observed"],
      ["get_value", "observed"],
      ["charge", "observed"],
    ]);
    await node.kill("SIGTERM");
  } finally {
    await fx.stop();
    await openai.stop();
  }
}, 120_000);
