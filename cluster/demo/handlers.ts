import { appendFileSync } from "node:fs";
import { RetryableError, type Handler } from "../../runtime/pool/handler-api.js";

/**
 * The demo's step handlers. Each appends one line per invocation to RUNWAY_DEMO_LEDGER (when
 * set), a file outside the node, so the demo can show that no completed step ran twice.
 */
function record(ctx: { runId: string; stepId: string; attempt: number }): void {
  const ledger = process.env.RUNWAY_DEMO_LEDGER;
  if (ledger) appendFileSync(ledger, `${ctx.runId} ${ctx.stepId} ${ctx.attempt}\n`);
}

const pause = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener(
      "abort",
      () => {
        clearTimeout(t);
        reject(new Error("aborted"));
      },
      { once: true },
    );
  });

export const handlers: Record<string, Handler> = {
  async fetch_order(ctx) {
    record(ctx);
    await pause(150, ctx.signal);
    const input = ctx.input as { order: string };
    return { order: input.order, items: ["keyboard", "mouse", "monitor", "cable", "stand"] };
  },
  async check_stock(ctx) {
    record(ctx);
    await pause(200, ctx.signal);
    return { in_stock: true };
  },
  async score_risk(ctx) {
    record(ctx);
    await pause(250, ctx.signal);
    return { risk: "low" };
  },
  async price_item(ctx) {
    record(ctx);
    await pause(120, ctx.signal);
    const item = ctx.input as string;
    return { item, price: item.length * 10 };
  },
  /** Fails its first two attempts, then succeeds: a flaky payment provider. */
  async charge_card(ctx) {
    record(ctx);
    await pause(100, ctx.signal);
    if (ctx.attempt < 3) throw new RetryableError(`payment provider timed out (attempt ${ctx.attempt})`);
    return { charged: true, attempt: ctx.attempt };
  },
  async send_email(ctx) {
    record(ctx);
    await pause(100, ctx.signal);
    return { sent: true };
  },
  async noop() {
    return null;
  },
};
