// Provider records (validation, keys no view shows) and the scripted provider (deterministic,
// stateless turns): no server needed.
import { inspect } from "node:util";
import { describe, expect, it } from "vitest";
import { providerKey, storedSpec } from "../../gateways/models/config.js";
import { toAnthropic } from "../../gateways/models/anthropic.js";
import { toolCall } from "../../gateways/models/turn.js";
import {
  completeWithRetry,
  createModelProvider,
  ModelProviderRecord,
  scriptedResponse,
  scriptedTurnIndex,
  turnCostCents,
  type ModelOutcome,
} from "../../gateways/models/index.js";
import type { ModelRequest } from "../../machines/index.js";

const KEY = "sk-unit-0123456789abcdef";

function record(input: unknown): ModelProviderRecord {
  const parsed = ModelProviderRecord.parse(input);
  if (parsed.outcome !== "valid") throw new Error(parsed.reason);
  return parsed.record;
}

function ok(outcome: ModelOutcome) {
  if (outcome.outcome !== "ok") throw new Error(JSON.stringify(outcome));
  return outcome.response;
}

describe("provider records", () => {
  it("defaults the base URL, timeout and prices per kind", () => {
    expect(record({ name: "oa", kind: "openai" }).view()).toEqual({
      name: "oa",
      kind: "openai",
      base_url: "https://api.openai.com/v1",
      timeout_ms: 120_000,
      prices: {},
      api_key_set: false,
    });
    expect(record({ name: "an", kind: "anthropic", api_key: KEY }).view()).toMatchObject({ base_url: "https://api.anthropic.com", api_key_set: true });
  });

  it("no view, JSON, inspect or spread of a record shows its key; the store and adapters still read it", () => {
    const r = record({ name: "oa", kind: "openai", base_url: "http://127.0.0.1:1/v1", api_key: KEY });
    expect(JSON.stringify(r.view())).not.toContain(KEY);
    expect(JSON.stringify(r)).not.toContain(KEY);
    expect(JSON.stringify({ ...r })).not.toContain(KEY);
    expect(inspect(r, { depth: 10, showHidden: true })).not.toContain(KEY);
    expect(JSON.stringify(structuredClone(r.spec))).not.toContain(KEY);
    expect(providerKey(r)).toBe(KEY);
    expect(storedSpec(r)).toMatchObject({ api_key: KEY });
    expect(record(storedSpec(r)).view()).toEqual(r.view());
  });

  it("a refusal names the field and never echoes the key", () => {
    const bad = ModelProviderRecord.parse({ name: "bad name", kind: "openai", api_key: KEY, base_url: KEY });
    expect(bad.outcome).toBe("invalid");
    if (bad.outcome === "invalid") {
      expect(bad.reason).toContain("name");
      expect(bad.reason).toContain("base_url");
      expect(bad.reason).not.toContain(KEY);
    }
    expect(ModelProviderRecord.parse({ name: "x", kind: "gemini" }).outcome).toBe("invalid");
    expect(ModelProviderRecord.parse({ name: "x", kind: "openai", surprise: 1 }).outcome).toBe("invalid");
    expect(ModelProviderRecord.parse({ name: "x", kind: "scripted", api_key: KEY, script: { turns: [] } }).outcome).toBe("invalid");
  });

  it("prices a turn in cents per million tokens", () => {
    const r = record({ name: "oa", kind: "openai", prices: { "gpt-x": { input_cents_per_mtok: 250, output_cents_per_mtok: 1_000 } } });
    expect(turnCostCents(r.price("gpt-x"), { input_tokens: 2_000_000, output_tokens: 500_000 })).toBe(1_000);
    expect(turnCostCents(r.price("other"), { input_tokens: 1, output_tokens: 1 })).toBeUndefined();
    expect(r.price("constructor")).toBeUndefined();
  });

  it("a model the record does not list is model_not_found without a request", async () => {
    const p = createModelProvider(record({ name: "s", kind: "scripted", models: ["m1"], script: { turns: [{ text: "hi" }] } }));
    expect(ok(await p.complete({ model: "m1", messages: [{ role: "user", content: "x" }] })).text).toBe("hi");
    const refused = await p.complete({ model: "m2", messages: [{ role: "user", content: "x" }] });
    expect(refused).toMatchObject({ outcome: "failed", failure: { code: "model_not_found" } });
  });
});

