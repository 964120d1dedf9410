import { expect, it } from "vitest";
import { RunwayClient } from "../../cluster/client.js";
import { waitFor } from "../harness/index.js";
import { startEffectsServer } from "../fixtures/mcp/start.js";
import { startModelFake, type ModelFakeHandle } from "../fixtures/models/start.js";
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

/**
 * The system block of each model request the fake received. C029, C079, C132 (adapt): Runway has no
 * context builder; the system block is the node's pinned instructions, the same in every request,
 * so a resume, a crash or an approval rebuilds nothing and no segment's block can differ.
 */
async function systemBlocks(fake: ModelFakeHandle): Promise<unknown[]> {
  const { requests } = (await fake.requests()) as { requests: { body: { messages: { role: string; content?: unknown }[] } }[] };
  return requests.map((r) => r.body.messages.find((m) => m.role === "system")?.content);
}

it("C079 SIGKILL of the node after turn 2's tool intent and before its receipt: after the restart no recorded turn is requested again (the fake server's counter), the tool's effect happened once, and the system block is the one it was (nothing rebuilt)", async () => {
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
    expect(await systemBlocks(openai)).toEqual(Array(4).fill(definition.nodes[0]!.instructions));
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

it("C077 C029 C132 38.3 SIGKILL of the node while its agent is parked on a gated proposal: after the restart the run still waits on the one inbox item, the model is not asked for the turn again, the edited call is made once, and the turn after the approval has the same system block (nothing rebuilt)", async () => {
  const fx = await startEffectsServer({ http: true });
  const openai = await startModelFake("openai", [
    {
      reply: {
        tool_calls: [
          { name: "fx__set_value", arguments: { key: "parked", value: "before" } },
          { name: "fx__charge", arguments: { account: "acme", amount: 70 } },
        ],
        usage: { input_tokens: 10, output_tokens: 5 },
      },
    },
    { reply: { text: "Charged acme 7.", usage: { input_tokens: 20, output_tokens: 5 } } },
  ]);
  try {
    let node = await startWorkflowNode(world, "agent-node");
    const client = new RunwayClient(world.nc, "a2");
    await client.createTenant("a2");
    expect((await client.putToolServer({ name: "fx", transport: { type: "http", url: fx.url } })).outcome).toBe("saved");
    expect((await client.putModelProvider({ name: "oa", kind: "openai", base_url: openai.baseUrl })).outcome).toBe("created");
    const gated = { ...definition, name: "agent-gated-crash", approvals: { tools: ["fx/charge"], group: "finance" } };
    expect((await client.putDefinition(gated)).outcome).toBe("published");
    const id = ((await client.startRun({ definition: "agent-gated-crash" })).run as RunAnswer).id;
    const approval = `${id}:ask:turn0:approval.fx/charge`;
    const listed = async () => ((await client.approvals()).approvals as { id: string; kind: string }[]).map((a) => [a.id, a.kind]);
    await waitFor(async () => ((await listed()).length > 0 ? true : undefined), { timeoutMs: 30_000, describe: "the gated proposal to be listed" });
    expect(await listed()).toEqual([[approval, "tool"]]);
    expect((await openai.requests()).count).toBe(1);
    expect(fx.counts().effects.set_value).toBe(1);

    // C077: the conversation (turn 0's response, its receipt) was stored before the park: the kill loses none of it.
    await node.kill("SIGKILL");
    node = await startWorkflowNode(world, "agent-node");
    const waiting = await waitFor(async () => ((await client.getRun(id).catch(() => undefined))?.run as RunAnswer | undefined) ?? undefined, {
      timeoutMs: 30_000,
      describe: "the run to be readable again",
    });
    expect(waiting.status).toBe("waiting");
    expect(await listed()).toEqual([[approval, "tool"]]);
    expect((await openai.requests()).count).toBe(1);
    expect(fx.counts().calls.charge ?? 0).toBe(0);

    const decided = await waitFor(
      async () => {
        const a = await client.decide(approval, "edit", { by: "alice", payload: { account: "acme", amount: 7 } }).catch(() => undefined);
        return a?.outcome === "decided" ? a : undefined;
      },
      { timeoutMs: 30_000, describe: "the decision to be taken" },
    );
    expect(decided).toMatchObject({ decision: "edited" });
    const done = await finished(client, id);
    expect(done.status, JSON.stringify(done)).toBe("succeeded");
    expect(done.result).toEqual({ ask: "Charged acme 7." });
    // Turn 0 was read from the journal: only turn 1 was asked. Each effect happened once; the charge with the edit.
    expect((await openai.requests()).count).toBe(2);
    expect(await systemBlocks(openai)).toEqual(Array(2).fill(definition.nodes[0]!.instructions));
    expect(fx.counts().effects.set_value).toBe(1);
    expect(fx.counts().calls.charge).toBe(1);
    const charged = Object.entries(fx.counts().values).filter(([k]) => k.startsWith(`charge:${id}:`));
    expect(charged.map(([, v]) => JSON.parse(v) as unknown)).toEqual([{ account: "acme", amount: 7, charge_no: 1 }]);
    expect(await listed()).toEqual([]);
    await node.kill("SIGTERM");
  } finally {
    await fx.stop();
    await openai.stop();
  }
}, 120_000);

it("38.3 SIGKILL of the node after an approved gated call was made, while the next turn is in flight: the restarted node reads the decision and the call's receipt from the journal (no second inbox item, no second call) and asks the model only for the turn in flight", async () => {
  const fx = await startEffectsServer({ http: true });
  const openai = await startModelFake("openai", [
    { reply: { tool_calls: [{ name: "fx__charge", arguments: { account: "acme", amount: 50 } }], usage: { input_tokens: 10, output_tokens: 5 } } },
    // Turn 1 takes 20 s to answer: the node dies meanwhile, and the turn is asked again after the restart.
    { reply: { text: "too late", usage: { input_tokens: 20, output_tokens: 5 } }, delay_ms: 20_000 },
    { reply: { text: "Charged acme 5.", usage: { input_tokens: 20, output_tokens: 5 } } },
  ]);
  try {
    let node = await startWorkflowNode(world, "agent-node");
    const client = new RunwayClient(world.nc, "a3");
    await client.createTenant("a3");
    expect((await client.putToolServer({ name: "fx", transport: { type: "http", url: fx.url } })).outcome).toBe("saved");
    expect((await client.putModelProvider({ name: "oa", kind: "openai", base_url: openai.baseUrl })).outcome).toBe("created");
    const gated = { ...definition, name: "agent-gated-crash2", approvals: { tools: ["fx/charge"] } };
    expect((await client.putDefinition(gated)).outcome).toBe("published");
    const id = ((await client.startRun({ definition: "agent-gated-crash2" })).run as RunAnswer).id;
    const approval = `${id}:ask:turn0:approval.fx/charge`;
    const listed = async () => ((await client.approvals()).approvals as { id: string }[]).map((a) => a.id);
    await waitFor(async () => ((await listed()).length > 0 ? true : undefined), { timeoutMs: 30_000, describe: "the gated proposal to be listed" });
    expect((await client.decide(approval, "edit", { by: "alice", payload: { account: "acme", amount: 5 } })).outcome).toBe("decided");
    await waitFor(async () => ((await openai.requests()).count >= 2 ? true : undefined), { timeoutMs: 30_000, describe: "turn 1 to be asked" });
    expect(fx.counts().calls.charge).toBe(1);

    await node.kill("SIGKILL");
    node = await startWorkflowNode(world, "agent-node");
    const done = await finished(client, id);
    expect(done.status, JSON.stringify(done)).toBe("succeeded");
    expect(done.result).toEqual({ ask: "Charged acme 5." });
    // Turn 0 and its decided call came from the journal; only turn 1 (in flight at the kill) was asked again.
    expect((await openai.requests()).count).toBe(3);
    expect(fx.counts().calls.charge).toBe(1);
    expect(fx.counts().effects.charge).toBe(1);
    expect(await listed()).toEqual([]);
    const lines = (await client.trajectory(id)).lines as { kind: string; tool?: string; arguments?: unknown }[];
    expect(lines.filter((l) => l.kind === "tool_call").map((l) => [l.tool, l.arguments])).toEqual([["charge", { account: "acme", amount: 5 }]]);
    await node.kill("SIGTERM");
  } finally {
    await fx.stop();
    await openai.stop();
  }
}, 120_000);

it("C086 a crash gives an agent no fresh allowance: after a SIGKILL during turn 1, the recorded turn counts, the re-asked one counts once, and max_turns (3) stops it after turn 2", async () => {
  const fx = await startEffectsServer({ http: true });
  const set = (value: string) => ({
    reply: { tool_calls: [{ name: "fx__set_value", arguments: { key: "c086", value } }], usage: { input_tokens: 10, output_tokens: 5 } },
  });
  // The fake answers requests in order: #2 (turn 1) takes 20 s and the node dies in it; #3 is turn 1 asked again.
  const openai = await startModelFake("openai", [set("0"), { ...set("1"), delay_ms: 20_000 }, set("1"), set("2"), { reply: { text: "never asked" } }]);
  try {
    let node = await startWorkflowNode(world, "agent-c086");
    const client = new RunwayClient(world.nc, "c086");
    await client.createTenant("c086");
    expect((await client.putToolServer({ name: "fx", transport: { type: "http", url: fx.url }, trusted: true })).outcome).toBe("saved");
    expect((await client.putModelProvider({ name: "oa", kind: "openai", base_url: openai.baseUrl })).outcome).toBe("created");
    const capped = { ...definition, name: "agent-c086", nodes: [{ ...definition.nodes[0]!, max_turns: 3 }] };
    expect((await client.putDefinition(capped)).outcome).toBe("published");
    const id = ((await client.startRun({ definition: "agent-c086" })).run as RunAnswer).id;

    await waitFor(async () => ((await openai.requests()).count >= 2 ? true : undefined), { timeoutMs: 30_000, describe: "turn 1 to be asked" });
    await node.kill("SIGKILL");
    node = await startWorkflowNode(world, "agent-c086");
    const done = await finished(client, id);
    expect(done.status, JSON.stringify(done)).toBe("failed");
    const events = (await client.runEvents(id)).events as { type: string; error?: { code: string; message: string } }[];
    const failed = events.find((e) => e.type === "step_failed");
    expect(failed?.error?.code).toBe("limit_reached");
    expect(failed?.error?.message).toMatch(/max_turns \(3\)/);
    // Turn 0 once, turn 1 twice (the one in flight at the kill is asked again: what a crash can cost), turn 2 once; no fourth turn.
    expect((await openai.requests()).count).toBe(4);
    const lines = (await client.trajectory(id)).lines as { kind: string; turn?: number }[];
    expect(lines.filter((l) => l.kind === "model_turn").map((l) => l.turn)).toEqual([0, 1, 2]);
    await node.kill("SIGTERM");
  } finally {
    await fx.stop();
    await openai.stop();
  }
}, 120_000);
