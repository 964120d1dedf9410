import type { TurnPrice } from "./port.js";

/** The agent loop's money policies: what a turn costs, what it may cost at most, and a subagent's slice. */

/**
 * The budget slicing policy: a subagent may spend up to half of what its tree has left when it
 * starts (the cap it carries as its ceiling, `spent + floor(left / 2)`); what it does not spend
 * was never taken, so it stays its parent's.
 */
export function subagentCeiling(tree: { ceiling_cents: number; spent_cents: number }): number {
  const left = Math.max(0, tree.ceiling_cents - tree.spent_cents);
  return Math.min(tree.ceiling_cents, tree.spent_cents + Math.floor(left / 2));
}

/** A turn's cost in whole cents, rounded up (the meter counts whole cents): 0 for no tokens. */
export function turnCents(price: TurnPrice, usage: { input_tokens: number; output_tokens: number }): number {
  const cents = (usage.input_tokens * price.input_cents_per_mtok + usage.output_tokens * price.output_cents_per_mtok) / 1_000_000;
  return cents <= 0 ? 0 : Math.ceil(cents - 1e-9);
}

/**
 * The most input tokens a request can be: its messages and tools as UTF-8 JSON, a token being at
 * least one byte, plus 16 a message for the provider's framing. An upper bound, not an estimate.
 */
export function inputTokenBound(request: { messages: readonly unknown[]; tools?: readonly unknown[] }): number {
  return new TextEncoder().encode(JSON.stringify([request.messages, request.tools ?? []])).length + 16 * request.messages.length;
}
