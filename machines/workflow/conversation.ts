import { z } from "zod";

/**
 * A conversation with a model as data: what an agent step sends and what it keeps of the
 * answers, whatever the provider. The model gateway (`gateways/models/`) translates it to and
 * from each provider's wire format; the agent loop (`actors/agent/`) builds and stores it. Here
 * because both sides use it and neither may import the other.
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
  /** Output tokens this turn may produce (Anthropic requires one: the gateway's `DEFAULT_MAX_TOKENS`). */
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
export const MODEL_STOP_REASONS = ["end_turn", "tool_use", "max_tokens", "refusal", "other"] as const;
export type ModelStopReason = (typeof MODEL_STOP_REASONS)[number];

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

/** A turn's receipt as stored: the loop reads the answer back from it instead of asking again. */
export const ModelResponseSchema: z.ZodType<ModelResponse> = z.object({
  text: z.string(),
  tool_calls: z.array(z.object({ id: z.string(), name: z.string(), arguments: z.record(z.string(), z.unknown()), invalid_arguments: z.string().optional() })),
  usage: z.object({ input_tokens: z.number(), output_tokens: z.number(), estimated: z.boolean().optional() }),
  stop_reason: z.enum(MODEL_STOP_REASONS),
  model: z.string(),
  latency_ms: z.number(),
});
