/** The demo's workflows: an order flow that fans out, branches, retries, sleeps and starts a child. */
export const notifyWorkflow = {
  name: "notify-customer",
  nodes: [{ id: "email", kind: "code", handler: "send_email", input: { order: "${input.order}" } }],
};

export const orderWorkflow = {
  name: "process-order",
  input_schema: { type: "object", required: ["order"], properties: { order: { type: "string" } } },
  nodes: [
    { id: "fetch", kind: "code", handler: "fetch_order", input: { order: "${input.order}" } },
    {
      id: "checks",
      kind: "parallel",
      needs: ["fetch"],
      branches: [[{ id: "stock", kind: "code", handler: "check_stock" }], [{ id: "risk", kind: "code", handler: "score_risk" }]],
    },
    { id: "price", kind: "map", needs: ["checks"], items: "${steps.fetch.output.items}", handler: "price_item", max_fanout: 20, concurrency: 2 },
    { id: "charge", kind: "code", needs: ["price"], handler: "charge_card", retry: { max_attempts: 5, backoff_ms: 200, max_backoff_ms: 1000 } },
    { id: "cool_off", kind: "sleep", needs: ["charge"], duration_ms: 1500 },
    { id: "notify", kind: "subworkflow", needs: ["cool_off"], workflow: "notify-customer", input: { order: "${input.order}" } },
  ],
  result: { order: "${input.order}", prices: "${steps.price.output}", charged: "${steps.charge.output}", notified: "${steps.notify.output}" },
};

/**
 * The demo's agent: a support agent that looks an order up and refunds it with the `shop` MCP
 * server's tools (cluster/demo/shop-server.mjs). A refund waits for a person of `support`.
 */
export const supportAgent = {
  name: "support-agent",
  approvals: { tools: ["shop/refund"], group: "support", prompt: "Refund this order?" },
  nodes: [
    {
      id: "agent",
      kind: "agent",
      model: "demo/support-model",
      instructions: "You are a shop's support agent. Look the order up before you refund it.",
      input: "${input.message}",
      tools: ["shop/lookup_order", "shop/refund"],
      max_turns: 6,
    },
  ],
  result: "${steps.agent.output}",
};

const ANSWER =
  "I am sorry your espresso cups arrived broken. I looked order A-1001 up: a set of four, paid 25.98, " +
  "delivered yesterday. I have refunded the full 25.98 to the card you paid with; it reaches it within " +
  "five working days, and you will get an email when it does. There is no need to send the cups back: " +
  "please recycle the pieces safely. If anything else about this order is wrong, answer this message " +
  "and it comes straight back to me. Thank you for telling us, and sorry again for the trouble.";

/** A scripted model (deterministic turns, no network): look up, refund, then answer in streamed pieces. */
const scriptedModel = {
  name: "demo",
  kind: "scripted",
  script: {
    turns: [
      { tool_calls: [{ name: "shop__lookup_order", arguments: { order: "A-1001" } }] },
      { tool_calls: [{ name: "shop__refund", arguments: { order: "A-1001", amount_cents: 2598, reason: "arrived broken" } }] },
      { text: ANSWER, delay_ms: 300 },
    ],
    chunk_chars: 6,
  },
};

/**
 * The demo's model provider and the agent's `model`: the scripted one, or an OpenAI-compatible
 * server when `RUNWAY_MODEL_URL` is set (with `RUNWAY_MODEL_KEY`, and `RUNWAY_MODEL`, default
 * `gpt-4o-mini`). A real model decides for itself whether to refund.
 */
export function demoModel(env: NodeJS.ProcessEnv): { provider: Record<string, unknown>; model: string; scripted: boolean } {
  const url = env.RUNWAY_MODEL_URL;
  if (!url) return { provider: scriptedModel, model: "demo/support-model", scripted: true };
  const provider = { name: "demo", kind: "openai", base_url: url, ...(env.RUNWAY_MODEL_KEY ? { api_key: env.RUNWAY_MODEL_KEY } : {}) };
  return { provider, model: `demo/${env.RUNWAY_MODEL || "gpt-4o-mini"}`, scripted: false };
}