describe("scripted provider", () => {
  const script = {
    turns: [
      { text: "I will look it up.", tool_calls: [{ name: "search", arguments: { q: "runway" } }], usage: { input_tokens: 11, output_tokens: 4 } },
      { text: "Runway is a durable runtime for agent workflows, and it streams." },
    ],
    chunk_chars: 8,
  };
  const provider = createModelProvider(record({ name: "demo", kind: "scripted", script }));
  const first: ModelRequest = { model: "m", messages: [{ role: "user", content: "what is runway?" }] };
  const second: ModelRequest = {
    model: "m",
    messages: [
      ...first.messages,
      { role: "assistant", content: "I will look it up.", tool_calls: [{ id: "call_0_0", name: "search", arguments: { q: "runway" } }] },
      { role: "tool", tool_call_id: "call_0_0", content: "a runtime" },
    ],
  };

  it("answers the turn its conversation is at: the number of assistant messages", async () => {
    expect(scriptedTurnIndex(first)).toBe(0);
    expect(scriptedTurnIndex(second)).toBe(1);
    const a = ok(await provider.complete(first));
    expect(a).toMatchObject({ text: "I will look it up.", stop_reason: "tool_use", usage: { input_tokens: 11, output_tokens: 4 }, model: "m" });
    expect(a.tool_calls).toEqual([{ id: "call_0_0", name: "search", arguments: { q: "runway" } }]);
    const b = ok(await provider.complete(second));
    expect(b).toMatchObject({ text: script.turns[1]?.text, stop_reason: "end_turn", tool_calls: [] });
    expect(b.usage.input_tokens).toBeGreaterThan(0);
  });

  it("is stateless: the same conversation, asked again (a resume after a crash), gets the same answer", async () => {
    const again = createModelProvider(record({ name: "demo", kind: "scripted", script }));
    const strip = (o: ModelOutcome) => ({ ...ok(o), latency_ms: 0 });
    expect(strip(await again.complete(second))).toEqual(strip(await provider.complete(second)));
    expect(strip(await provider.complete(second))).toEqual(strip(await provider.complete(second)));
    const parsed = record({ name: "demo", kind: "scripted", script }).spec;
    if (parsed.kind !== "scripted") throw new Error("kind");
    expect(scriptedResponse(parsed.script, 1, second)).toEqual(scriptedResponse(parsed.script, 1, second));
  });

  it("streams its text in word pieces whose concatenation is the text", async () => {
    const deltas: string[] = [];
    const r = ok(await provider.complete(second, { onDelta: (d) => deltas.push(d) }));
    expect(deltas.length).toBeGreaterThan(3);
    expect(deltas.join("")).toBe(r.text);
  });

  it("a callback that throws does not fail the turn", async () => {
    const r = ok(
      await provider.complete(first, {
        onDelta: () => {
          throw new Error("listener broke");
        },
      }),
    );
    expect(r.text).toBe("I will look it up.");
  });

  it("a turn past the script's end is model_bad_request, and is not retried", async () => {
    const third: ModelRequest = { model: "m", messages: [...second.messages, { role: "assistant", content: "done" }, { role: "user", content: "more" }] };
    const out = await completeWithRetry(provider, third, {}, { sleep: () => Promise.reject(new Error("must not wait")) });
    expect(out).toMatchObject({ outcome: "failed", failure: { code: "model_bad_request" } });
  });

  it("an abort during a turn's delay is cancelled", async () => {
    const slow = createModelProvider(record({ name: "slow", kind: "scripted", script: { turns: [{ text: "late" }], delay_ms: 60_000 } }));
    const controller = new AbortController();
    const pending = slow.complete(first, { signal: controller.signal });
    controller.abort();
    expect(await pending).toMatchObject({ outcome: "failed", failure: { code: "cancelled" } });
  });
});

describe("conversation shapes", () => {
  it("a tool call's argument text that is not a JSON object is kept raw beside empty arguments", () => {
    expect(toolCall("c", "t", ' {"a": 1} ')).toEqual({ id: "c", name: "t", arguments: { a: 1 } });
    expect(toolCall("c", "t", "")).toEqual({ id: "c", name: "t", arguments: {} });
    expect(toolCall("c", "t", '{"a": 1')).toEqual({ id: "c", name: "t", arguments: {}, invalid_arguments: '{"a": 1' });
    expect(toolCall("c", "t", "[1]")).toEqual({ id: "c", name: "t", arguments: {}, invalid_arguments: "[1]" });
  });

  it("Anthropic: system text leaves the messages; tool results and a following user text share one user message", () => {
    expect(
      toAnthropic([
        { role: "system", content: "sys" },
        { role: "user", content: "q" },
        {
          role: "assistant",
          content: "calling",
          tool_calls: [
            { id: "a", name: "t", arguments: { x: 1 } },
            { id: "b", name: "t", arguments: {} },
          ],
        },
        { role: "tool", tool_call_id: "a", content: "1" },
        { role: "tool", tool_call_id: "b", content: "refused by a person", is_error: true },
        { role: "user", content: "go on" },
      ]),
    ).toEqual([
      { role: "user", content: [{ type: "text", text: "q" }] },
      {
        role: "assistant",
        content: [
          { type: "text", text: "calling" },
          { type: "tool_use", id: "a", name: "t", input: { x: 1 } },
          { type: "tool_use", id: "b", name: "t", input: {} },
        ],
      },
      {
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: "a", content: "1" },
          { type: "tool_result", tool_use_id: "b", content: "refused by a person", is_error: true },
          { type: "text", text: "go on" },
        ],
      },
    ]);
  });
});
