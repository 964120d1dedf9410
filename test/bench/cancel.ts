/**
 * cancel: how soon a cancel is seen, one run in flight on one in-process node. Each sample starts
 * a run whose one code step (`await_abort`) blocks on its `ctx.signal`; once the handler runs,
 * `runs.cancel`, then `runs.get`:
 *
 * - `visible_ms`: the cancel request sent → the reply of the `runs.get` sent right after the
 *   cancel's answer, which must read the cancel (`cancelled`, or `cancel` requested: enforced_at
 *   null); `answer_ms` is the cancel's own answer (it carries the run as read after the write);
 * - `abort_ms`: the cancel request sent → the handler's AbortSignal fired, in its worker thread.
 *
 * Both ends read `process.hrtime`, one monotonic clock for every thread of the process; the
 * handler sends its instants on a BroadcastChannel. Env: CANCEL_N samples (default 300, after 20
 * warm-up).
 */
import { BroadcastChannel } from "node:worker_threads";
import { BENCH_CANCEL_CHANNEL } from "../fixtures/handlers.js";
import { waitFor } from "../harness/index.js";
import { percentiles, progress } from "./stats.js";
import { world } from "./workflow.js";

const WARM_UP = 20;
const TIMEOUT_MS = 30_000;
const TARGET = { p50_ms_max: 10, p95_ms_max: 50 };

const hrMs = () => Number(process.hrtime.bigint()) / 1e6;

type Met = { p50: number; p95: number };
const meets = (p: Met) => p.p50 <= TARGET.p50_ms_max && p.p95 <= TARGET.p95_ms_max;

export async function cancel(): Promise<Record<string, unknown>> {
  const samples = Number(process.env.CANCEL_N ?? 300);
  const w = await world();
  const channel = new BroadcastChannel(BENCH_CANCEL_CHANNEL);
  const started = new Map<string, number>();
  const aborted = new Map<string, number>();
  channel.onmessage = (e: unknown) => {
    const m = (e as { data: { run: string; started?: number; aborted?: number } }).data;
    if (m.started !== undefined) started.set(m.run, m.started);
    if (m.aborted !== undefined) aborted.set(m.run, m.aborted);
  };
  try {
    await w.client.putDefinition({ name: "blocked", nodes: [{ id: "block", kind: "code", handler: "await_abort", timeout_ms: 600_000 }] });
    const sample = async () => {
      const s = await w.client.startRun({ definition: "blocked" });
      if (s.outcome !== "started") throw new Error(`start: ${JSON.stringify(s)}`);
      const id = (s.run as { id: string }).id;
      await waitFor(() => started.get(id), { timeoutMs: TIMEOUT_MS, intervalMs: 1, describe: `the handler of ${id} to start` });
      const t0 = hrMs();
      const answer = await w.client.cancelRun(id, "bench");
      const answered = hrMs();
      if (answer.outcome !== "cancelled" && answer.outcome !== "cancel_requested") throw new Error(`cancel: ${JSON.stringify(answer)}`);
      const got = await w.client.getRun(id);
      const visible = hrMs();
      const run = got.run as { status: string; cancel: { enforced_at?: number | null } | null } | undefined;
      if (!(run?.status === "cancelled" || (run?.cancel && run.cancel.enforced_at === null)))
        throw new Error(`runs.get after the cancel: ${JSON.stringify(got)}`);
      const abort = await waitFor(() => aborted.get(id), { timeoutMs: TIMEOUT_MS, intervalMs: 1, describe: `the AbortSignal of ${id}` });
      started.delete(id);
      aborted.delete(id);
      return { answer: answered - t0, visible: visible - t0, abort: abort - t0 };
    };
    progress(`cancel: ${WARM_UP} warm-up + ${samples} samples, one run in flight`);
    for (let i = 0; i < WARM_UP; i++) await sample();
    const answers: number[] = [];
    const visible: number[] = [];
    const aborts: number[] = [];
    for (let i = 0; i < samples; i++) {
      const r = await sample();
      answers.push(r.answer);
      visible.push(r.visible);
      aborts.push(r.abort);
    }
    const v = percentiles(visible);
    const a = percentiles(aborts);
    return {
      bench: "cancel",
      samples,
      warm_up: WARM_UP,
      answer_ms: percentiles(answers),
      visible_ms: v,
      abort_ms: a,
      target: { visible_ms: TARGET, abort_ms: TARGET },
      visible_target_met: meets(v),
      abort_target_met: meets(a),
      target_met: meets(v) && meets(a),
    };
  } finally {
    channel.close();
    await w.close();
  }
}
