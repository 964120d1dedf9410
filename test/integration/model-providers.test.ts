// The OpenAI-compatible and Anthropic adapters against fake servers of our own, each a real HTTP
// process (test/fixtures/models/): streaming, tool calls assembled from pieces, usage, every typed
// failure, aborts, and the key kept out of every failure. The fake's own request counter proves
// how many requests a call made.
import { inspect } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { completeWithRetry, createModelProvider, ModelProviderRecord, type ModelOutcome, type ModelProvider } from "../../gateways/models/index.js";
import type { ModelRequest } from "../../machines/index.js";
import { freePort, killAll, waitFor } from "../harness/index.js";
import { startModelFake, type FakeStep, type ModelFakeHandle } from "../fixtures/models/start.js";

const KEY = "sk-test-7f3a9c1e5b2d4f6a8c0e";

function provider(kind: "openai" | "anthropic", baseUrl: string, extra: Record<string, unknown> = {}): ModelProvider {
  const parsed = ModelProviderRecord.parse({ name: `fake-${kind}`, kind, base_url: baseUrl, api_key: KEY, ...extra });
  if (parsed.outcome !== "valid") throw new Error(parsed.reason);
  return createModelProvider(parsed.record);
}

const hello: ModelRequest = {
  model: "fake-model",
  messages: [
    { role: "system", content: "be brief" },
    { role: "user", content: "hello" },
  ],
  max_tokens: 100,
};

function failure(outcome: ModelOutcome) {
  if (outcome.outcome !== "failed") throw new Error(`expected a failure, got ${JSON.stringify(outcome)}`);
  return outcome.failure;
}

function response(outcome: ModelOutcome) {
  if (outcome.outcome !== "ok") throw new Error(`expected a response, got ${JSON.stringify(outcome)}`);
  return outcome.response;
}

afterAll(() => killAll());

