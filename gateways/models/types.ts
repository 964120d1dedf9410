/**
 * The one request and response shape the agent loop speaks, whatever the provider. Adapters
 * translate it to and from their wire format; nothing provider-specific crosses this line.
 */

/** A tool call the model proposed. `arguments` is the parsed JSON object the model wrote. */
export interface ModelToolCall {
  /** The provider's id for the call (or a deterministic one for the scripted provider): only to
   *  pair a tool result with its call inside one conversation, never an effect key. */
  id: string;
  name: string;
  arguments: Record<string, unknown>;
  /** Set when the model's argument text was not a JSON object: the raw text, so the loop can
   *  tell the model instead of calling the tool with `{}`. `arguments` is then `{}`. */
  invalid_arguments?: string;
}

export type ModelMessage =
  | { role: "system"; content: string }
  | { role: "user"; content: string }
  | { role: "assistant"; content: string; tool_calls?: ModelToolCall[] }
  /** The answer to one tool call of the previous assistant message. */
  | { role: "tool"; tool_call_id: string; content: string; is_error?: boolean };

export interface ModelTool {
  name: string;
  description?: string;
  /** JSON Schema of the arguments object. */
  input_schema: Record<string, unknown>;
}

export interface ModelRequest {
  /** The provider's own model name (the part after `provider/`). */
  model: string;
  messages: ModelMessage[];
  tools?: ModelTool[];
  /** Output tokens this turn may produce (Anthropic requires one: {@link DEFAULT_MAX_TOKENS}). */
  max_tokens?: number;
  temperature?: number;
}

export interface ModelUsage {
  input_tokens: number;
  output_tokens: number;
  /** True when the provider reported no usage and the figures are estimated (about four
   *  characters a token), so ceilings still count the turn. */
  estimated?: boolean;
}

/** Why the model stopped, the same words for every provider. */
export type ModelStopReason = "end_turn" | "tool_use" | "max_tokens" | "refusal" | "other";

export interface ModelResponse {
  text: string;
  tool_calls: ModelToolCall[];
  usage: ModelUsage;
  stop_reason: ModelStopReason;
  /** The model that answered, as the provider names it (the requested name if it says none). */
  model: string;
  /** From the call's start to the end of the stream, on the node's monotonic clock. */
  latency_ms: number;
}

/**
 * Why a call failed: a closed set the loop switches on, never an exception. `rate_limited` and
 * `transient` may succeed if asked again (see `retryDecision`); the others will not.
 */
export type ModelFailure =
  | {
      code: "rate_limited";
      message: string;
      status?: number;
      /** From `retry-after-ms` or `retry-after`, when the provider sent one. */ retry_after_ms?: number;
    }
  | { code: "transient"; message: string; status?: number; reason: "server_error" | "connection" | "timeout"; retry_after_ms?: number }
  | { code: "model_bad_request"; message: string; status?: number }
  | { code: "model_auth_failed"; message: string; status?: number }
  | { code: "context_too_long"; message: string; status?: number }
  | { code: "model_not_found"; message: string; status?: number }
  | { code: "model_malformed_response"; message: string; status?: number }
  /** The caller's AbortSignal fired: the request was stopped, nothing is to be retried. */
  | { code: "cancelled"; message: string };
export type ModelFailureCode = ModelFailure["code"];

export const MODEL_FAILURE_CODES = [
  "rate_limited",
  "transient",
  "model_bad_request",
  "model_auth_failed",
  "context_too_long",
  "model_not_found",
  "model_malformed_response",
  "cancelled",
] as const satisfies readonly ModelFailureCode[];

export type ModelOutcome = { outcome: "ok"; response: ModelResponse } | { outcome: "failed"; failure: ModelFailure };

export interface ModelCallOptions {
  /** Stops the request (and the stream) when it fires; the call then fails `cancelled`. */
  signal?: AbortSignal;
  /** Each piece of streamed text, in order, as it arrives. Their concatenation is the response's
   *  `text`. A call that fails may have delivered some pieces first (a retry streams from the
   *  start). A throwing callback is ignored: live tokens never fail a turn. */
  onDelta?: (text: string) => void;
}

/**
 * The provider port. `complete` never throws and never retries: one call is one request, so a
 * caller's counter of requests is the provider's; retries are the caller's (`completeWithRetry`).
 */
export interface ModelProvider {
  readonly name: string;
  readonly kind: "openai" | "anthropic" | "scripted";
  complete(request: ModelRequest, options?: ModelCallOptions): Promise<ModelOutcome>;
}

/** Output tokens asked for when a request sets none (Anthropic's API requires a figure). */
export const DEFAULT_MAX_TOKENS = 4_096;
