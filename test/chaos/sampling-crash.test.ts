import { expect, it } from "vitest";
import { RunwayClient } from "../../cluster/client.js";
import { waitFor } from "../harness/index.js";
import { startModernServer } from "../fixtures/mcp/start.js";
import { startModelFake } from "../fixtures/models/start.js";
import { finished, singleServerWorld, startWorkflowNode } from "./node-process.js";
import type { RunAnswer } from "../integration/workflow-support.js";

/** A tool server's sampling under SIGKILL: its response was journaled before the server got it, so the call made again after a restart is answered from the journal. */

const world = singleServerWorld();

it("38.7 SIGKILL of the node after a server's sampling was answered and while its tool call is in flight: after the restart the call is made again and its sampling answered from the journal (the model's counter stays at one)", async () => {
  const server = await startModernServer({ env: { MCP_SAMPLING: "1" } });
  const openai = await startModelFake("openai", [{ reply: { text: "Crash-proof summary.", usage: { input_tokens: 20, output_tokens: 10 } } }]);
  try {
    let node = await startWorkflowNode(world, "sampling-node");
    const client = new RunwayClient(world.nc, "s1");
    await client.createTenant("s1");
    const writer = {
      name: "writer",
      protocol: "2026-07-28",
      transport: { type: "http", url: server.url },
      sampling: { models: ["oa/fake-gpt"], max_tokens: 100 },
      // Safe to call again: a call whose outcome the crash left unknown is made again, not held for a person.
      overrides: { summarize: "idempotent" },
    };
    expect((await client.putToolServer(writer)).outcome).toBe("saved");
    expect((await client.putModelProvider({ name: "oa", kind: "openai", base_url: openai.baseUrl })).outcome).toBe("created");
    const definition = {
      name: "sampling-crash",
      nodes: [{ id: "sum", kind: "tool", server: "writer", tool: "summarize", arguments: { text: "crash", delay_ms: 20_000 } }],
    };
    expect((await client.putDefinition(definition)).outcome).toBe("published");
    const id = ((await client.startRun({ definition: "sampling-crash" })).run as RunAnswer).id;

    // The model answered, the server got the answer and takes 20 s to finish the call: the node dies in between.
    await waitFor(() => server.counts().values.summarize_delayed === "1" || undefined, { timeoutMs: 30_000, describe: "the sampled call to reach the server" });
    expect((await openai.requests()).count).toBe(1);
    await node.kill("SIGKILL");

    node = await startWorkflowNode(world, "sampling-node");
    const done = await finished(client, id);
    expect(done.status, JSON.stringify(done)).toBe("succeeded");
    expect(done.result).toEqual({ sum: { summary: "Crash-proof summary.", model: "fake-gpt", stopReason: "endTurn" } });
    expect(done.nodes.sum!.attempt).toBeGreaterThan(1);
    // The server asked again on the new attempt; the model was not: its response came from the journal.
    expect((await openai.requests()).count).toBe(1);
    expect(server.counts().calls.summarize).toBeGreaterThanOrEqual(4);
    const lines = (await client.trajectory(id)).lines as { kind: string; state?: string; sampling?: { tool: string } }[];
    expect(lines.filter((l) => l.kind === "model_turn").map((l) => [l.sampling?.tool, l.state])).toEqual([["summarize", "observed"]]);
    await node.kill("SIGTERM");
  } finally {
    await server.stop();
    await openai.stop();
  }
}, 120_000);
