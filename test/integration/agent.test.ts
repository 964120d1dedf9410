import { Kvm } from "@nats-io/kv";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEffectsServer, type EffectsServerHandle } from "../fixtures/mcp/start.js";
import { startModelFake, type ModelFakeHandle } from "../fixtures/models/start.js";
import { workflowWorld, type RunAnswer } from "./workflow-support.js";

const world = workflowWorld({ name: "agent-node" });
let fx: EffectsServerHandle;
let openai: ModelFakeHandle;
let anthropic: ModelFakeHandle;

type Line = {
  kind: string;
  node?: string;
  turn?: number;
  model?: string;
  input_tokens?: number;
  output_tokens?: number;
  latency_ms?: number;
  tool?: string;
  state?: string;
};

/** The agent's two tools: set_value (idempotent per effect key) and get_value (read-only). */
const TOOLS = ["fx/set_value", "fx/get_value"];
/** Turn 0 sets a value, turn 1 reads it back, turn 2 answers. */
const SCRIPT = [
  { tool_calls: [{ name: "fx__set_value", arguments: { key: "city", value: "Lyon" } }], usage: { input_tokens: 30, output_tokens: 12 } },
  { tool_calls: [{ name: "fx__get_value", arguments: { key: "city" } }], usage: { input_tokens: 50, output_tokens: 9 } },
  { text: "The city is Lyon.", usage: { input_tokens: 70, output_tokens: 6 } },
];

beforeAll(async () => {
  fx = await startEffectsServer({ http: true });
  openai = await startModelFake("openai", []);
  anthropic = await startModelFake("anthropic", []);
  const c = world.client;
  expect((await c.putToolServer({ name: "fx", transport: { type: "http", url: fx.url } })).outcome).toBe("saved");
  expect((await c.putModelProvider({ name: "scripted", kind: "scripted", script: { turns: SCRIPT } })).outcome).toBe("created");
  expect((await c.putModelProvider({ name: "oa", kind: "openai", base_url: openai.baseUrl, api_key: "sk-test" })).outcome).toBe("created");
  expect((await c.putModelProvider({ name: "an", kind: "anthropic", base_url: anthropic.baseUrl, api_key: "sk-ant-test" })).outcome).toBe("created");
}, 60_000);
afterAll(async () => {
  await fx?.stop();
  await openai?.stop();
  await anthropic?.stop();
});

async function runAgent(name: string, node: Record<string, unknown>, input: unknown = { question: "Which city?" }): Promise<RunAnswer> {
  const def = { name, nodes: [{ id: "ask", kind: "agent", instructions: "Use the tools.", input: "${input.question}", tools: TOOLS, ...node }] };
  const put = await world.client.putDefinition(def);
  expect(put.outcome, JSON.stringify(put)).toMatch(/published|unchanged/);
  const started = await world.client.startRun({ definition: name, input });
  expect(started.outcome).toBe("started");
  return world.settled((started.run as RunAnswer).id);
}

async function trajectory(runId: string): Promise<Line[]> {
  const t = await world.client.trajectory(runId);
  expect(t.outcome).toBe("trajectory");
  return t.lines as Line[];
}

