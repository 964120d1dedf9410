import type { ChatCompletionChunk, ChatCompletionCreateParamsStreaming, ChatCompletionMessageParam } from "openai/resources/chat/completions";
import { providerKey, redact, type ModelProviderRecord } from "./config.js";
import { classifyHttpFailure, clip, describe, isConnectionError } from "./failures.js";
import { openaiSdk, type OpenAiSdk } from "./sdk.js";
import { deliver, estimateUsage, idleGuard, toolCall } from "./turn.js";
import type { ModelCallOptions, ModelFailure, ModelMessage, ModelOutcome, ModelProvider, ModelRequest, ModelStopReason, ModelToolCall } from "./types.js";

type OpenAiSpec = Extract<ModelProviderRecord["spec"], { kind: "openai" }>;

/**
 * An OpenAI-compatible chat-completions provider (OpenAI, vLLM, Ollama, LM Studio…), always
 * streamed: text deltas go to `onDelta` in order, tool-call arguments are assembled from their
 * pieces, usage is read from the last chunk (`stream_options.include_usage`). The SDK's own
 * retries are off: one `complete` is one request.
 */
export class OpenAiProvider implements ModelProvider {
  readonly kind = "openai" as const;
  readonly name: string;
  readonly #spec: OpenAiSpec;
  readonly #key: string | undefined;
  #client: Promise<{ sdk: OpenAiSdk; client: InstanceType<OpenAiSdk["OpenAI"]> }> | undefined;

  constructor(record: ModelProviderRecord) {
    if (record.spec.kind !== "openai") throw new Error(`provider ${record.name} is not an openai provider`);
    this.name = record.name;
    this.#spec = record.spec;
    this.#key = providerKey(record);
  }

