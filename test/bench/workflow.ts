import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { RunwayClient } from "../../cluster/client.js";
import { startRunwayNode, type RunwayWorkflowNode } from "../../cluster/runway-node.js";
import { createLogger } from "../../runtime/index.js";
import { startServer, waitFor, type NatsServerHandle } from "../harness/index.js";
import { clockTicks, cpuMicrosEach, cpuProfile, percentiles, procCpuSeconds, progress, threadCpuSeconds, v8Trace, windowed } from "./stats.js";

const handlers = fileURLToPath(new URL("../fixtures/handlers.ts", import.meta.url));

export interface World {
  server: NatsServerHandle;
  node: RunwayWorkflowNode;
  nc: NatsConnection;
  client: RunwayClient;
  /** Resolves when the run's `run_succeeded`/`run_failed` event is published. */
  finished(runId: string): Promise<string>;
  close(): Promise<void>;
}

/** A server (fsyncing every write when `RW_SYNC=always`), one node, and a client of tenant `bench`. */
export async function world(): Promise<World> {
  // RW_SERVER_CONFIG: nats-server config lines to add (e.g. `prof_port: 6065` to profile the server).
  const server = await startServer({
    ...(process.env.RW_SYNC === "always" ? { syncAlways: true } : {}),
    ...(process.env.RW_SERVER_CONFIG ? { extraConfig: process.env.RW_SERVER_CONFIG } : {}),
  });
  const node = await startRunwayNode({ connection: server.connectOptions(), name: "bench", handlers: [handlers], logger: createLogger("bench", "warn") });
  await waitFor(() => node.node.host.ownedPartitions().length === 32, { timeoutMs: 30_000, describe: "partitions" });
  const nc = await connect({ ...server.connectOptions(), noAsyncTraces: true });
  const client = new RunwayClient(nc, "bench", 60_000);
  await client.createTenant("bench", { max_concurrency: 10_000, interactive_sources: ["bench"] });
  const finished = await runEnds(nc, "bench");
  return {
    server,
    node,
    nc,
    client,
    finished,
    close: async () => {
      await nc.close();
      await node.stop();
      await server.dispose();
    },
  };
}

/**
 * How each of `tenant`'s runs ended (`run_succeeded` or `run_failed`), once it has: progress events
 * are plain subjects, so a subscription to the ends sees every completion, also one that came
 * before its caller asked.
 */
export async function runEnds(nc: NatsConnection, tenant: string): Promise<(runId: string) => Promise<string>> {
  const waiters = new Map<string, (type: string) => void>();
  const early = new Map<string, string>();
  for (const type of ["run_succeeded", "run_failed"])
    nc.subscribe(`rw.evt.${tenant}.*.*.${type}`, {
      callback: (_err, msg) => {
        const run = msg.subject.split(".")[4]!;
        const w = waiters.get(run);
        if (w) w(type);
        else early.set(run, type);
      },
    });
  await nc.flush();
  return (runId) => {
    const done = early.get(runId);
    return done ? Promise.resolve(done) : new Promise((resolve) => waiters.set(runId, resolve));
  };
}

/**
 * Messages the server has stored, summed over every stream (each stream's last sequence: KV
 * writes, commands, timers, events, audit records and counters, whether or not still held), by
 * kind of stream: what `server_ops_per_step` counts.
 */
async function storedMessages(nc: NatsConnection): Promise<{ total: number; byKind: Record<string, number> }> {
  const jsm = await jetstreamManager(nc);
  const byKind: Record<string, number> = {};
  let total = 0;
  for await (const si of jsm.streams.list()) {
    const kind = si.config.name.startsWith("KV_rw_p") ? "actor_writes" : si.config.name;
    byKind[kind] = (byKind[kind] ?? 0) + si.state.last_seq;
    total += si.state.last_seq;
  }
  return { total, byKind };
}

