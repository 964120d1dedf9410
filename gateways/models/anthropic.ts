import type { ContentBlockParam, MessageCreateParamsStreaming, MessageParam, RawMessageStreamEvent } from "@anthropic-ai/sdk/resources/messages";
import { providerKey, redact, type ModelProviderRecord } from "./config.js";
import { classifyHttpFailure, clip, describe, isConnectionError } from "./failures.js";
import { anthropicSdk, type AnthropicSdk } from "./sdk.js";
import { deliver, estimateUsage, idleGuard, toolCall } from "./turn.js";
import { DEFAULT_MAX_TOKENS } from "./types.js";
import type { ModelCallOptions, ModelFailure, ModelMessage, ModelOutcome, ModelProvider, ModelRequest, ModelStopReason, ModelToolCall } from "./types.js";

type AnthropicSpec = Extract<ModelProviderRecord["spec"], { kind: "anthropic" }>;

/** What a message stream said so far. */
interface Streamed {
  text: string;
  model: string;
  stop: string | null | undefined;
  input: number | undefined;
  output: number | undefined;
  opened: boolean;
  ended: boolean;
  blocks: Map<number, { kind: "text" } | { kind: "tool"; id: string; name: string; json: string }>;
  calls: ModelToolCall[];
}

function streamed(model: string): Streamed {
  return { text: "", model, stop: undefined, input: undefined, output: undefined, opened: false, ended: false, blocks: new Map(), calls: [] };
}

/** Folds one stream event into `s`, text deltas delivered to `onDelta` in order. */
function fold(s: Streamed, event: RawMessageStreamEvent, onDelta: ModelCallOptions["onDelta"]): void {
  switch (event.type) {
    case "message_start": {
      s.opened = true;
      if (event.message.model) s.model = event.message.model;
      const u = event.message.usage;
      s.input = (u.input_tokens ?? 0) + (u.cache_creation_input_tokens ?? 0) + (u.cache_read_input_tokens ?? 0);
      s.output = u.output_tokens ?? s.output;
      break;
    }
    case "content_block_start": {
      const b = event.content_block;
      if (b.type === "tool_use") s.blocks.set(event.index, { kind: "tool", id: b.id, name: b.name, json: "" });
      else if (b.type === "text") {
        s.blocks.set(event.index, { kind: "text" });
        if (b.text) {
          s.text += b.text;
          deliver(onDelta, b.text);
        }
      }
      break;
    }
    case "content_block_delta": {
      const d = event.delta;
      if (d.type === "text_delta") {
        s.text += d.text;
        deliver(onDelta, d.text);
      } else if (d.type === "input_json_delta") {
        const b = s.blocks.get(event.index);
        if (b?.kind === "tool") b.json += d.partial_json;
      }
      break;
    }
    case "content_block_stop": {
      const b = s.blocks.get(event.index);
      if (b?.kind === "tool") s.calls.push(toolCall(b.id, b.name, b.json));
      break;
    }
    case "message_delta": {
      if (event.delta.stop_reason) s.stop = event.delta.stop_reason;
      const u = event.usage;
      if (typeof u.output_tokens === "number") s.output = u.output_tokens;
      if (typeof u.input_tokens === "number") {
        const total = u.input_tokens + (u.cache_creation_input_tokens ?? 0) + (u.cache_read_input_tokens ?? 0);
        s.input = Math.max(s.input ?? 0, total);
      }
      break;
    }
    case "message_stop":
      s.ended = true;
      break;
  }
}

/**
 * The Anthropic Messages API, always streamed: `text_delta`s go to `onDelta` in order, a
 * `tool_use` block's input is assembled from its `input_json_delta`s, usage is read from
 * `message_start` (input) and `message_delta` (output, cumulative). Input tokens include cache
 * reads and writes: for ceilings a token is a token. The SDK's own retries are off.
 */
export class AnthropicProvider implements ModelProvider {
  readonly kind = "anthropic" as const;
  readonly name: string;
  readonly #spec: AnthropicSpec;
  readonly #key: string | undefined;
  #client: Promise<{ sdk: AnthropicSdk; client: InstanceType<AnthropicSdk["Anthropic"]> }> | undefined;

  constructor(record: ModelProviderRecord) {
    if (record.spec.kind !== "anthropic") throw new Error(`provider ${record.name} is not an anthropic provider`);
    this.name = record.name;
    this.#spec = record.spec;
    this.#key = providerKey(record);
  }

