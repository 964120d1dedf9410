import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { UsageMeter } from "../../actors/index.js";
import { startEffectsServer, startEverythingHttp, startModernServer, type EffectsServerHandle } from "../fixtures/mcp/start.js";
import { startModelFake, type ModelFakeHandle } from "../fixtures/models/start.js";
import { workflowWorld, type RunAnswer } from "./workflow-support.js";

/**
 * A tool server's `sampling/createMessage` (issue 38 §2, acceptance 7): served by the tenant's
 * model gateway under the calling run's budget and the server's sampling policy, journaled like a
 * turn; refused with an MCP error otherwise (the model never asked: the fake's own counter).
 */
// A quota window of an hour: two runs of a test never straddle two windows.
const world = workflowWorld({ name: "mcp-sampling", quotaWindowMs: 3_600_000 });
const TENANT = "tsample";
let modern: EffectsServerHandle;
let openai: ModelFakeHandle;
let everything: { url: string; stop(): Promise<void> };

/** 0.1 cent a token, in and out: a sampling of 20 + 10 tokens costs 3 cents. */
const PRICE = { input_cents_per_mtok: 100_000, output_cents_per_mtok: 100_000 };
const ONE_RETRY = { max_attempts: 1, backoff_ms: 0, max_backoff_ms: 0 };

type Ended = RunAnswer & { usage?: { steps: number; tool_calls: number; cost_cents?: number } };
type Line = {
  kind: string;
  node?: string;
  state?: string;
  model?: string;
  sampling?: { server: string; tool: string };
  input_tokens?: number;
  output_tokens?: number;
  cost_cents?: number;
  text?: string;
  tool?: string;
};

const client = () => world.clientFor(TENANT);
/** The message of node `sum`'s error. */
const messageOf = (r: Ended): string => String((r.nodes.sum!.error as { message?: unknown } | undefined)?.message ?? "");

beforeAll(async () => {
  [modern, openai] = await Promise.all([
    startModernServer({ env: { MCP_SAMPLING: "1" } }),
    startModelFake("openai", [{ reply: { text: "A short summary.", usage: { input_tokens: 20, output_tokens: 10 } } }]),
  ]);
  expect((await world.client.createTenant(TENANT)).outcome).toBe("created");
  const c = client();
  const provider = await c.putModelProvider({ name: "oa", kind: "openai", base_url: openai.baseUrl, api_key: "sk-test", prices: { "fake-gpt": PRICE } });
  expect(provider.outcome).toBe("created");
  const sampling = { models: ["oa/fake-gpt"], max_tokens: 200 };
  const transport = { type: "http", url: modern.url };
  expect((await c.putToolServer({ name: "writer", protocol: "2026-07-28", transport, sampling })).outcome).toBe("saved");
  expect((await c.putToolServer({ name: "plain", protocol: "2026-07-28", transport })).outcome).toBe("saved");
  // The 2025-11-25 effects server over stdio, whose `sample` tool asks for a completion during its call.
  const cmd = (await startEffectsServer({})).command!;
  const stdio = { type: "stdio", command: cmd.command, args: cmd.args, env: cmd.env };
  expect((await c.putToolServer({ name: "fx-sample", transport: stdio, sampling: { models: ["oa/fake-gpt"], max_tokens: 50 } })).outcome).toBe("saved");
  expect((await c.putToolServer({ name: "fx-plain", transport: stdio })).outcome).toBe("saved");
  // Over Streamable HTTP: the reference server-everything (stateful sessions), whose trigger-sampling-request asks during its call.
  everything = await startEverythingHttp();
  const http = { type: "http", url: everything.url };
  expect((await c.putToolServer({ name: "every", transport: http, sampling: { models: ["oa/fake-gpt"], max_tokens: 50 } })).outcome).toBe("saved");
  // An agent's own model: turn 0 calls writer/summarize, turn 1 answers.
  const turns = [
    { tool_calls: [{ name: "writer__summarize", arguments: { text: "agent text" } }], usage: { input_tokens: 5, output_tokens: 5 } },
    { text: "Done." },
  ];
  expect((await c.putModelProvider({ name: "scripted", kind: "scripted", script: { turns } })).outcome).toBe("created");
}, 60_000);
afterAll(async () => {
  await Promise.all([modern?.stop(), openai?.stop(), everything?.stop()]);
});