  #connect() {
    this.#client ??= openaiSdk().then((sdk) => ({
      sdk,
      client: new sdk.OpenAI({
        // Every credential is passed explicitly: the SDK would otherwise read the node's own
        // OPENAI_* variables and send them to a tenant's server. A keyless local server gets no
        // Authorization header at all.
        apiKey: this.#key ?? "none",
        ...(this.#key === undefined ? { defaultHeaders: { Authorization: null } } : {}),
        adminAPIKey: null,
        organization: null,
        project: null,
        webhookSecret: null,
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
    let sdk: OpenAiSdk | undefined;
    let text = "";
    let model = request.model;
    let finish: string | null | undefined;
    let usage: { input_tokens: number; output_tokens: number } | undefined;
    let chunks = 0;
    const calls = new Map<number, { id: string; name: string; args: string }>();
    const guard = idleGuard(signal, this.#spec.timeout_ms);
    try {
      const connected = await this.#connect();
      sdk = connected.sdk;
      const stream = await connected.client.chat.completions.create(this.#body(request), { signal: guard.signal });
      for await (const chunk of stream as AsyncIterable<ChatCompletionChunk>) {
        guard.touch();
        chunks++;
        if (typeof chunk.model === "string" && chunk.model) model = chunk.model;
        if (chunk.usage) usage = { input_tokens: chunk.usage.prompt_tokens ?? 0, output_tokens: chunk.usage.completion_tokens ?? 0 };
        const choice = chunk.choices?.find((c) => (c.index ?? 0) === 0);
        if (!choice) continue;
        const delta = choice.delta;
        if (typeof delta?.content === "string" && delta.content) {
          text += delta.content;
          deliver(onDelta, delta.content);
        }
        for (const piece of delta?.tool_calls ?? []) {
          // a server that omits the index starts a new call with each new id
          const index =
            typeof piece.index === "number"
              ? piece.index
              : piece.id && ![...calls.values()].some((c) => c.id === piece.id)
                ? calls.size
                : Math.max(0, calls.size - 1);
          const at = calls.get(index) ?? { id: "", name: "", args: "" };
          calls.set(index, at);
          if (piece.id && !at.id) at.id = piece.id;
          // the name comes whole (some servers repeat it in every piece); arguments come in pieces
          if (piece.function?.name && !at.name) at.name = piece.function.name;
          if (piece.function?.arguments) at.args += piece.function.arguments;
        }
        if (choice.finish_reason) finish = choice.finish_reason;
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
    if (chunks === 0) return malformed(`${this.name}: the server answered without a single chat-completion chunk`);
    if (!finish) return truncated(`${this.name}: the stream ended before the model finished (no finish_reason)`);
    const toolCalls: ModelToolCall[] = [...calls.entries()].sort(([a], [b]) => a - b).map(([index, c]) => toolCall(c.id || `call_${index}`, c.name, c.args));
    if (toolCalls.some((c) => !c.name)) return malformed(`${this.name}: a streamed tool call has no name`);
    return {
      outcome: "ok",
      response: {
        text,
        tool_calls: toolCalls,
        usage: usage ?? estimateUsage(request.messages, text, toolCalls),
        stop_reason: stopReason(finish, toolCalls.length > 0),
        model,
        latency_ms: performance.now() - started,
      },
    };
  }

  #body(request: ModelRequest): ChatCompletionCreateParamsStreaming {
    const maxParam = this.#spec.max_tokens_param ?? (new URL(this.#spec.base_url).hostname === "api.openai.com" ? "max_completion_tokens" : "max_tokens");
    return {
      model: request.model,
      messages: request.messages.map(toOpenAi),
      stream: true,
      stream_options: { include_usage: true },
      ...(request.tools?.length
        ? {
            tools: request.tools.map((t) => ({
              type: "function" as const,
              function: { name: t.name, ...(t.description !== undefined ? { description: t.description } : {}), parameters: t.input_schema },
            })),
          }
        : {}),
      ...(request.max_tokens !== undefined ? { [maxParam]: request.max_tokens } : {}),
      ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
    };
  }

  #failure(sdk: OpenAiSdk | undefined, err: unknown): ModelFailure {
    const secret = (text: string) => clip(redact(text, [this.#key]));
    if (sdk && err instanceof sdk.APIUserAbortError) return cancelledFailure();
    if (sdk && err instanceof sdk.APIConnectionTimeoutError)
      return { code: "transient", reason: "timeout", message: `${this.name}: no answer within ${this.#spec.timeout_ms} ms` };
    if (sdk && err instanceof sdk.APIConnectionError)
      return { code: "transient", reason: "connection", message: secret(`${this.name}: ${describe(err.cause ?? err)}`) };
    if (sdk && err instanceof sdk.APIError) {
      const body = (err.error ?? {}) as { message?: unknown; code?: unknown; type?: unknown };
      const said = typeof body.message === "string" ? body.message : err.message;
      const code = typeof err.code === "string" ? err.code : typeof body.code === "string" ? body.code : typeof body.type === "string" ? body.type : undefined;
      return classifyHttpFailure({ status: err.status, headers: err.headers, message: secret(`${this.name}: ${said}`), code, now: Date.now() });
    }
    if (err instanceof SyntaxError) return { code: "model_malformed_response", message: secret(`${this.name}: a streamed chunk is not JSON: ${err.message}`) };
    if (isConnectionError(err)) return { code: "transient", reason: "connection", message: secret(`${this.name}: ${describe(err)}`) };
    return { code: "model_malformed_response", message: secret(`${this.name}: ${describe(err)}`) };
  }
}

function toOpenAi(m: ModelMessage): ChatCompletionMessageParam {
  switch (m.role) {
    case "system":
    case "user":
      return { role: m.role, content: m.content };
    case "assistant":
      return {
        role: "assistant",
        content: m.content || null,
        ...(m.tool_calls?.length
          ? {
              tool_calls: m.tool_calls.map((c) => ({
                id: c.id,
                type: "function" as const,
                function: { name: c.name, arguments: c.invalid_arguments ?? JSON.stringify(c.arguments) },
              })),
            }
          : {}),
      };
    case "tool":
      return { role: "tool", tool_call_id: m.tool_call_id, content: m.content };
  }
}

function stopReason(finish: string, hasCalls: boolean): ModelStopReason {
  switch (finish) {
    case "stop":
      return hasCalls ? "tool_use" : "end_turn";
    case "tool_calls":
    case "function_call":
      return "tool_use";
    case "length":
      return "max_tokens";
    case "content_filter":
      return "refusal";
    default:
      return "other";
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