  #connect() {
    this.#client ??= anthropicSdk().then((sdk) => ({
      sdk,
      client: new sdk.Anthropic({
        // A key passed in code is the client's only credential: the SDK then reads neither the
        // node's ANTHROPIC_* variables nor a profile on disk. A keyless server gets no
        // credential header at all (a null header is the SDK's way to omit one).
        apiKey: this.#key ?? "none",
        ...(this.#key === undefined ? { defaultHeaders: { Authorization: null, "X-Api-Key": null } } : {}),
        baseURL: this.#spec.base_url,
        maxRetries: 0,
        timeout: this.#spec.timeout_ms,
        logLevel: "off",
      }),
    }));
    return this.#client;
  }

  async complete(request: ModelRequest, options: ModelCallOptions = {}): Promise<ModelOutcome> {
    const started = performance.now();
    const { signal, onDelta } = options;
    if (signal?.aborted) return cancelled();
    let sdk: AnthropicSdk | undefined;
    const s = streamed(request.model);
    const guard = idleGuard(signal, this.#spec.timeout_ms);
    try {
      const connected = await this.#connect();
      sdk = connected.sdk;
      const stream = await connected.client.messages.create(this.#body(request), { signal: guard.signal });
      for await (const event of stream as AsyncIterable<RawMessageStreamEvent>) {
        guard.touch();
        fold(s, event, onDelta);
      }
    } catch (err) {
      if (guard.timedOut()) return timedOut(this.name, this.#spec.timeout_ms);
      return { outcome: "failed", failure: signal?.aborted ? cancelledFailure() : this.#failure(sdk, err) };
    } finally {
      guard.dispose();
    }
    // the SDK ends an aborted stream quietly, as if it were complete
    if (guard.timedOut()) return timedOut(this.name, this.#spec.timeout_ms);
    if (signal?.aborted) return cancelled();
    if (!s.opened) return malformed(`${this.name}: the server answered without a message_start event`);
    if (!s.ended && !s.stop) return truncated(`${this.name}: the stream ended before message_stop`);
    const { text, calls, input, output } = s;
    const usage = input !== undefined && output !== undefined ? { input_tokens: input, output_tokens: output } : estimateUsage(request.messages, text, calls);
    return {
      outcome: "ok",
      response: { text, tool_calls: calls, usage, stop_reason: stopReason(s.stop, calls.length > 0), model: s.model, latency_ms: performance.now() - started },
    };
  }

  #body(request: ModelRequest): MessageCreateParamsStreaming {
    const system = request.messages
      .filter((m) => m.role === "system")
      .map((m) => m.content)
      .join("\n\n");
    return {
      model: request.model,
      max_tokens: request.max_tokens ?? DEFAULT_MAX_TOKENS,
      messages: toAnthropic(request.messages),
      stream: true,
      ...(system ? { system } : {}),
      ...(request.tools?.length
        ? {
            tools: request.tools.map((t) => ({
              name: t.name,
              ...(t.description !== undefined ? { description: t.description } : {}),
              input_schema: { type: "object" as const, ...t.input_schema },
            })),
          }
        : {}),
      ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
    };
  }

  #failure(sdk: AnthropicSdk | undefined, err: unknown): ModelFailure {
    const secret = (text: string) => clip(redact(text, [this.#key]));
    if (sdk && err instanceof sdk.APIUserAbortError) return cancelledFailure();
    if (sdk && err instanceof sdk.APIConnectionTimeoutError)
      return { code: "transient", reason: "timeout", message: `${this.name}: no answer within ${this.#spec.timeout_ms} ms` };
    if (sdk && err instanceof sdk.APIConnectionError)
      return { code: "transient", reason: "connection", message: secret(`${this.name}: ${describe(err.cause ?? err)}`) };
    if (sdk && err instanceof sdk.APIError) {
      const said = err.apiMessage ?? err.message;
      return classifyHttpFailure({
        status: err.status,
        headers: err.headers,
        message: secret(`${this.name}: ${said}`),
        code: err.type ?? undefined,
        now: Date.now(),
      });
    }
    if (err instanceof SyntaxError) return { code: "model_malformed_response", message: secret(`${this.name}: a streamed event is not JSON: ${err.message}`) };
    if (isConnectionError(err)) return { code: "transient", reason: "connection", message: secret(`${this.name}: ${describe(err)}`) };
    return { code: "model_malformed_response", message: secret(`${this.name}: ${describe(err)}`) };
  }
}

/**
 * Anthropic's conversation shape: system text goes to the top-level `system`; tool results are
 * `tool_result` blocks of a user message, and consecutive user-side entries share one message
 * (the API wants every result of an assistant turn in the very next user message).
 */
export function toAnthropic(messages: readonly ModelMessage[]): MessageParam[] {
  const out: MessageParam[] = [];
  const userBlocks = (): ContentBlockParam[] => {
    const last = out[out.length - 1];
    if (last?.role === "user" && Array.isArray(last.content)) return last.content as ContentBlockParam[];
    const blocks: ContentBlockParam[] = [];
    out.push({ role: "user", content: blocks });
    return blocks;
  };
  for (const m of messages) {
    switch (m.role) {
      case "system":
        break;
      case "user":
        userBlocks().push({ type: "text", text: m.content });
        break;
      case "tool":
        userBlocks().push({ type: "tool_result", tool_use_id: m.tool_call_id, content: m.content, ...(m.is_error ? { is_error: true } : {}) });
        break;
      case "assistant": {
        const content: ContentBlockParam[] = [];
        if (m.content) content.push({ type: "text", text: m.content });
        for (const c of m.tool_calls ?? []) content.push({ type: "tool_use", id: c.id, name: c.name, input: c.arguments });
        out.push({ role: "assistant", content });
        break;
      }
    }
  }
  return out;
}

function stopReason(stop: string | null | undefined, hasCalls: boolean): ModelStopReason {
  switch (stop) {
    case "end_turn":
    case "stop_sequence":
      return hasCalls ? "tool_use" : "end_turn";
    case "tool_use":
      return "tool_use";
    case "max_tokens":
    case "model_context_window_exceeded":
      return "max_tokens";
    case "refusal":
      return "refusal";
    default:
      return hasCalls ? "tool_use" : "other";
  }
}

function cancelledFailure(): ModelFailure {
  return { code: "cancelled", message: "the call was cancelled" };
}

function cancelled(): ModelOutcome {
  return { outcome: "failed", failure: cancelledFailure() };
}

function timedOut(name: string, ms: number): ModelOutcome {
  return { outcome: "failed", failure: { code: "transient", reason: "timeout", message: `${name}: no answer within ${ms} ms` } };
}

/** A stream that began and ended early: the connection's trouble, like a reset. */
function truncated(message: string): ModelOutcome {
  return { outcome: "failed", failure: { code: "transient", reason: "connection", message } };
}

function malformed(message: string): ModelOutcome {
  return { outcome: "failed", failure: { code: "model_malformed_response", message } };
}