async function runTool(name: string, server: string, tool: string, extra: Record<string, unknown> = {}): Promise<Ended> {
  const def = { name, ...extra, nodes: [{ id: "sum", kind: "tool", server, tool, arguments: {}, retry: ONE_RETRY }] };
  const put = await client().putDefinition(def);
  expect(put.outcome, JSON.stringify(put)).toMatch(/published|unchanged/);
  const started = await client().startRun({ definition: name });
  expect(started.outcome).toBe("started");
  return (await world.settled((started.run as RunAnswer).id, client())) as Ended;
}

async function summarize(name: string, server: string, args: Record<string, unknown>, extra: Record<string, unknown> = {}): Promise<Ended> {
  const def = { name, nodes: [{ id: "sum", kind: "tool", server, tool: "summarize", arguments: args, ...extra }] };
  const put = await client().putDefinition(def);
  expect(put.outcome, JSON.stringify(put)).toMatch(/published|unchanged/);
  const started = await client().startRun({ definition: name });
  expect(started.outcome).toBe("started");
  return (await world.settled((started.run as RunAnswer).id, client())) as Ended;
}

async function lines(runId: string): Promise<Line[]> {
  const t = await client().trajectory(runId);
  expect(t.outcome).toBe("trajectory");
  return t.lines as Line[];
}

