import { monitorEventLoopDelay } from "node:perf_hooks";
import { progress, windowed } from "./stats.js";
import { startAndFinish, world } from "./workflow.js";

/**
 * cpu: CPU-bound steps, where the pool's threads keep the cores busy: 300 runs × 10 sequential
 * steps that each spin for 2 ms (handler `burn`), 32 in flight, after 100 warm-up runs. Steps/s,
 * and how late the node's event loop ran its timers over the window (`monitorEventLoopDelay`):
 * what the node's other work waits behind, and where lowered helper threads cost something
 * (cluster/helper-threads.ts).
 */
export async function cpuBench(): Promise<Record<string, unknown>> {
  const w = await world();
  try {
    const ms = Number(process.env.CPU_STEP_MS ?? 2);
    await w.client.putDefinition({
      name: "burn10",
      nodes: Array.from({ length: 10 }, (_, i) => ({ id: `s${i}`, kind: "code", handler: "burn", input: { ms }, ...(i > 0 ? { needs: [`s${i - 1}`] } : {}) })),
    });
    const run = async () => void (await startAndFinish(w, "burn10"));
    progress("cpu warm-up: 100 runs");
    await windowed(100, 32, run);
    const runs = Number(process.env.CPU_RUNS ?? 300);
    progress(`cpu: ${runs} runs x 10 steps of ${ms} ms of CPU, 32 in flight`);
    const delay = monitorEventLoopDelay({ resolution: 1 });
    delay.enable();
    const t0 = performance.now();
    await windowed(runs, 32, run);
    const seconds = (performance.now() - t0) / 1000;
    delay.disable();
    const msOf = (ns: number) => Math.round(ns / 10_000) / 100;
    return {
      bench: "cpu",
      runs,
      step_cpu_ms: ms,
      steps_per_s: Math.round((runs * 10) / seconds),
      event_loop_delay_ms: { p50: msOf(delay.percentile(50)), p99: msOf(delay.percentile(99)), max: msOf(delay.max) },
    };
  } finally {
    await w.close();
  }
}
