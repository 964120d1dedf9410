import { fileURLToPath } from "node:url";
import { connect } from "@nats-io/transport-node";
import { RunwayClient } from "../../cluster/client.js";
import { preferredOwner } from "../../runtime/partitions/placement.js";
import { readFence } from "../../runtime/store/partition-log.js";
import { RUNWAY_USER, spawnProcess, startCluster, startServer, waitFor, type ChildHandle } from "../harness/index.js";
import { clockTicks, cpuMicrosEach, percentiles, procCpuSeconds, progress, windowed } from "./stats.js";
import { runEnds, sequential } from "./workflow.js";

/** The `runway` command, as an operator starts a node. */
const bin = fileURLToPath(new URL("../../bin/runway.mjs", import.meta.url));
const handlers = fileURLToPath(new URL("../fixtures/handlers.ts", import.meta.url));

/**
 * A node process as an operator starts one (the `runway` command, the fixture handlers), on
 * `server`; `args` and `env` add to its command line and environment. Resolves once it serves.
 */
export async function startNodeProcess(server: string, name: string, options: { args?: string[]; env?: Record<string, string> } = {}): Promise<ChildHandle> {
  const child = spawnProcess(
    process.execPath,
    [bin, "node", "--servers", server, "--user", RUNWAY_USER.user, "--pass", RUNWAY_USER.pass, "--name", name, "--handlers", handlers, ...(options.args ?? [])],
    { name, env: { RUNWAY_LOG: "error", ...options.env } },
  );
  await child.waitForLine(/^READY /, { timeoutMs: 60_000 });
  return child;
}

/** One server, or a JetStream cluster of several, as the bench uses them. */
interface BenchServers {
  servers: string;
  pids: number[];
  connectOptions(): { servers: string | string[] };
  dispose(): Promise<void>;
}

async function benchServers(count: number): Promise<BenchServers> {
  if (count <= 1) {
    const server = await startServer();
    return { servers: server.url, pids: [server.pid], connectOptions: () => server.connectOptions(), dispose: () => server.dispose() };
  }
  const cluster = await startCluster(count);
  return {
    servers: cluster.urls.join(","),
    pids: cluster.servers.map((s) => s.pid),
    connectOptions: () => cluster.connectOptions(),
    dispose: () => cluster.dispose(),
  };
}

/**
 * w1's workload (after `W1_WARMUP` warm-up runs, `W1_RUNS` runs × 10 sequential no-op steps, 32
 * in flight) against `W1_NODES` node processes (default 2) started with the `runway` command on
 * this machine, on one server or (`W1_SERVERS` 3) a JetStream cluster with R3 streams and
 * buckets, once every node serves its share of the partitions. The bench process is only the
 * client. What a second core buys when one node's main thread is the limit (`w1` runs one node in
 * the bench's own process), and what replication costs.
 */
export async function w1cluster(): Promise<Record<string, unknown>> {
  const count = Number(process.env.W1_NODES ?? 2);
  const serverCount = Number(process.env.W1_SERVERS ?? 1);
  const server = await benchServers(serverCount);
  const nodes: ChildHandle[] = [];
  const nc = await connect({ ...server.connectOptions(), noAsyncTraces: true });
  const replicas = serverCount >= 3 ? ["--replicas", "3"] : [];
  try {
    // The first node makes the streams and buckets; the others join.
    nodes.push(await startNodeProcess(server.servers, "w1c-0", { args: replicas }));
    nodes.push(...(await Promise.all(Array.from({ length: count - 1 }, (_, i) => startNodeProcess(server.servers, `w1c-${i + 1}`, { args: replicas })))));
    progress(`w1cluster: ${count} nodes ready; waiting for every partition to be served where placement puts it`);
    const names = nodes.map((_, i) => `w1c-${i}`);
    await waitFor(
      async () => {
        for (let p = 0; p < 32; p++) {
          const f = await readFence(nc, p);
          if (f.outcome !== "found" || f.fence.owner !== preferredOwner(p, names)) return undefined;
        }
        return true;
      },
      { timeoutMs: 120_000, describe: "partitions placed over the nodes" },
    );
    const client = new RunwayClient(nc, "bench", 60_000);
    await client.createTenant("bench", { max_concurrency: 10_000, interactive_sources: ["bench"] });
    await client.putDefinition(sequential("seq10", 10));
    const finished = await runEnds(nc, "bench");
    const latencies: number[] = [];
    const one = async () => {
      const t0 = performance.now();
      const started = await client.startRun({ definition: "seq10" });
      if (started.outcome !== "started") throw new Error(`start: ${JSON.stringify(started)}`);
      const outcome = await finished((started.run as { id: string }).id);
      if (outcome !== "run_succeeded") throw new Error(`run ${outcome}`);
      latencies.push(performance.now() - t0);
    };
    const warmup = Number(process.env.W1_WARMUP ?? 100);
    progress(`w1cluster warm-up: ${warmup} runs`);
    await windowed(warmup, 32, one);
    latencies.length = 0;
    const runs = Number(process.env.W1_RUNS ?? 200);
    progress(`w1cluster: ${runs} runs x 10 steps, 32 in flight, on ${count} nodes`);
    const ticks = clockTicks();
    const servers0 = server.pids.map((pid) => procCpuSeconds(pid, ticks));
    const nodes0 = nodes.map((n) => procCpuSeconds(n.pid, ticks));
    const t0 = performance.now();
    await windowed(runs, 32, one);
    const seconds = (performance.now() - t0) / 1000;
    const servers1 = server.pids.map((pid) => procCpuSeconds(pid, ticks));
    const nodes1 = nodes.map((n) => procCpuSeconds(n.pid, ticks));
    // What each node did: the partitions it serves, the attempts it ran, the transitions it stored.
    const work: Record<string, unknown> = {};
    for await (const m of await nc.requestMany("runway.v1.ops.metrics", "", { maxWait: 2_000, maxMessages: count })) {
      const answer = JSON.parse(m.string()) as { node: string; metrics: Record<string, unknown> };
      const { partitions_owned, lease_acquisitions, actor_transitions } = answer.metrics;
      work[answer.node] = { partitions_owned, lease_acquisitions, actor_transitions };
    }
    return {
      bench: "w1cluster",
      nodes: count,
      servers: serverCount,
      replicas: serverCount >= 3 ? 3 : 1,
      runs,
      warmup_runs: warmup,
      in_flight: 32,
      steps_per_s: Math.round((runs * 10) / seconds),
      run_latency_ms: percentiles(latencies),
      cpu_us_per_step: {
        nodes: nodes.map((_, i) => cpuMicrosEach(nodes0[i], nodes1[i], runs * 10)),
        nats_servers: server.pids.map((_, i) => cpuMicrosEach(servers0[i], servers1[i], runs * 10)),
      },
      work_by_node: work,
    };
  } finally {
    await nc.close().catch(() => undefined);
    for (const n of nodes) await n.kill().catch(() => undefined);
    await server.dispose();
  }
}