describe("38.7 sampling/createMessage from an MCP 2026-07-28 server", () => {
  it("38.7 is answered by the model gateway within the run's budget and journaled: the trajectory has it with its tokens and cost, the run and tree are charged", async () => {
    await openai.reset();
    const def = {
      name: "sample-ok",
      limits: { max_cost_cents: 1_000 },
      nodes: [{ id: "sum", kind: "tool", server: "writer", tool: "summarize", arguments: { text: "the long text" } }],
    };
    expect((await client().putDefinition(def)).outcome).toMatch(/published|unchanged/);
    const started = await client().startRun({ definition: "sample-ok" });
    const r = (await world.settled((started.run as RunAnswer).id, client())) as Ended;
    expect(r.status, JSON.stringify(r)).toBe("succeeded");
    expect(r.result).toEqual({ sum: { summary: "A short summary.", model: "fake-gpt", stopReason: "endTurn" } });
    // The model was asked once, with the server's request as the model gateway takes it.
    const asked = await openai.requests();
    expect(asked.count).toBe(1);
    const body = asked.requests[0]!.body as { model: string; messages: { role: string; content: string }[] };
    expect(body.model).toBe("fake-gpt");
    expect(body.messages).toEqual([
      { role: "system", content: "You summarize." },
      { role: "user", content: "Summarize: the long text" },
    ]);
    expect(JSON.stringify(body)).toMatch(/"max(_completion)?_tokens":50/);
    // Metered like a turn: its cost on the run's usage and on the tree's meter.
    expect(r.usage?.cost_cents).toBe(3);
    expect(await new UsageMeter(world.nc).spentByTree(TENANT, r.id)).toBe(3);
    // Journaled like a turn: the trajectory's model line names the call it served.
    const t = await lines(r.id);
    const sampled = t.filter((l) => l.kind === "model_turn");
    expect(sampled).toHaveLength(1);
    expect(sampled[0]).toMatchObject({
      node: "sum",
      state: "observed",
      model: "fake-gpt",
      sampling: { server: "writer", tool: "summarize" },
      input_tokens: 20,
      output_tokens: 10,
      cost_cents: 3,
      text: "A short summary.",
    });
    expect(t.filter((l) => l.kind === "tool_call").map((l) => [l.tool, l.state])).toEqual([["summarize", "observed"]]);
    expect(modern.counts().effects.summarize).toBe(1);
    // A replay answers the call from its receipt: the server is not called, nothing is sampled, and it is identical.
    const calls = JSON.stringify(modern.counts().calls);
    const replayed = await client().replay(r.id, 20_000);
    expect(replayed).toMatchObject({ outcome: "replayed", status: "succeeded", identical: true });
    expect(JSON.stringify(modern.counts().calls)).toBe(calls);
    expect((await openai.requests()).count).toBe(1);
  });

  it("38.7 a call made again after the sampling was journaled is answered from the journal: the model is not asked again", async () => {
    await openai.reset();
    const r = await summarize("sample-again", "writer", { text: "twice", fail_once: true });
    expect(r.status, JSON.stringify(r)).toBe("succeeded");
    expect(r.nodes.sum!.attempt).toBe(2);
    expect(r.result).toMatchObject({ sum: { summary: "A short summary." } });
    // The server asked for sampling on both attempts; the model answered once.
    expect((await openai.requests()).count).toBe(1);
    const sampled = (await lines(r.id)).filter((l) => l.kind === "model_turn");
    expect(sampled.map((l) => l.state)).toEqual(["observed"]);
  });

  it("38.7 over the run's budget it is refused with an MCP error: the model is never called, the refusal is journaled", async () => {
    await openai.reset();
    const before = modern.counts().effects.summarize ?? 0;
    const def = {
      name: "sample-broke",
      limits: { max_cost_cents: 1 },
      nodes: [{ id: "sum", kind: "tool", server: "writer", tool: "summarize", arguments: { text: "too dear" }, retry: ONE_RETRY }],
    };
    expect((await client().putDefinition(def)).outcome).toMatch(/published|unchanged/);
    const started = await client().startRun({ definition: "sample-broke" });
    const r = (await world.settled((started.run as RunAnswer).id, client())) as Ended;
    expect(r.status).toBe("failed");
    expect(r.nodes.sum!.error).toMatchObject({ code: "tool_sampling_over_budget" });
    expect(messageOf(r)).toContain("MCP error -32600");
    expect(messageOf(r)).toContain("over the run's budget");
    expect((await openai.requests()).count).toBe(0);
    expect(await new UsageMeter(world.nc).spentByTree(TENANT, r.id)).toBe(0);
    expect(modern.counts().effects.summarize ?? 0).toBe(before);
    const sampled = (await lines(r.id)).filter((l) => l.kind === "model_turn");
    expect(sampled.map((l) => [l.state, l.sampling?.server])).toEqual([["failed", "writer"]]);
  });

  it("38.7 the server's policy: no sampling policy, more tokens than it allows, and malformed params are refused with typed MCP errors; nothing crashes, the model is never called", async () => {
    await openai.reset();
    const none = await summarize("sample-none", "plain", { text: "x" }, { retry: ONE_RETRY });
    expect(none.nodes.sum!.error).toMatchObject({ code: "tool_sampling_refused" });
    expect(messageOf(none)).toMatch(/MCP error -32600.*no sampling policy/);
    const greedy = await summarize("sample-greedy", "writer", { text: "x", max_tokens: 500 }, { retry: ONE_RETRY });
    expect(greedy.nodes.sum!.error).toMatchObject({ code: "tool_sampling_refused" });
    expect(messageOf(greedy)).toMatch(/MCP error -32600.*500 tokens.*at most 200/);
    const bad = await summarize("sample-bad", "writer", { text: "x", malformed: true }, { retry: ONE_RETRY });
    expect(bad.nodes.sum!.error).toMatchObject({ code: "tool_sampling_refused" });
    expect(messageOf(bad)).toMatch(/MCP error -32602/);
    for (const r of [none, greedy, bad]) expect(r.status).toBe("failed");
    expect((await openai.requests()).count).toBe(0);
  });
});