export function syscalls(pid: number): { r: number; w: number } | undefined {
  try {
    const io = readFileSync(`/proc/${pid}/io`, "utf8");
    return { r: Number(/syscr: (\d+)/.exec(io)?.[1]), w: Number(/syscw: (\d+)/.exec(io)?.[1]) };
  } catch {
    return undefined;
  }
}

export function perStep(a: { r: number; w: number } | undefined, b: { r: number; w: number } | undefined, steps: number) {
  return a && b ? { read: Math.round(((b.r - a.r) / steps) * 10) / 10, write: Math.round(((b.w - a.w) / steps) * 10) / 10 } : null;
}

/** Starts one run of `definition` and waits for its end: the time from the start to `run_succeeded` (ms). */
export async function startAndFinish(w: World, definition: string, input: unknown = {}, answers?: number[]): Promise<number> {
  const t0 = performance.now();
  const started = await w.client.startRun({ definition, input });
  answers?.push(performance.now() - t0);
  if (started.outcome !== "started") throw new Error(`start: ${JSON.stringify(started)}`);
  const outcome = await w.finished((started.run as { id: string }).id);
  if (outcome !== "run_succeeded") throw new Error(`run ${outcome}`);
  return performance.now() - t0;
}

export function sequential(name: string, steps: number) {
  return { name, nodes: Array.from({ length: steps }, (_, i) => ({ id: `s${i}`, kind: "code", handler: "noop", ...(i > 0 ? { needs: [`s${i - 1}`] } : {}) })) };
}

/** w2's workflow: one map of no-op items, each item's input one element of `input.items`, all in flight at once. */
export const WIDE = {
  name: "wide",
  nodes: [{ id: "m", kind: "map", items: "${input.items}", handler: "noop", max_fanout: 1000, concurrency: 1000 }],
};

/** w1's warm-up runs by default (`W1_WARMUP`): as many as Restate's workflow window follows (below). */
export const W1_WARMUP_RUNS = 80;

/** w1's one-in-flight phase: this many runs of 10 steps, each followed by a run of 1. */
const ONE_IN_FLIGHT_PAIRS = 30;

