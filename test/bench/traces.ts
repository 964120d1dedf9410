import { fileURLToPath } from "node:url";
import { connect } from "@nats-io/transport-node";
import { RunwayClient } from "../../cluster/client.js";
import { startRunwayNode } from "../../cluster/runway-node.js";
import { createLogger } from "../../runtime/index.js";
import { startServer, waitFor } from "../harness/index.js";
import { startOtlpReceiver } from "../fixtures/otlp.js";
import { cpuProfile, progress, windowed } from "./stats.js";
import { runEnds, sequential, startAndFinish, type World } from "./workflow.js";

const handlers = fileURLToPath(new URL("../fixtures/handlers.ts", import.meta.url));

/** One round's figures, tracing off or on. */
interface Round {
  tracing: boolean;
  steps_per_s: number;
  cpu_us_per_step: number;
}

/**
 * Issue 40's benchmark line: the cost per step of tracing to a local receiver. w1's shape (runs of
 * 10 sequential no-op steps, 32 in flight) on a node in this process, in rounds that alternate
 * tracing off and on (each round a fresh server and node, the on rounds exporting to a receiver
 * process the bench starts), each round warmed then timed. Reports steps/s and this process's CPU
 * per step each way, and the ratios. `TRACES_ROUNDS` (pairs, default 3), `TRACES_RUNS` (timed runs
 * a round, default 200), `TRACES_WARMUP` (default 80). BENCH_CPU_PROFILE (a file): a CPU profile of
 * the timed window of the last round with tracing on (`BENCH_PROFILE_PHASE=off`: off).
 */
export async function traces(): Promise<Record<string, unknown>> {
  const pairs = Number(process.env.TRACES_ROUNDS ?? 3);
  const runs = Number(process.env.TRACES_RUNS ?? 200);
  const warmup = Number(process.env.TRACES_WARMUP ?? 80);
  const receiver = await startOtlpReceiver();
  const rounds: Round[] = [];
  try {
    for (let i = 0; i < pairs; i++)
      // Alternating which goes first, so neither side always follows the other.
      for (const tracing of i % 2 === 0 ? [false, true] : [true, false]) {
        progress(`traces: round ${i + 1}/${pairs}, tracing ${tracing ? "on" : "off"}: ${warmup} warm-up runs, ${runs} timed`);
        rounds.push(await round(tracing, receiver.endpoint, warmup, runs));
      }
  } finally {
    await receiver.process.kill("SIGTERM").catch(() => undefined);
  }
  const median = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b);
    return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
  };
  const side = (tracing: boolean) => {
    const mine = rounds.filter((r) => r.tracing === tracing);
    return { steps_per_s: median(mine.map((r) => r.steps_per_s)), cpu_us_per_step: median(mine.map((r) => r.cpu_us_per_step)) };
  };
  const off = side(false);
  const on = side(true);
  const r3 = (x: number) => Math.round(x * 1000) / 1000;
  return {
    bench: "traces",
    rounds: pairs,
    runs_per_round: runs,
    warmup_runs: warmup,
    steps_per_run: 10,
    in_flight: 32,
    off,
    on,
    // on / off: throughput kept, CPU spent; the issue's target is a cost per step ≤ 10 % of w1's.
    steps_per_s_ratio: r3(on.steps_per_s / off.steps_per_s),
    cpu_per_step_ratio: r3(on.cpu_us_per_step / off.cpu_us_per_step),
    spans_received: receiver.spans().length,
    each_round: rounds,
  };
}

async function round(tracing: boolean, endpoint: string, warmup: number, runs: number): Promise<Round> {
  const server = await startServer();
  const node = await startRunwayNode({
    connection: server.connectOptions(),
    name: tracing ? "traced" : "untraced",
    handlers: [handlers],
    logger: createLogger("bench", "warn"),
    ...(tracing ? { traces: { url: `${endpoint}/v1/traces` } } : {}),
  });
  const nc = await connect({ ...server.connectOptions(), noAsyncTraces: true });
  try {
    await waitFor(() => node.node.host.ownedPartitions().length === 32, { timeoutMs: 30_000, describe: "partitions" });
    const client = new RunwayClient(nc, "bench", 60_000);
    await client.createTenant("bench", { max_concurrency: 10_000, interactive_sources: ["bench"] });
    const w: World = { server, node, nc, client, finished: await runEnds(nc, "bench"), close: () => Promise.resolve() };
    await client.putDefinition(sequential("seq10", 10));
    await windowed(warmup, 32, async () => void (await startAndFinish(w, "seq10")));
    const profile = tracing === (process.env.BENCH_PROFILE_PHASE !== "off") ? await cpuProfile() : undefined;
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await windowed(runs, 32, async () => void (await startAndFinish(w, "seq10")));
    const seconds = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    await profile?.();
    const steps = runs * 10;
    return { tracing, steps_per_s: Math.round(steps / seconds), cpu_us_per_step: Math.round(((cpu.user + cpu.system) / steps) * 10) / 10 };
  } finally {
    await nc.close();
    // A traced node sends what it batched when it stops: outside the timed window.
    await node.stop();
    await server.dispose();
  }
}