describe.each(["openai", "anthropic"] as const)("%s adapter against its fake server", (kind) => {
  let fake: ModelFakeHandle;
  let model: ModelProvider;

  beforeAll(async () => {
    fake = await startModelFake(kind);
    model = provider(kind, fake.baseUrl);
  });
  afterAll(() => fake?.stop());

  async function run(steps: FakeStep[], request: ModelRequest = hello, onDelta?: (t: string) => void): Promise<ModelOutcome> {
    await fake.script(steps);
    await fake.reset();
    return model.complete(request, onDelta ? { onDelta } : {});
  }

  it("a text turn: streamed deltas in order, usage from the stream, the key sent once", async () => {
    const deltas: string[] = [];
    const text = "Hello there, streaming world!";
    const r = response(await run([{ reply: { text, usage: { input_tokens: 12, output_tokens: 7 }, chunk_chars: 4 } }], hello, (d) => deltas.push(d)));
    expect(r.text).toBe(text);
    expect(deltas.length).toBeGreaterThan(3);
    expect(deltas.join("")).toBe(text);
    expect(r.usage).toEqual({ input_tokens: 12, output_tokens: 7 });
    expect(r.stop_reason).toBe("end_turn");
    expect(r.tool_calls).toEqual([]);
    expect(r.model).toBe("fake-model");
    expect(r.latency_ms).toBeGreaterThan(0);
    const seen = await fake.requests();
    expect(seen.count).toBe(1);
    const [req] = seen.requests;
    if (kind === "openai") {
      expect(req?.authorization).toBe(`Bearer ${KEY}`);
      expect(req?.body).toMatchObject({ model: "fake-model", stream: true, stream_options: { include_usage: true }, max_tokens: 100 });
    } else {
      // this SDK sends the key as a bearer token; the real API accepts either header
      expect(req?.authorization === `Bearer ${KEY}` || req?.x_api_key === KEY).toBe(true);
      expect(req?.body).toMatchObject({ model: "fake-model", stream: true, system: "be brief", max_tokens: 100, messages: [{ role: "user" }] });
    }
  });

  it("tool calls whose arguments arrive split across chunks are assembled", async () => {
    const args = { city: "Paris", days: 3, nested: { list: [1, 2, 3], note: 'a "quoted" {brace}' } };
    const r = response(
      await run([
        {
          reply: {
            text: "Let me look.",
            tool_calls: [
              { id: "call_a", name: "weather", arguments: args },
              { id: "call_b", name: "clock", arguments: {} },
            ],
            chunk_chars: 3,
            usage: { input_tokens: 40, output_tokens: 22 },
          },
        },
      ]),
    );
    expect(r.text).toBe("Let me look.");
    expect(r.tool_calls).toEqual([
      { id: "call_a", name: "weather", arguments: args },
      { id: "call_b", name: "clock", arguments: {} },
    ]);
    expect(r.stop_reason).toBe("tool_use");
    expect(r.usage).toEqual({ input_tokens: 40, output_tokens: 22 });
  });

  it("a conversation with tool calls and results goes out in the provider's own shape", async () => {
    const request: ModelRequest = {
      model: "fake-model",
      messages: [
        { role: "system", content: "sys" },
        { role: "user", content: "weather?" },
        { role: "assistant", content: "", tool_calls: [{ id: "c1", name: "weather", arguments: { city: "Oslo" } }] },
        { role: "tool", tool_call_id: "c1", content: "rain" },
      ],
      tools: [{ name: "weather", description: "the weather", input_schema: { type: "object", properties: { city: { type: "string" } } } }],
    };
    response(await run([{ reply: { text: "It rains." } }], request));
    const body = (await fake.requests()).requests[0]?.body as Record<string, unknown>;
    if (kind === "openai") {
      expect(body.messages).toEqual([
        { role: "system", content: "sys" },
        { role: "user", content: "weather?" },
        { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "weather", arguments: '{"city":"Oslo"}' } }] },
        { role: "tool", tool_call_id: "c1", content: "rain" },
      ]);
      expect(body.tools).toEqual([
        { type: "function", function: { name: "weather", description: "the weather", parameters: request.tools?.[0]?.input_schema } },
      ]);
    } else {
      expect(body.system).toBe("sys");
      expect(body.messages).toEqual([
        { role: "user", content: [{ type: "text", text: "weather?" }] },
        { role: "assistant", content: [{ type: "tool_use", id: "c1", name: "weather", input: { city: "Oslo" } }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "c1", content: "rain" }] },
      ]);
      expect(body.tools).toEqual([{ name: "weather", description: "the weather", input_schema: { type: "object", properties: { city: { type: "string" } } } }]);
    }
  });

  it("no usage in the stream: the turn is estimated, never counted zero", async () => {
    const r = response(await run([{ reply: { text: "a reply of some length", no_usage: true } }]));
    expect(r.usage.estimated).toBe(true);
    expect(r.usage.input_tokens).toBeGreaterThan(0);
    expect(r.usage.output_tokens).toBeGreaterThan(0);
  });

  it("429 with retry-after is rate_limited with retry_after_ms", async () => {
    expect(failure(await run([{ status: 429, headers: { "retry-after": "7" } }]))).toMatchObject({ code: "rate_limited", status: 429, retry_after_ms: 7000 });
    expect(failure(await run([{ status: 429, headers: { "retry-after-ms": "1234" } }]))).toMatchObject({ code: "rate_limited", retry_after_ms: 1234 });
    expect((await fake.requests()).count).toBe(1);
  });

  it("500 is transient", async () => {
    expect(failure(await run([{ status: 500, message: "boom" }]))).toMatchObject({ code: "transient", reason: "server_error", status: 500 });
    expect(failure(await run([{ status: 503, headers: { "retry-after": "2" } }]))).toMatchObject({ code: "transient", retry_after_ms: 2000 });
  });

  it("401 is model_auth_failed, and the key never appears in the failure", async () => {
    const outcome = await run([{ status: 401, echo_key: true }]);
    const f = failure(outcome);
    expect(f.code).toBe("model_auth_failed");
    expect(f.message).toContain("Incorrect API key provided: [redacted]");
    expect(f.message).not.toContain(KEY);
    expect(JSON.stringify(outcome)).not.toContain(KEY);
    expect(inspect(outcome, { depth: 10 })).not.toContain(KEY);
    expect((await fake.requests()).count).toBe(1);
  });

  it("400 for context length is context_too_long; another 400 is model_bad_request", async () => {
    const tooLong: FakeStep =
      kind === "openai"
        ? {
            status: 400,
            code: "context_length_exceeded",
            message: "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
          }
        : { status: 400, message: "prompt is too long: 210000 tokens > 200000 maximum" };
    expect(failure(await run([tooLong]))).toMatchObject({ code: "context_too_long", status: 400 });
    expect(failure(await run([{ status: 400, message: "temperature: must be at most 2" }]))).toMatchObject({ code: "model_bad_request", status: 400 });
  });

  it("404 for the model is model_not_found", async () => {
    const notFound: FakeStep =
      kind === "openai" ? { status: 404, code: "model_not_found", message: "The model `nope` does not exist" } : { status: 404, message: "model: nope" };
    expect(failure(await run([notFound]))).toMatchObject({ code: "model_not_found", status: 404 });
  });

  it("an error event inside a begun stream is typed like its HTTP twin", async () => {
    const overloaded = kind === "openai" ? "server_error" : "overloaded_error";
    expect(failure(await run([{ reply: { text: "partial answer" }, cut: { after_events: 3, with: "error_event", code: overloaded } }]))).toMatchObject({
      code: "transient",
      reason: "server_error",
    });
    const limited = kind === "openai" ? "rate_limit_exceeded" : "rate_limit_error";
    expect(failure(await run([{ reply: { text: "partial answer" }, cut: { after_events: 3, with: "error_event", code: limited } }])).code).toBe("rate_limited");
  });

  it("a connection reset mid-stream, or a stream that ends before the model finished, is transient (connection)", async () => {
    expect(failure(await run([{ reply: { text: "partial answer" }, cut: { after_events: 3, with: "reset" } }]))).toMatchObject({
      code: "transient",
      reason: "connection",
    });
    expect(failure(await run([{ reply: { text: "partial answer" }, cut: { after_events: 3, with: "end" } }]))).toMatchObject({
      code: "transient",
      reason: "connection",
    });
  });

  it("a stream that stalls mid-body for timeout_ms is transient (timeout), and the request is closed", async () => {
    await fake.script([{ reply: { text: "slow" }, chunk_delay_ms: 5_000 }]);
    await fake.reset();
    const stalled = provider(kind, fake.baseUrl, { timeout_ms: 300 });
    expect(failure(await stalled.complete(hello))).toMatchObject({ code: "transient", reason: "timeout" });
    await waitFor(async () => (await fake.requests()).closed_early === 1, { timeoutMs: 10_000, describe: "the fake to see the stalled request closed" });
  });

  it("a malformed body is model_malformed_response", async () => {
    expect(failure(await run([{ malformed: "json" }])).code).toBe("model_malformed_response");
    expect(failure(await run([{ malformed: "not_sse" }])).code).toBe("model_malformed_response");
  });

  it("the AbortSignal stops the request mid-stream: cancelled, and the server sees the connection closed", async () => {
    await fake.script([{ reply: { text: "x".repeat(400), chunk_chars: 4 }, chunk_delay_ms: 20 }]);
    await fake.reset();
    const controller = new AbortController();
    const deltas: string[] = [];
    const outcome = await model.complete(hello, {
      signal: controller.signal,
      onDelta: (d) => {
        deltas.push(d);
        if (deltas.length === 2) controller.abort();
      },
    });
    expect(failure(outcome).code).toBe("cancelled");
    expect(deltas.length).toBeLessThan(10);
    await waitFor(async () => (await fake.requests()).closed_early === 1, { timeoutMs: 10_000, describe: "the fake to see the request closed early" });
    expect((await fake.requests()).count).toBe(1);
  });

  it("an AbortSignal fired before the call makes no request", async () => {
    await fake.reset();
    expect(failure(await model.complete(hello, { signal: AbortSignal.abort() })).code).toBe("cancelled");
    expect((await fake.requests()).count).toBe(0);
  });

  it("a server that does not answer within timeout_ms is transient (timeout)", async () => {
    await fake.script([{ hang: true }]);
    const slow = provider(kind, fake.baseUrl, { timeout_ms: 300 });
    expect(failure(await slow.complete(hello))).toMatchObject({ code: "transient", reason: "timeout" });
  });

  it("completeWithRetry honours retry-after and retries a 500; a fatal failure is asked once", async () => {
    await fake.script([{ status: 429, headers: { "retry-after-ms": "30" } }, { status: 500 }, { reply: { text: "finally" } }]);
    await fake.reset();
    const waits: number[] = [];
    const outcome = await completeWithRetry(
      model,
      hello,
      {},
      { random: () => 0, policy: { max_attempts: 4, base_delay_ms: 10, max_delay_ms: 100, max_retry_after_ms: 1000 }, onRetry: (_f, _a, ms) => waits.push(ms) },
    );
    expect(response(outcome).text).toBe("finally");
    expect(waits).toEqual([30, 10]);
    expect((await fake.requests()).count).toBe(3);

    await fake.script([{ status: 401 }]);
    await fake.reset();
    expect(failure(await completeWithRetry(model, hello)).code).toBe("model_auth_failed");
    expect((await fake.requests()).count).toBe(1);
  });

  it("a provider without a key sends none, not even the node's own from the environment", async () => {
    const envName = kind === "openai" ? "OPENAI_API_KEY" : "ANTHROPIC_API_KEY";
    const before = process.env[envName];
    process.env[envName] = "node-own-secret-key";
    try {
      await fake.script([{ reply: { text: "ok" } }]);
      await fake.reset();
      const parsed = ModelProviderRecord.parse({ name: "keyless", kind, base_url: fake.baseUrl });
      if (parsed.outcome !== "valid") throw new Error(parsed.reason);
      response(await createModelProvider(parsed.record).complete(hello));
      const [req] = (await fake.requests()).requests;
      expect(req?.authorization).toBeNull();
      expect(req?.x_api_key).toBeNull();
    } finally {
      if (before === undefined) delete process.env[envName];
      else process.env[envName] = before;
    }
  });
});

describe("without a server", () => {
  it.each(["openai", "anthropic"] as const)("%s: a refused connection is transient (connection)", async (kind) => {
    const port = await freePort();
    const f = failure(await provider(kind, `http://127.0.0.1:${port}${kind === "openai" ? "/v1" : ""}`).complete(hello));
    expect(f).toMatchObject({ code: "transient", reason: "connection" });
    expect(f.message).not.toContain(KEY);
  });
});
