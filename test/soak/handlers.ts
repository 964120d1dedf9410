// The soak's step handlers, loaded by each `runway node` it starts. Every invocation appends one
// line `<run> <step> <attempt> <ms since the epoch> <node>` to SOAK_LEDGER before it works, so the
// soak can tell a step that ran again after its result was committed, and which node ran it.
import { appendFileSync } from "node:fs";
import type { Handler } from "../../runtime/pool/handler-api.js";

function record(ctx: { runId: string; stepId: string; attempt: number }): void {
  const ledger = process.env.SOAK_LEDGER;
  if (ledger) appendFileSync(ledger, `${ctx.runId} ${ctx.stepId} ${ctx.attempt} ${Date.now()} ${process.env.SOAK_NODE ?? "-"}\n`);
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
  /** Records the invocation, then works `input.ms` (default 30) and answers its input. */
  async soak_work(ctx) {
    record(ctx);
    const input = ctx.input as { ms?: number } | null;
    await pause(typeof input?.ms === "number" ? input.ms : 30, ctx.signal);
    return { step: ctx.stepId, attempt: ctx.attempt };
  },
};