/** w1: 200 runs × 10 sequential no-op steps, 32 in flight; and the per-step overhead with 1 in flight. */
export async function w1(): Promise<Record<string, unknown>> {
  const w = await world();
  try {
    await w.client.putDefinition(sequential("seq10", 10));
    await w.client.putDefinition(sequential("seq1", 1));
    // Measured as the peer harness measures Restate's worker, in the same order: its workflow
    // window follows 80 runs (40 workflow, 40 service), its service window the workflow window's
    // 200 more, 280 in all. So Runway's first window follows 80 runs and is compared with
    // Restate's workflow mode (and DBOS, warmed with 40); its second window follows 280 and is
    // compared with Restate's service mode. V8 still optimises the hot path through both
    // (BENCH_V8_TRACE=1): the JIT's state is the variable the order keeps equal.
    const warmup = Number(process.env.W1_WARMUP ?? W1_WARMUP_RUNS);
    progress(`w1 warm-up: ${warmup} runs`);
    await windowed(warmup, 32, async () => void (await startAndFinish(w, "seq10")));
    progress("w1: 200 runs x 10 steps, 32 in flight");
    const runs = Number(process.env.W1_RUNS ?? 200);
    const latencies: number[] = [];
    const writesBefore = w.node.node.host.stats.writes;
    const storedBefore = await storedMessages(w.nc);
    const ticks = clockTicks();
    const serverCpu0 = procCpuSeconds(w.server.pid, ticks);
    // Every thread of this process; the main thread's id is the pid.
    const threads0 = threadCpuSeconds(process.pid, ticks);
    const cpu0 = process.cpuUsage();
    const io0 = syscalls(process.pid);
    const serverIo0 = syscalls(w.server.pid);
    const profiled = await cpuProfile();
    const traced = v8Trace();
    const t0 = performance.now();
    await windowed(runs, 32, async () => void latencies.push(await startAndFinish(w, "seq10")));
    await profiled?.();
    traced?.();
    const seconds = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const threads1 = threadCpuSeconds(process.pid, ticks);
    const io1 = syscalls(process.pid);
    const serverIo1 = syscalls(w.server.pid);
    const serverCpu1 = procCpuSeconds(w.server.pid, ticks);
    const writes = w.node.node.host.stats.writes - writesBefore;
    const after = await storedMessages(w.nc);
    progress(`w1: the window again, after ${warmup + runs} runs`);
    const secondLatencies: number[] = [];
    const s0 = performance.now();
    await windowed(runs, 32, async () => void secondLatencies.push(await startAndFinish(w, "seq10")));
    const secondSeconds = (performance.now() - s0) / 1000;
    const stored = {
      total: after.total - storedBefore.total,
      byKind: Object.fromEntries(Object.entries(after.byKind).map(([k, v]) => [k, v - (storedBefore.byKind[k] ?? 0)])),
    };
    progress("w1: one run in flight, to measure per-step overhead");
    const ten: number[] = [];
    const one: number[] = [];
    // Where a run of 10 spends its time: the start's answer, and each step from its
    // `step_started` to its `step_succeeded` as the client receives them. The runs are
    // sequential, one step of one run at a time: the subject alone pairs them (no body is read
    // in the process being measured).
    const answers: number[] = [];
    const stepMs: number[] = [];
    let startedAt: number | undefined;
    const steps = w.nc.subscribe("rw.evt.bench.*.*.*", {
      callback: (_err, msg) => {
        const type = msg.subject.slice(msg.subject.lastIndexOf(".") + 1);
        if (type === "step_started") startedAt = performance.now();
        else if (type === "step_succeeded" && startedAt !== undefined) {
          stepMs.push(performance.now() - startedAt);
          startedAt = undefined;
        }
      },
    });
    await w.nc.flush();
    const oneMain0 = procCpuSeconds(process.pid, ticks, process.pid);
    for (let i = 0; i < ONE_IN_FLIGHT_PAIRS; i++) {
      ten.push(await startAndFinish(w, "seq10", {}, answers));
      one.push(await startAndFinish(w, "seq1"));
    }
    const oneMain1 = procCpuSeconds(process.pid, ticks, process.pid);
    steps.unsubscribe();
    // The same window again once the node is warm: after 1,000 runs in all, V8's helper threads
    // have settled. The first two windows, measured as the peers' are, are the ones compared with them.
    const before = warmup + 2 * runs + 2 * ONE_IN_FLIGHT_PAIRS;
    const settle = Math.max(0, Number(process.env.W1_SETTLE ?? 1_000) - before);
    progress(`w1: ${settle} more runs, then the window again, warm`);
    await windowed(settle, 32, async () => void (await startAndFinish(w, "seq10")));
    const w0 = performance.now();
    await windowed(runs, 32, async () => void (await startAndFinish(w, "seq10")));
    const warmSeconds = (performance.now() - w0) / 1000;
    // And one in flight again, warm: the same runs of 10 as above, each followed by a run of 1.
    const warmTen: number[] = [];
    for (let i = 0; i < ONE_IN_FLIGHT_PAIRS; i++) {
      warmTen.push(await startAndFinish(w, "seq10"));
      await startAndFinish(w, "seq1");
    }
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    return {
      bench: "w1",
      sync: process.env.RW_SYNC === "always" ? "always" : "default",
      runs,
      warmup_runs: warmup,
      steps_per_run: 10,
      in_flight: 32,
      runs_per_s: Math.round((runs / seconds) * 10) / 10,
      steps_per_s: Math.round((runs * 10) / seconds),
      // The same window right after the first: with the defaults, after 280 runs, as Restate's
      // service window is measured. The figure compared with Restate's service mode.
      second_window_after_runs: warmup + runs,
      second_window_steps_per_s: Math.round((runs * 10) / secondSeconds),
      second_window_run_latency_ms: percentiles(secondLatencies),
      // The window again after W1_SETTLE (default 1,000) runs in all: the node's steady state.
      warm_steps_per_s: Math.round((runs * 10) / warmSeconds),
      warm_after_runs: before + settle,
      run_latency_ms: percentiles(latencies),
      // CPU per step in microseconds: this process (the node, its pool threads and the client), its main thread, and nats-server.
      cpu_us_per_step: {
        process: Math.round((cpu.user + cpu.system) / (runs * 10)),
        main_thread: cpuMicrosEach(threads0.get(String(process.pid)), threads1.get(String(process.pid)), runs * 10),
        nats_server: cpuMicrosEach(serverCpu0, serverCpu1, runs * 10),
        // The other threads of this process, busiest first: the pool's workers, V8's compiler and GC helpers.
        other_threads: [...threads1]
          .filter(([tid]) => Number(tid) !== process.pid)
          .map(([tid, s]) => cpuMicrosEach(threads0.get(tid) ?? 0, s, runs * 10) ?? 0)
          .filter((us) => us > 0)
          .sort((a, b) => b - a),
      },
      // Read and write syscalls per step (/proc/<pid>/io): socket round trips, mostly.
      syscalls_per_step: {
        process: perStep(io0, io1, runs * 10),
        nats_server: perStep(serverIo0, serverIo1, runs * 10),
      },
      actor_writes_per_step: Math.round((writes / (runs * 10)) * 100) / 100,
      // Three places: the target is 1.5, and a tenant's record writes (batched) add a few thousandths.
      server_ops_per_step: Math.round((stored.total / (runs * 10)) * 1000) / 1000,
      server_ops_by_stream_per_step: Object.fromEntries(Object.entries(stored.byKind).map(([k, v]) => [k, Math.round((v / (runs * 10)) * 100) / 100])),
      one_in_flight_run_of_10_ms: percentiles(ten),
      // The same once the node is warm (after the warm window).
      warm_one_in_flight_run_of_10_ms: percentiles(warmTen),
      one_in_flight_start_answer_ms: percentiles(answers),
      one_in_flight_step_ms: percentiles(stepMs),
      mean_step_overhead_ms_one_in_flight: Math.round(((mean(ten) - mean(one)) / 9) * 1000) / 1000,
      // The main thread's CPU over that phase a step (its starts and ends included), beside
      // floor's: one at a time, each hop wakes an idle thread, which costs more than at 32 in flight.
      one_in_flight_main_thread_cpu_us_per_step: cpuMicrosEach(oneMain0, oneMain1, ONE_IN_FLIGHT_PAIRS * 11),
    };
  } finally {
    await w.close();
  }
}

