import { ModelResponseSchema, type ExecuteRequest, type Receipt } from "../../machines/index.js";
import type { SamplingAnswer, SamplingAsk } from "../run/index.js";
import type { TurnMeter } from "./loop.js";
import { inputTokenBound, turnCents } from "./money.js";
import type { ModelPort, TurnPrice } from "./port.js";

/** JSON-RPC's InvalidRequest: the policy or the budget does not allow the request. */
const INVALID_REQUEST = -32600;
/** JSON-RPC's InternalError: the model could not answer. */
const INTERNAL_ERROR = -32603;

/** The run's answer to an intent, as far as sampling reads it. */
type IntentAnswer = { outcome: string; value?: unknown } | undefined;

export interface SamplingDeps {
  models: ModelPort;
  /** Money on the run tree's ceiling (absent: a priced model's sampling is refused, the meter cannot hold it). */
  meter?: TurnMeter;
  /** Records the sampling's intent in the run (fenced by the attempt): `observed` with the stored response, `recorded`/`reconcile` to ask the model. */
  intent(event: Record<string, unknown> & { type: "effect.intent" }, id: string): Promise<IntentAnswer>;
  /**
   * The tenant's provider quota for `model` (`provider_quotas["<provider>/<model>"]`: requests and
   * tokens per window, cluster-wide), taken for one request of at most `tokens` (absent: none).
   */
  quota?(model: string, tokens: number): Promise<{ ok: true } | { ok: false; detail: string }>;
  /** Stores its receipt (false: the run refused it, the attempt is no longer current). */
  receipt(receipt: Receipt, cost_cents?: number): Promise<boolean>;
  now(): number;
}

/** The effect key of a sampling: the tool call's, its input round and place, and the hash of the server's params. */
export function samplingKey(callKey: string, ask: Pick<SamplingAsk, "round" | "index" | "hash">): string {
  return `${callKey}:sample${ask.round}.${ask.index}:${ask.hash.slice(0, 32)}`;
}

/**
 * A tool server's `sampling/createMessage` during the call keyed `callKey` of attempt `request`,
 * served like an agent's model turn: its intent is journaled (a sampling whose response the run
 * holds is answered from it, never asked again: after a crash too), a priced model reserves its
 * most on the tree's ceiling before it is asked (refused: the model is not called), the response
 * is stored with its tokens and cost before the server gets it.
 */
export async function serveSampling(
  deps: SamplingDeps,
  request: ExecuteRequest,
  callKey: string,
  target: { server: string; tool: string },
  ask: SamplingAsk,
  signal: AbortSignal,
): Promise<SamplingAnswer> {
  const key = samplingKey(callKey, ask);
  const fence = {
    node: request.node,
    ...(request.item !== undefined ? { item: request.item } : {}),
    attempt: request.attempt,
    lease_epoch: request.lease_epoch,
    cancellation_epoch: request.cancellation_epoch,
  };
  const asked = await deps.intent(
    {
      type: "effect.intent",
      ...fence,
      key,
      server: "model",
      tool: ask.model,
      class: "idempotent",
      arguments: { sampling: { server: target.server, tool: target.tool, round: ask.round, index: ask.index } },
      turn: true,
    },
    `intent/${key}/${request.attempt}/${request.lease_epoch}`,
  );
  if (asked?.outcome === "observed") {
    const stored = ModelResponseSchema.safeParse(asked.value);
    if (stored.success) return answered(stored.data);
    return { outcome: "refused", mcp_code: INTERNAL_ERROR, code: "corrupt_record", message: "the stored sampling response is not a model response" };
  }
  if (asked?.outcome !== "recorded" && asked?.outcome !== "reconcile") return { outcome: "stopped", reason: asked?.outcome ?? "not_decided_here" };
  const closed = async (code: string, message: string, mcp_code: number): Promise<SamplingAnswer> => {
    if (!(await deps.receipt({ key, state: "failed", error: { code, message }, at: deps.now() }))) return { outcome: "stopped", reason: "receipt_refused" };
    if (code === "rate_limited") return { outcome: "refused", mcp_code, code: "tool_sampling_rate_limited", message, retryable: true };
    return { outcome: "refused", mcp_code, code: code === "budget_exhausted" ? "tool_sampling_over_budget" : "tool_sampling_refused", message };
  };
  let price: TurnPrice | undefined;
  try {
    price = await deps.models.price?.(request.tenant, ask.model);
  } catch (err) {
    return closed("metering_unavailable", `the price of ${ask.model} could not be read: ${describe(err)}`, INTERNAL_ERROR);
  }
  const most = inputTokenBound(ask.request) + ask.request.max_tokens;
  const reserved = price ? turnCents(price, { input_tokens: inputTokenBound(ask.request), output_tokens: ask.request.max_tokens }) : 0;
  if (price) {
    const held = deps.meter
      ? await deps.meter.reserve(key, reserved).catch((err: unknown) => ({ outcome: "unavailable" as const, detail: describe(err) }))
      : { outcome: "unavailable" as const, detail: "this node has no usage meter" };
    if (held.outcome === "unavailable") return closed("metering_unavailable", `sampling with priced ${ask.model}: ${held.detail}`, INTERNAL_ERROR);
    if (held.outcome === "budget_exhausted")
      return closed(
        "budget_exhausted",
        `over the run's budget: ${held.spent_cents} of ${held.ceiling_cents} cents spent; this sampling may cost up to ${reserved}`,
        INVALID_REQUEST,
      );
  }
  // Ceilings first, then the provider's quota, then the call.
  if (deps.quota) {
    const taken = await deps.quota(ask.model, most).catch((err: unknown) => ({ ok: false as const, detail: describe(err) }));
    if (!taken.ok) {
      if (price) await deps.meter!.settle(key, reserved, 0).catch(() => undefined);
      return closed("rate_limited", `${ask.model}'s quota is spent for now (${taken.detail})`, INTERNAL_ERROR);
    }
  }
  const outcome = await deps.models.complete(request.tenant, ask.model, { model: ask.model, ...ask.request }, { signal });
  if (outcome.outcome === "failed") {
    if (price) await deps.meter!.settle(key, reserved, 0).catch(() => undefined);
    if (outcome.failure.code === "cancelled") return { outcome: "stopped", reason: "cancelled" };
    return closed(outcome.failure.code, `${ask.model} did not answer: ${outcome.failure.message}`, INTERNAL_ERROR);
  }
  const response = outcome.response;
  let cost: number | undefined;
  if (price) {
    cost = turnCents(price, response.usage);
    const settled = await deps.meter!.settle(key, reserved, cost).catch((err: unknown) => ({ outcome: "unavailable" as const, detail: describe(err) }));
    if (settled.outcome === "unavailable") cost = reserved;
  }
  if (!(await deps.receipt({ key, state: "observed", value: response, at: deps.now() }, cost))) return { outcome: "stopped", reason: "receipt_refused" };
  return answered(response);
}

/** MCP's CreateMessageResult of a model's response. */
function answered(r: { text: string; model: string; stop_reason: string }): SamplingAnswer {
  const stopReason = r.stop_reason === "max_tokens" ? "maxTokens" : r.stop_reason === "end_turn" ? "endTurn" : r.stop_reason;
  return { outcome: "ok", result: { role: "assistant", content: { type: "text", text: r.text }, model: r.model, stopReason } };
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
