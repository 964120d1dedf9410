import { availableParallelism, loadavg } from "node:os";
import { monitorEventLoopDelay, performance, PerformanceObserver } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { BroadcastChannel } from "node:worker_threads";
import { setTimeout as sleep } from "node:timers/promises";
import { connect } from "@nats-io/transport-node";
import { RunwayClient } from "../../cluster/client.js";
import { startRunwayNode } from "../../cluster/runway-node.js";
import { createLogger } from "../../runtime/index.js";
import { HB_STOP_CHANNEL } from "../fixtures/heartbeat-handlers.js";
import { startServer, waitFor } from "../harness/index.js";
import { clockTicks, machineCpuSeconds, percentiles, procCpuSeconds, progress, windowed } from "./stats.js";

const handlers = fileURLToPath(new URL("../fixtures/heartbeat-handlers.ts", import.meta.url));

function envInt(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number, got ${raw}`);
  return n;
}

const round = (x: number, digits = 1) => Math.round(x * 10 ** digits) / 10 ** digits;

/**
 * heartbeats: N attempts leased at once on one node, each heartbeating every HB_INTERVAL
 * (default 10,000 × 20 s = 500 renewals/s), spread over tenants of HB_PER_TENANT runs each (a
 * tenant record lists its running runs). After the ramp-up and a settle period, a window of
 * HB_WINDOW_S seconds measures the node's CPU (process.cpuUsage: the node, its pool threads and
 * this client, in one process), nats-server's CPU (/proc), and the commit latency of each
 * renewal (executor dispatch → the run's stored answer, via `onHeartbeatSettled`). Then every
 * attempt is told to finish and the runs must all succeed.
 *
 * Env: HB_ATTEMPTS (10000), HB_INTERVAL_S (20), HB_WINDOW_S (60), HB_SETTLE_S (5),
 * HB_PER_TENANT (100), HB_START_WINDOW (64 starts in flight), HB_THREADS (2), HB_LEASE_TTL_S (60).
 */
export async function heartbeats(): Promise<Record<string, unknown>> {
  const attempts = envInt("HB_ATTEMPTS", 10_000);
  const intervalMs = envInt("HB_INTERVAL_S", 20) * 1000;
  const windowMs = envInt("HB_WINDOW_S", 60) * 1000;
  const settleMs = envInt("HB_SETTLE_S", 5) * 1000;
  const perTenant = envInt("HB_PER_TENANT", 100);
  const startWindow = envInt("HB_START_WINDOW", 64);
  const threads = envInt("HB_THREADS", 2);
  const leaseTtlMs = envInt("HB_LEASE_TTL_S", 60) * 1000;
  // Each attempt must outlive ramp-up, settle and window within its step timeout (at most 15 min).
  if (settleMs + windowMs > 10 * 60_000) throw new Error("HB_SETTLE_S + HB_WINDOW_S must stay within 10 minutes (a step's timeout is at most 15)");
  const tenantCount = Math.ceil(attempts / perTenant);
  const ticks = clockTicks(); // a child process: not inside the window
  const tenantIds = Array.from({ length: tenantCount }, (_, i) => `hb-${String(i).padStart(4, "0")}`);
  // Every attempt must hold a pool task and a scheduler slot at once, with room for the
  // scheduler's interactive reserve (the runs take the batch lane).
  const tasksPerThread = Math.ceil(attempts / threads) + 16;

  // Heartbeat observations: when dispatched (performance.now()), commit ms, outcome.
  let recording = false;
  const observed: { at: number; ms: number; outcome: string }[] = [];
  const server = await startServer();
  const node = await startRunwayNode({
    connection: server.connectOptions(),
    name: "bench",
    handlers: [handlers],
    logger: createLogger("bench", "warn"),
    threads,
    tasksPerThread,
    stepLeaseTtlMs: leaseTtlMs,
    onHeartbeatSettled: (ms, outcome) => {
      if (recording) observed.push({ at: performance.now() - ms, ms, outcome });
    },
  });
  const stop = new BroadcastChannel(HB_STOP_CHANNEL);
  const nc = await connect(server.connectOptions());
  try {
    await waitFor(() => node.node.host.ownedPartitions().length === 32, { timeoutMs: 30_000, describe: "partitions" });
    const events = new Map<string, number>();
    nc.subscribe("rw.evt.*.*.*.*", {
      callback: (_err, msg) => {
        const type = msg.subject.slice(msg.subject.lastIndexOf(".") + 1);
        events.set(type, (events.get(type) ?? 0) + 1);
      },
    });
    await nc.flush();

    progress(`heartbeats: ${tenantCount} tenants × ${perTenant} runs, pool ${threads} threads × ${tasksPerThread} tasks, lease TTL ${leaseTtlMs / 1000} s`);
    const clients = tenantIds.map((t) => new RunwayClient(nc, t, 60_000));
    const definition = {
      name: "hold",
      nodes: [
        {
          id: "hold",
          kind: "code",
          handler: "hb_hold",
          input: { interval_ms: intervalMs },
          timeout_ms: 15 * 60_000,
          retry: { max_attempts: 1, backoff_ms: 200, max_backoff_ms: 1000 },
        },
      ],
    };
    await windowed(tenantCount, 16, async (i) => {
      const c = clients[i]!;
      const created = await c.createTenant(tenantIds[i]!, { max_concurrency: perTenant + 10 });
      if (created.outcome !== "created") throw new Error(`tenant ${tenantIds[i]}: ${JSON.stringify(created)}`);
      const put = await c.putDefinition(definition);
      if (put.outcome !== "published") throw new Error(`definition: ${JSON.stringify(put)}`);
    });

    progress(`heartbeats: starting ${attempts} runs, ${startWindow} in flight`);
    const load_at_start = loadavg().map((x) => round(x, 2));
    const t0 = performance.now();
    let started = 0;
    let startsDoneMs = 0;
    const report = setInterval(() => {
      const p = node.pool.stats();
      progress(
        `  ${round((performance.now() - t0) / 1000)} s: ${started} started, ${node.executor.inFlight} in flight, pool running ${p.running} queued ${p.queued}, scheduler queued ${node.dispatcher?.metrics(Date.now()).queued ?? 0}, heartbeats ${node.executor.stats.heartbeats}`,
      );
    }, 5_000);
    try {
      const starting = windowed(attempts, startWindow, async (i) => {
        const answer = await clients[i % tenantCount]!.startRun({ definition: "hold", lane: "batch" });
        if (answer.outcome !== "started") throw new Error(`start ${i}: ${JSON.stringify(answer)}`);
        started++;
      }).then(() => (startsDoneMs = performance.now() - t0));
      await starting;
      // Running in the pool, not merely handed to the executor: the pool may queue what it cannot run.
      await waitFor(() => node.pool.stats().running >= attempts, {
        timeoutMs: 10 * 60_000,
        intervalMs: 50,
        describe: `${attempts} attempts running in the pool`,
      });
    } finally {
      clearInterval(report);
    }
    const rampMs = performance.now() - t0;
    progress(`heartbeats: ${attempts} in flight after ${round(rampMs / 1000)} s; settling ${settleMs / 1000} s`);
    await sleep(settleMs);

    progress(`heartbeats: measuring for ${windowMs / 1000} s`);
    const before = {
      at: performance.now(),
      cpu: process.cpuUsage(),
      elu: performance.eventLoopUtilization(),
      server: procCpuSeconds(server.pid, ticks),
      machine: machineCpuSeconds(ticks),
      sent: node.executor.stats.heartbeats,
      writes: node.node.host.stats.writes,
      expired: events.get("step_lease_expired") ?? 0,
    };
    let minInFlight = node.pool.stats().running;
    // Main-thread GC pauses in the window: the usual cause of the latency tail.
    const gc = { count: 0, totalMs: 0, maxMs: 0 };
    const gcObserver = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        gc.count++;
        gc.totalMs += e.duration;
        gc.maxMs = Math.max(gc.maxMs, e.duration);
      }
    });
    gcObserver.observe({ entryTypes: ["gc"] });
    // How late the main thread's event loop ran (blocked, or starved of a core).
    const loopDelay = monitorEventLoopDelay({ resolution: 10 });
    loopDelay.enable();
    recording = true;
    const windowEnd = before.at + windowMs;
    while (performance.now() < windowEnd) {
      await sleep(Math.min(1_000, windowEnd - performance.now()));
      minInFlight = Math.min(minInFlight, node.pool.stats().running);
    }
    const after = {
      at: performance.now(),
      cpu: process.cpuUsage(before.cpu),
      elu: performance.eventLoopUtilization(before.elu),
      server: procCpuSeconds(server.pid, ticks),
      machine: machineCpuSeconds(ticks),
      sent: node.executor.stats.heartbeats,
      writes: node.node.host.stats.writes,
      expired: events.get("step_lease_expired") ?? 0,
    };
    gcObserver.disconnect();
    loopDelay.disable();
    const rss = process.memoryUsage().rss;
    const load_at_end = loadavg().map((x) => round(x, 2));
    // Renewals dispatched inside the window may settle just after it.
    await sleep(5_000);
    recording = false;
    const seconds = (after.at - before.at) / 1000;
    const nodeCpu = (after.cpu.user + after.cpu.system) / 1e6;
    const serverCpu = before.server !== undefined && after.server !== undefined ? after.server - before.server : undefined;
    const machineBusy = before.machine && after.machine ? after.machine.busy - before.machine.busy : undefined;
    const inWindow = observed.filter((o) => o.at >= before.at && o.at < after.at);
    const renewed = inWindow.filter((o) => o.outcome === "renewed");

    progress(`heartbeats: telling ${attempts} attempts to finish`);
    const tStop = performance.now();
    stop.postMessage("stop");
    const ended = () => (events.get("run_succeeded") ?? 0) + (events.get("run_failed") ?? 0);
    await waitFor(() => ended() >= attempts, { timeoutMs: 10 * 60_000, intervalMs: 100, describe: `${attempts} runs to end (${ended()} so far)` });
    const finishMs = performance.now() - tStop;

    return {
      bench: "heartbeats",
      attempts_leased: attempts,
      tenants: tenantCount,
      heartbeat_interval_s: intervalMs / 1000,
      lease_ttl_s: leaseTtlMs / 1000,
      pool: { threads, tasks_per_thread: tasksPerThread },
      ramp_up_s: round(rampMs / 1000),
      starts_s: round(startsDoneMs / 1000),
      starts_per_s: round(attempts / (startsDoneMs / 1000)),
      window_s: round(seconds),
      heartbeats_per_s_expected: round(attempts / (intervalMs / 1000)),
      heartbeats_per_s_sent: round((after.sent - before.sent) / seconds),
      heartbeats_per_s_committed: round(renewed.length / seconds),
      heartbeat_commit_ms: percentiles(renewed.map((o) => o.ms)),
      heartbeat_commit_max_ms: round(
        renewed.reduce((m, o) => Math.max(m, o.ms), 0),
        3,
      ),
      heartbeats_stale: inWindow.filter((o) => o.outcome === "stale").length,
      heartbeats_via_mailbox: inWindow.filter((o) => o.outcome === "mailbox").length,
      actor_writes_per_s: round((after.writes - before.writes) / seconds),
      min_attempts_running_in_pool: minInFlight,
      lease_expiries_in_window: after.expired - before.expired,
      node_cpu_percent_of_one_core: round((nodeCpu / seconds) * 100),
      node_cpu_scope: `in-process: process.cpuUsage() delta over the window; the node, its ${threads} pool threads and this bench client share one process (the client only records samples)`,
      node_main_thread_event_loop_utilization: round(after.elu.utilization, 3),
      nats_server_cpu_percent_of_one_core: serverCpu !== undefined ? round((serverCpu / seconds) * 100) : null,
      // Everything else on the machine during the window (other tests, the OS): the load this ran under.
      other_processes_cpu_percent_of_one_core:
        machineBusy !== undefined && serverCpu !== undefined ? round((Math.max(0, machineBusy - nodeCpu - serverCpu) / seconds) * 100) : null,
      cores: availableParallelism(),
      // The histogram records the whole interval between 10 ms samples: the lag is what exceeds 10 ms.
      node_event_loop_lag_ms: { p99: round(Math.max(0, loopDelay.percentile(99) / 1e6 - 10)), max: round(Math.max(0, loopDelay.max / 1e6 - 10)) },
      node_main_thread_gc_in_window: { count: gc.count, total_ms: round(gc.totalMs), max_ms: round(gc.maxMs) },
      node_rss_mb: Math.round(rss / 2 ** 20),
      finish_s: round(finishMs / 1000),
      runs_succeeded: events.get("run_succeeded") ?? 0,
      runs_failed: events.get("run_failed") ?? 0,
      lease_expiries_total: events.get("step_lease_expired") ?? 0,
      load_avg_1_5_15_at_start: load_at_start,
      load_avg_1_5_15_at_window_end: load_at_end,
    };
  } finally {
    stop.close();
    await nc.close();
    await node.stop();
    await server.dispose();
  }
}