/** w2: one run with a 200-wide map of no-op steps: wall time from start to completion. */
export async function w2(): Promise<Record<string, unknown>> {
  const w = await world();
  try {
    await w.client.putDefinition(WIDE);
    const items = Array.from({ length: 200 }, (_, i) => i);
    // Warm, as w1 is, so V8 has optimised the map's path before the timed runs; the peer harness
    // measures its w2 in a process its w1 warm-up and runs have warmed.
    const warmup = Number(process.env.W2_WARMUP ?? 40);
    progress(`w2 warm-up: ${warmup} runs`);
    for (let i = 0; i < warmup; i++) await startAndFinish(w, "wide", { items });
    const times: number[] = [];
    const profiled = await cpuProfile();
    for (let i = 0; i < 10; i++) times.push(await startAndFinish(w, "wide", { items }));
    await profiled?.();
    const thousand = Array.from({ length: 1_000 }, (_, i) => i);
    const wide: number[] = [];
    for (let i = 0; i < 3; i++) wide.push(await startAndFinish(w, "wide", { items: thousand }));
    return { bench: "w2", width: 200, warmup_runs: warmup, runs: times.length, wall_ms: percentiles(times), width_1000_wall_ms: percentiles(wide) };
  } finally {
    await w.close();
  }
}

