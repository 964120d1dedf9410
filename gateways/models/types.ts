/**
 * The provider port and its failures. The request and response shapes are the conversation's
 * (`machines/workflow/conversation.ts`): adapters translate them to and from their wire format;
 * nothing provider-specific crosses this line.
 */
import type { ModelRequest, ModelResponse } from "../../machines/index.js";

export type { ModelMessage, ModelRequest, ModelResponse, ModelStopReason, ModelTool, ModelToolCall, ModelUsage } from "../../machines/index.js";

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
