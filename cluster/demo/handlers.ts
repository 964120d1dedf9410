import { appendFileSync } from "node:fs";
import { RetryableError, type Handler } from "../../runtime/pool/handler-api.js";

/**
 * The demo's step handlers, which the soak loads too (its steps are `work`). Each appends one line
 * per invocation, `<run> <step> <attempt> <ms since the epoch> <node>`, to RUNWAY_LEDGER (when
 * set; the node is RUNWAY_LEDGER_NODE, else `-`), a file outside the node, before it works: so
 * the demo and the soak can tell a step that ran again after its result was committed, and where.
 */
function record(ctx: { runId: string; stepId: string; attempt: number }): void {
  const ledger = process.env.RUNWAY_LEDGER;
  if (ledger) appendFileSync(ledger, `${ctx.runId} ${ctx.stepId} ${ctx.attempt} ${Date.now()} ${process.env.RUNWAY_LEDGER_NODE ?? "-"}\n`);
}

const pause = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal.aborted) return reject(new Error("aborted"));
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
  /** Works `input.ms` (default 30) and answers which step and attempt it was: every step of the soak's workload. */
  async work(ctx) {
    record(ctx);
    const input = ctx.input as { ms?: number } | null;
    await pause(typeof input?.ms === "number" ? input.ms : 30, ctx.signal);
    return { step: ctx.stepId, attempt: ctx.attempt };
  },
};