describe("38.7 sampling rounds", () => {
  it("38.7 a call that samples in two rounds: each round answered and journaled under its own key, the call made again with each answer", async () => {
    await openai.reset();
    const r = await summarize("sample-rounds", "writer", { text: "twice over", rounds: 2 }, { retry: ONE_RETRY });
    expect(r.status, JSON.stringify(r)).toBe("succeeded");
    const asked = await openai.requests();
    expect(asked.count).toBe(2);
    expect(JSON.stringify(asked.requests[1]!.body)).toContain("Summarize again (1): twice over");
    const sampled = (await lines(r.id)).filter((l) => l.kind === "model_turn");
    expect(sampled.map((l) => l.state)).toEqual(["observed", "observed"]);
    expect(new Set(sampled.map((l) => (l as { key?: string }).key)).size).toBe(2);
  });

  it("38.7 a server that keeps asking is refused after 8 rounds; a round that mixes sampling with a form is refused tool_input_unsupported (the model not asked)", async () => {
    await openai.reset();
    const endless = await summarize("sample-endless", "writer", { text: "more", rounds: 20 }, { retry: ONE_RETRY });
    expect(endless.nodes.sum!.error).toMatchObject({ code: "tool_sampling_refused" });
    expect(messageOf(endless)).toContain("more than 8 times");
    expect((await openai.requests()).count).toBe(8);
    await openai.reset();
    const mixed = await summarize("sample-mixed", "writer", { text: "both", mixed: true }, { retry: ONE_RETRY });
    expect(mixed.nodes.sum!.error).toMatchObject({ code: "tool_input_unsupported" });
    expect(messageOf(mixed)).toContain("sampling is answered only in a round of its own");
    expect((await openai.requests()).count).toBe(0);
  });
});

describe("38.7 sampling under the tenant's provider quota", () => {
  it("38.7 the quota is taken after the ceilings and before the call: a sampling over it is refused (retryable) and the model is not called", async () => {
    await openai.reset();
    const tenant = "tsquota";
    const quotas = { "oa/fake-gpt": { requests_per_minute: 1, tokens_per_minute: 100_000 } };
    expect((await world.client.createTenant(tenant, { provider_quotas: quotas })).outcome).toBe("created");
    const c = world.clientFor(tenant);
    expect((await c.putModelProvider({ name: "oa", kind: "openai", base_url: openai.baseUrl, api_key: "sk-test" })).outcome).toBe("created");
    const writer = { name: "writer", protocol: "2026-07-28", transport: { type: "http", url: modern.url }, sampling: { models: ["oa/fake-gpt"] } };
    expect((await c.putToolServer(writer)).outcome).toBe("saved");
    const ended: Ended[] = [];
    for (const text of ["first", "second"]) {
      const def = { name: `quota-${text}`, nodes: [{ id: "sum", kind: "tool", server: "writer", tool: "summarize", arguments: { text }, retry: ONE_RETRY }] };
      expect((await c.putDefinition(def)).outcome).toMatch(/published|unchanged/);
      const started = await c.startRun({ definition: def.name });
      ended.push((await world.settled((started.run as RunAnswer).id, c)) as Ended);
    }
    expect(ended[0]!.status, JSON.stringify(ended[0])).toBe("succeeded");
    expect(ended[1]!.status).toBe("failed");
    expect(ended[1]!.nodes.sum!.error).toMatchObject({ code: "tool_sampling_rate_limited" });
    expect(messageOf(ended[1]!)).toMatch(/MCP error -32603.*quota/);
    expect((await openai.requests()).count).toBe(1);
  });
});

