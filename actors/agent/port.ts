import type { ModelRequest, ModelResponse } from "../../machines/index.js";

/**
 * The model gateway as an agent step sees it: one turn of a conversation, asked of the tenant's
 * provider named in `model` (`<provider>/<model>`). The shapes are the conversation's
 * (`machines/workflow/conversation.ts`); the gateway implements this port (`modelPortOf`).
 */
export interface ModelPort {
  /** Never throws. Retries (rate limits, transient faults) are the gateway's; a failure here is final for this attempt. */
  complete(tenant: string, model: string, request: ModelRequest, options: { signal: AbortSignal; onDelta?: (text: string) => void }): Promise<TurnOutcome>;
  /** The kind of the tenant's provider `model` names (`openai`, `anthropic`): read only when tracing is on (a span's `gen_ai.provider.name`). */
  kindOf?(tenant: string, model: string): Promise<string | undefined>;
  /**
   * What `model` (`<provider>/<model>`) costs, in cents per million tokens, when the operator
   * priced it; undefined: its turns cost nothing. Absent: no model is priced.
   */
  price?(tenant: string, model: string): Promise<TurnPrice | undefined>;
}

/** A model's price: cents per million input and output tokens (fractions allowed). */
export type TurnPrice = { input_cents_per_mtok: number; output_cents_per_mtok: number };

export type TurnOutcome = { outcome: "ok"; response: ModelResponse } | { outcome: "failed"; failure: { code: string; message: string } };
