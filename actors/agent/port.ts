import { z } from "zod";

/**
 * The model gateway as an agent step sees it: one turn of a conversation, asked of the tenant's
 * provider named in `model` (`<provider>/<model>`). The shapes are the model layer's own
 * (`gateways/models/types.ts`); the gateway implements this port (`modelPortOf`).
 */
export interface ModelPort {
  /** Never throws. Retries (rate limits, transient faults) are the gateway's; a failure here is final for this attempt. */
  complete(tenant: string, model: string, request: TurnRequest, options: { signal: AbortSignal }): Promise<TurnOutcome>;
  /** The kind of the tenant's provider `model` names (`openai`, `anthropic`): read only when tracing is on (a span's `gen_ai.provider.name`). */
  kindOf?(tenant: string, model: string): Promise<string | undefined>;
}

export interface AgentToolCall {
  /** The provider's id: pairs a result with its call inside the conversation; never an effect key. */
  id: string;
  name: string;
  arguments: Record<string, unknown>;
  invalid_arguments?: string;
}

export type AgentMessage =
  | { role: "system"; content: string }
  | { role: "user"; content: string }
  | { role: "assistant"; content: string; tool_calls?: AgentToolCall[] }
  | { role: "tool"; tool_call_id: string; content: string; is_error?: boolean };

export interface AgentTool {
  name: string;
  description?: string;
  input_schema: Record<string, unknown>;
}

export interface TurnRequest {
  model: string;
  messages: AgentMessage[];
  tools?: AgentTool[];
  max_tokens?: number;
}

/** What a turn's receipt keeps of the model's answer: the loop reads it back instead of asking again. */
export const TurnResponseSchema = z.object({
  text: z.string(),
  tool_calls: z.array(z.object({ id: z.string(), name: z.string(), arguments: z.record(z.string(), z.unknown()), invalid_arguments: z.string().optional() })),
  usage: z.object({ input_tokens: z.number(), output_tokens: z.number(), estimated: z.boolean().optional() }),
  stop_reason: z.string(),
  model: z.string(),
  latency_ms: z.number(),
});
export type TurnResponse = z.infer<typeof TurnResponseSchema>;

export type TurnOutcome = { outcome: "ok"; response: TurnResponse } | { outcome: "failed"; failure: { code: string; message: string } };
