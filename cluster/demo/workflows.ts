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
