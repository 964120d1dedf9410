import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, headers } from "@nats-io/transport-node";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Piscina } from "piscina";
import { packMsgpack } from "../../runtime/codec.js";
import { startServer } from "../harness/index.js";
import { clockTicks, cpuMicrosEach, percentiles, procCpuSeconds, progress, windowed } from "./stats.js";

/** A body shaped like a run's head as w1 stores it mid-run: its fields, ten nodes, an outbox event, applied ids. */
function head(run: number, step: number) {
  const at = 1_796_000_000_000 + step;
  const nodes = Object.fromEntries(
    Array.from({ length: 10 }, (_, k) => [
      `s${k}`,
      k < step
        ? {
            s: "succeeded",
            step: { status: "succeeded", attempt: 1, lease_epoch: 1, not_before: null, last_error: null, started_at: at, ended_at: at },
            out: true,
          }
        : k === step
          ? {
              s: "active",
              step: { status: "ready", attempt: 0, lease_epoch: 0, not_before: null, last_error: null, started_at: null, ended_at: null },
              offered: 1,
              offered_at: at,
            }
          : { s: "pending" },
    ]),
  );
  const id = `bench_${run.toString(16).padStart(32, "0")}`;
  return {
    s: "rw.actor",
    v: 1,
    b: {
      kind: "run",
      id,
      snapshot: {
        status: "active",
        value: { live: "running" },
        context: {
          run: {
            v: 2,
            id,
            tenant: "bench",
            root_run_id: id,
            parent_run_id: null,
            parent_node: null,
            depth: 0,
            definition: { name: "seq10", version: 1, digest: "9f90ec592810a30e9902f6d26105de829d6aae6e24cbe38341fe7852b02ace00" },
            source: "api",
            start_key: "8632957d8f4f05df3d6908c41f682ad5864d6cf2d724d36c76dde661219aaf3f",
            lane: "batch",
            lifecycle: { status: "running", waiting_on: null, waiting_ref: null, waiting_expires_at: null, started_at: at, ended_at: null },
            created_at: at,
            cancellation_epoch: 0,
            nodes,
            result: null,
            result_truncated: false,
            error: null,
            cancel: null,
            usage: { steps: step, tool_calls: 0 },
          },
        },
        children: {},
        historyValue: {},
      },
      applied: ["9NpaaRPwRvDm", "x2AubaMFslIa", "sAvAKeVq3k2I"],
      outbox: [
        {
          id: `result/${id}/s${step}/1/1/0`,
          effect: { type: "runway.event", subject: `rw.evt.bench.${id}.${id}.step_succeeded`, data: { node: `s${step}`, at } },
        },
      ],
      journal: [{ t: "output", node: `s${step}`, value: null }],
      transitions: step,
      writer: { node: "bench", epoch: 1 },
      at,
      version: 4,
    },
  };
}

/** floor's one-in-flight phase: this many runs of 10, one after another. */
const ONE_IN_FLIGHT_RUNS = 60;

/**
 * floor: what one step costs this stack on this machine with nothing of Runway's in between —
 * w1's shape (200 runs × 10 sequential steps, 32 in flight, after 1,000 warm-up runs) where a
 * step is only what w1's must do at least: encode a head like a run's (msgpack), one
 * revision-checked KV write (expected last subject sequence) awaited, one live event (a core
 * publish), one no-op task through Piscina. Steps/s and CPU per step, this process (its main
 * thread apart) and nats-server: w1's `cpu_us_per_step` over this one, measured in the same
 * hour, is Runway's own cost per step, whatever the machine's speed that hour. Then runs of 10
 * one at a time: w1's one-in-flight run of 10 over this one is what Runway adds to its latency.
 */
export async function floor(): Promise<Record<string, unknown>> {
  const server = await startServer();
  const nc = await connect({ ...server.connectOptions(), noAsyncTraces: true });
  const dir = mkdtempSync(join(tmpdir(), "runway-floor-"));
  const worker = join(dir, "noop.mjs");
  writeFileSync(worker, "export default () => null;\n");
  const pool = new Piscina({ filename: worker, minThreads: 2, maxThreads: 2 });
  try {
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: "KV_floor", subjects: ["$KV.floor.>"], max_msgs_per_subject: 1, allow_direct: true, allow_rollup_hdrs: true });
    const js = jetstream(nc);
    let next = 0;
    const run = async () => {
      const id = next++;
      let seq = 0;
      for (let step = 0; step < 10; step++) {
        const h = headers();
        h.set("Nats-Expected-Last-Subject-Sequence", String(seq));
        seq = (await js.publish(`$KV.floor.run.${id}`, packMsgpack(head(id, step)), { headers: h })).seq;
        nc.publish(`rw.evt.floor.${id}.s${step}.step_succeeded`, packMsgpack({ node: `s${step}` }));
        await pool.run({ step });
      }
    };
    const warmup = Number(process.env.FLOOR_WARMUP ?? 1_000);
    progress(`floor warm-up: ${warmup} runs`);
    await windowed(warmup, 32, run);
    const runs = Number(process.env.FLOOR_RUNS ?? 200);
    const ticks = clockTicks();
    const server0 = procCpuSeconds(server.pid, ticks);
    const main0 = procCpuSeconds(process.pid, ticks, process.pid);
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await windowed(runs, 32, run);
    const seconds = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const main1 = procCpuSeconds(process.pid, ticks, process.pid);
    const server1 = procCpuSeconds(server.pid, ticks);
    const steps = runs * 10;
    // One run at a time, as w1's one-in-flight phase: each hop now wakes a thread that was idle.
    progress("floor: one run in flight");
    const ten: number[] = [];
    const oneMain0 = procCpuSeconds(process.pid, ticks, process.pid);
    for (let i = 0; i < ONE_IN_FLIGHT_RUNS; i++) {
      const started = performance.now();
      await run();
      ten.push(performance.now() - started);
    }
    const oneMain1 = procCpuSeconds(process.pid, ticks, process.pid);
    return {
      bench: "floor",
      runs,
      warmup_runs: warmup,
      steps_per_run: 10,
      in_flight: 32,
      record_bytes: packMsgpack(head(0, 5)).length,
      steps_per_s: Math.round(steps / seconds),
      cpu_us_per_step: {
        process: Math.round((cpu.user + cpu.system) / steps),
        main_thread: cpuMicrosEach(main0, main1, steps),
        nats_server: cpuMicrosEach(server0, server1, steps),
      },
      one_in_flight_run_of_10_ms: percentiles(ten),
      one_in_flight_main_thread_cpu_us_per_step: cpuMicrosEach(oneMain0, oneMain1, ONE_IN_FLIGHT_RUNS * 10),
    };
  } finally {
    await pool.destroy();
    await nc.close();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