describe("38.7 sampling/createMessage from an MCP 2025-11-25 server", () => {
  it("38.7 a server with a sampling policy: its call gets a session of its own, so the request is the call's; answered within the run's budget and journaled", async () => {
    await openai.reset();
    const r = await runTool("legacy-sample-ok", "fx-sample", "sample", { limits: { max_cost_cents: 1_000 } });
    expect(r.status, JSON.stringify(r)).toBe("succeeded");
    expect(JSON.stringify(r.result)).toContain("sampling answered:");
    expect(JSON.stringify(r.result)).toContain("A short summary.");
    expect((await openai.requests()).count).toBe(1);
    expect(r.usage?.cost_cents).toBe(3);
    const sampled = (await lines(r.id)).filter((l) => l.kind === "model_turn");
    expect(sampled).toHaveLength(1);
    expect(sampled[0]).toMatchObject({
      state: "observed",
      sampling: { server: "fx-sample", tool: "sample" },
      input_tokens: 20,
      output_tokens: 10,
      cost_cents: 3,
    });
  });

  it("38.7 over Streamable HTTP (server-everything): the call's own session is opened and ended around it, its sampling answered and journaled", async () => {
    await openai.reset();
    const def = {
      name: "legacy-sample-http",
      limits: { max_cost_cents: 1_000 },
      nodes: [{ id: "sum", kind: "tool", server: "every", tool: "trigger-sampling-request", arguments: { prompt: "hello", maxTokens: 40 }, retry: ONE_RETRY }],
    };
    expect((await client().putDefinition(def)).outcome).toMatch(/published|unchanged/);
    const started = await client().startRun({ definition: "legacy-sample-http" });
    const r = (await world.settled((started.run as RunAnswer).id, client())) as Ended;
    expect(r.status, JSON.stringify(r)).toBe("succeeded");
    expect(JSON.stringify(r.result)).toContain("A short summary.");
    const asked = await openai.requests();
    expect(asked.count).toBe(1);
    expect(JSON.stringify(asked.requests[0]!.body)).toContain("You are a helpful test server.");
    const sampled = (await lines(r.id)).filter((l) => l.kind === "model_turn");
    expect(sampled.map((l) => [l.sampling?.server, l.state, l.cost_cents])).toEqual([["every", "observed", 3]]);
  });

  it("38.7 over the run's budget the server receives an MCP error (-32600) and the model is never called", async () => {
    await openai.reset();
    const r = await runTool("legacy-sample-broke", "fx-sample", "sample", { limits: { max_cost_cents: 1 } });
    // The fixture's tool reports the client's refusal as its own error.
    expect(r.status).toBe("failed");
    expect(r.nodes.sum!.error).toMatchObject({ code: "tool_error" });
    expect(messageOf(r)).toMatch(/sampling refused: MCP error -32600: .*over the run's budget/);
    expect((await openai.requests()).count).toBe(0);
    expect((await lines(r.id)).filter((l) => l.kind === "model_turn").map((l) => l.state)).toEqual(["failed"]);
  });

  it("38.7 a server without a sampling policy stays on the shared session: its request is refused with an MCP error saying why", async () => {
    await openai.reset();
    const r = await runTool("legacy-sample-none", "fx-plain", "sample");
    expect(r.nodes.sum!.error).toMatchObject({ code: "tool_error" });
    expect(messageOf(r)).toMatch(/MCP error -32600: .*does not route sampling.*sampling policy/);
    expect((await openai.requests()).count).toBe(0);
  });
});

describe("38.7 sampling during an agent's tool call", () => {
  it("38.7 the agent's tool call is served like a tool node's: its sampling is journaled between the agent's turns, keyed under the turn that made the call", async () => {
    await openai.reset();
    const def = {
      name: "agent-sampling",
      limits: { max_cost_cents: 1_000 },
      nodes: [{ id: "ask", kind: "agent", model: "scripted/demo", instructions: "Summarize.", input: "Go.", tools: ["writer/summarize"] }],
    };
    expect((await client().putDefinition(def)).outcome).toMatch(/published|unchanged/);
    const started = await client().startRun({ definition: "agent-sampling" });
    const r = (await world.settled((started.run as RunAnswer).id, client())) as Ended;
    expect(r.status, JSON.stringify(r)).toBe("succeeded");
    expect(r.result).toEqual({ ask: "Done." });
    expect((await openai.requests()).count).toBe(1);
    const t = (await lines(r.id)) as (Line & { turn?: number })[];
    expect(t.filter((l) => l.kind === "model_turn").map((l) => [l.turn, l.model, l.sampling?.tool ?? null, l.state])).toEqual([
      [0, "demo", null, "observed"],
      [0, "fake-gpt", "summarize", "observed"],
      [1, "demo", null, "observed"],
    ]);
    expect(r.usage?.cost_cents).toBe(3);
  });
});