describe("agent node", () => {
  it("with the scripted provider and two MCP tools completes; the trajectory shows each turn (model, tokens) and each tool call", async () => {
    const run = await runAgent("agent-scripted", { model: "scripted/demo-1" });
    expect(run.status, JSON.stringify(run)).toBe("succeeded");
    expect(run.result).toEqual({ ask: "The city is Lyon." });
    const lines = await trajectory(run.id);
    const turns = lines.filter((l) => l.kind === "model_turn");
    expect(turns.map((t) => [t.turn, t.model, t.input_tokens, t.output_tokens])).toEqual([
      [0, "demo-1", 30, 12],
      [1, "demo-1", 50, 9],
      [2, "demo-1", 70, 6],
    ]);
    const calls = lines.filter((l) => l.kind === "tool_call");
    expect(calls.map((c) => [c.tool, c.state])).toEqual([
      ["set_value", "observed"],
      ["get_value", "observed"],
    ]);
    expect(fx.counts().values.city).toBe("Lyon");
  });

  it("against a fake OpenAI-compatible server (a real process; tool calls split across streamed chunks, usage in the last chunk) completes", async () => {
    await openai.script([
      {
        reply: {
          tool_calls: [{ name: "fx__set_value", arguments: { key: "colour", value: "teal" } }],
          usage: { input_tokens: 21, output_tokens: 8 },
          chunk_chars: 3,
        },
      },
      { reply: { tool_calls: [{ name: "fx__get_value", arguments: { key: "colour" } }], usage: { input_tokens: 40, output_tokens: 7 }, chunk_chars: 3 } },
      { reply: { text: "It is teal.", usage: { input_tokens: 55, output_tokens: 4 } } },
    ]);
    await openai.reset();
    const run = await runAgent("agent-openai", { model: "oa/fake-gpt" });
    expect(run.status, JSON.stringify(run)).toBe("succeeded");
    expect(run.result).toEqual({ ask: "It is teal." });
    expect((await openai.requests()).count).toBe(3);
    const lines = await trajectory(run.id);
    expect(lines.filter((l) => l.kind === "model_turn").map((t) => [t.turn, t.input_tokens, t.output_tokens])).toEqual([
      [0, 21, 8],
      [1, 40, 7],
      [2, 55, 4],
    ]);
    expect(lines.filter((l) => l.kind === "tool_call").map((c) => c.tool)).toEqual(["set_value", "get_value"]);
    expect(fx.counts().values.colour).toBe("teal");
    // The tools were offered to the model under their exposed names, with the server's schemas.
    const first = (await openai.requests()).requests[0]!.body as { tools?: { function: { name: string; parameters: unknown } }[] };
    expect(first.tools?.map((t) => t.function.name)).toEqual(["fx__set_value", "fx__get_value"]);
  });

  it("against a fake Anthropic server (a real process): a 429 with retry-after and a 500 are retried, tool calls split across streamed chunks, usage in the stream; the agent completes and the trajectory shows each turn and call", async () => {
    await anthropic.script([
      { status: 429, headers: { "retry-after-ms": "20" } },
      { status: 500 },
      {
        reply: {
          tool_calls: [{ name: "fx__set_value", arguments: { key: "shape", value: "oval" } }],
          usage: { input_tokens: 25, output_tokens: 9 },
          chunk_chars: 3,
        },
      },
      { reply: { tool_calls: [{ name: "fx__get_value", arguments: { key: "shape" } }], usage: { input_tokens: 44, output_tokens: 8 }, chunk_chars: 3 } },
      { reply: { text: "It is oval.", usage: { input_tokens: 60, output_tokens: 5 } } },
    ]);
    await anthropic.reset();
    const run = await runAgent("agent-anthropic", { model: "an/fake-claude" });
    expect(run.status, JSON.stringify(run)).toBe("succeeded");
    expect(run.result).toEqual({ ask: "It is oval." });
    // Two refused requests, then one a turn.
    expect((await anthropic.requests()).count).toBe(5);
    const lines = await trajectory(run.id);
    expect(lines.filter((l) => l.kind === "model_turn").map((t) => [t.turn, t.model, t.input_tokens, t.output_tokens])).toEqual([
      [0, "fake-claude", 25, 9],
      [1, "fake-claude", 44, 8],
      [2, "fake-claude", 60, 5],
    ]);
    expect(lines.filter((l) => l.kind === "tool_call").map((c) => c.tool)).toEqual(["set_value", "get_value"]);
    for (const turn of lines.filter((l) => l.kind === "model_turn")) expect(turn.latency_ms).toBeGreaterThanOrEqual(0);
    expect(fx.counts().values.shape).toBe("oval");
  });

  it("output_schema: a final answer that does not match gets one repair turn, then invalid_output", async () => {
    await openai.script([{ reply: { text: "not json" } }, { reply: { text: "still not json" } }]);
    await openai.reset();
    const run = await runAgent("agent-schema", { model: "oa/fake-gpt", tools: [], output_schema: { type: "object", required: ["answer"] } });
    expect(run.status).toBe("failed");
    expect(run.nodes.ask!.error?.code).toBe("invalid_output");
    expect((await openai.requests()).count).toBe(2);
    await openai.script([{ reply: { text: "Here: 42" } }, { reply: { text: '```json\n{"answer": 42}\n```' } }]);
    await openai.reset();
    const repaired = await runAgent("agent-schema", { model: "oa/fake-gpt", tools: [], output_schema: { type: "object", required: ["answer"] } });
    expect(repaired.status).toBe("succeeded");
    expect(repaired.result).toEqual({ ask: { answer: 42 } });
  });

  it("ceilings: max_turns stops the loop limit_reached; a token remainder of zero never calls the model (the fake's counter)", async () => {
    await openai.script([{ reply: { tool_calls: [{ name: "fx__get_value", arguments: { key: "x" } }], usage: { input_tokens: 60, output_tokens: 40 } } }]);
    await openai.reset();
    const turns = await runAgent("agent-turns", { model: "oa/fake-gpt", max_turns: 2 });
    expect(turns.status).toBe("failed");
    expect(turns.nodes.ask!.error?.code).toBe("limit_reached");
    expect((await openai.requests()).count).toBe(2);
    await openai.reset();
    const tokens = await runAgent("agent-tokens", { model: "oa/fake-gpt", max_tokens: 100 });
    expect(tokens.status).toBe("failed");
    expect(tokens.nodes.ask!.error?.code).toBe("limit_reached");
    // Turn 0 spent 100 tokens: the remainder is zero, so turn 1 was never asked.
    expect((await openai.requests()).count).toBe(1);
  });

  it("an unknown provider or tool fails typed (model_not_found, tool_not_found), never a crash", async () => {
    const noProvider = await runAgent("agent-noprov", { model: "nope/x", retry: { max_attempts: 1, backoff_ms: 0, max_backoff_ms: 0 } });
    expect(noProvider.status).toBe("failed");
    expect(noProvider.nodes.ask!.error?.code).toBe("model_not_found");
    const noTool = await runAgent("agent-notool", { model: "scripted/demo-1", tools: ["fx/nope"] });
    expect(noTool.status).toBe("failed");
    expect(noTool.nodes.ask!.error?.code).toBe("tool_not_found");
  });
  it("C076 a finished agent run leaves no session state outside its own record: the conversation is the run's journal of turns", async () => {
    const run = await runAgent("agent-session", { model: "scripted/demo-1" });
    expect(run.status, JSON.stringify(run)).toBe("succeeded");
    const holding: string[] = [];
    const kvm = new Kvm(world.nc);
    for await (const status of kvm.list()) {
      const kv = await kvm.open(status.bucket);
      for await (const key of await kv.keys()) if (key.includes(run.id)) holding.push(`${status.bucket}/${key}`);
    }
    // The run's own record (its partition's bucket), and nothing else: no session, no conversation store.
    expect(holding).toHaveLength(1);
    expect(holding[0]).toMatch(new RegExp(`^rw_p\\d+/run\\.${run.id}$`));
  });
});