/** w3: start → answer latency with a start key, sequential; then the same keys again (duplicates). */
export async function w3(): Promise<Record<string, unknown>> {
  const w = await world();
  try {
    await w.client.putDefinition({ name: "startme", nodes: [{ id: "a", kind: "sleep", duration_ms: 60_000 }] });
    for (let i = 0; i < 20; i++) await w.client.startRun({ definition: "startme", start_key: { source: "warm", delivery_id: String(i) } });
    const n = 500;
    const first: number[] = [];
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      const a = await w.client.startRun({ definition: "startme", start_key: { source: "bench", delivery_id: String(i) } });
      first.push(performance.now() - t0);
      if (a.outcome !== "started") throw new Error(a.outcome);
    }
    const dup: number[] = [];
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      const a = await w.client.startRun({ definition: "startme", start_key: { source: "bench", delivery_id: String(i) } });
      dup.push(performance.now() - t0);
      if (a.outcome !== "duplicate") throw new Error(a.outcome);
    }
    return { bench: "w3", starts: n, start_ms: percentiles(first), duplicate_start_ms: percentiles(dup) };
  } finally {
    await w.close();
  }
}

/**
 * fairness: tenant A floods 2,000 batch runs while tenant B submits 50 interactive runs one at
 * a time; B's start → first step started, unloaded and under the flood.
 */
export async function fairness(): Promise<Record<string, unknown>> {
  const w = await world();
  try {
    const a = new RunwayClient(w.nc, "flood", 60_000);
    // No run cap for the flood: all 2,000 runs' steps wait in the node's scheduler, the harshest case.
    await a.createTenant("flood", { max_concurrency: 10_000 });
    await a.putDefinition({ name: "work", nodes: [{ id: "s", kind: "code", handler: "slow", input: { ms: 100 } }] });
    await w.client.putDefinition({ name: "quick", nodes: [{ id: "s", kind: "code", handler: "noop" }] });
    // A run's first step may start before its start answer arrives: record, then look up.
    const firstStep = new Map<string, number>();
    w.nc.subscribe("rw.evt.bench.*.*.step_started", {
      callback: (_e, msg) => {
        const id = msg.subject.split(".")[4]!;
        if (!firstStep.has(id)) firstStep.set(id, performance.now());
      },
    });
    const measure = async (n: number): Promise<number[]> => {
      const out: number[] = [];
      for (let i = 0; i < n; i++) {
        const t0 = performance.now();
        const answer = await w.client.startRun({ definition: "quick", lane: "interactive", source: "bench" });
        const id = (answer.run as { id: string }).id;
        const at = await waitFor(() => firstStep.get(id), { timeoutMs: 30_000, intervalMs: 1, describe: `first step of ${id}` });
        out.push(at - t0);
        await w.finished(id);
      }
      return out;
    };
    progress("fairness: 50 interactive runs, unloaded");
    const unloaded = await measure(50);
    progress("fairness: 2,000 batch runs from another tenant, then 50 interactive runs");
    await windowed(2_000, 32, async () => {
      await a.startRun({ definition: "work", lane: "batch" });
    });
    const queuedBefore = w.node.dispatcher?.metrics(Date.now()).queued ?? 0;
    const loaded = await measure(50);
    const queuedDuring = w.node.dispatcher?.metrics(Date.now()).queued ?? 0;
    const u = percentiles(unloaded);
    const l = percentiles(loaded);
    return {
      bench: "fairness",
      flood_runs: 2_000,
      interactive_runs: 50,
      unloaded_ms: u,
      under_flood_ms: l,
      ratio_p50: Math.round((l.p50 / u.p50) * 100) / 100,
      ratio_p95: Math.round((l.p95 / u.p95) * 100) / 100,
      flood_queued_before: queuedBefore,
      flood_queued_after: queuedDuring,
    };
  } finally {
    await w.close();
  }
}
