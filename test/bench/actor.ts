import { connect } from "@nats-io/transport-node";
import { Kvm } from "@nats-io/kv";
import { createLogger, MailboxClient, startNode } from "../../runtime/index.js";
import { startServer, waitFor } from "../harness/index.js";
import { testActors } from "../fixtures/counter-actor.js";
import { clockTicks, cpuProfile, cpuWindow, percentiles, progress, windowed } from "./stats.js";

/**
 * `npm run bench -- actor`: 1,000 actors × 10 events requested of one node
 * (`MailboxClient.request`: asked of the partition's owner directly), each answered after its
 * transition is stored; the same again through the durable mailbox; and, on the same server in
 * the same run, the raw revision-checked KV update rate and latency, so the cost of the actor
 * loop over the storage floor is visible.
 */
export async function actorBench(): Promise<Record<string, unknown>> {
  const actors = 1_000;
  const eventsPerActor = 10;
  const window = 256;
  const server = await startServer();
  try {
    const node = await startNode({ connection: server.connectOptions(), name: "bench-node", actors: testActors, logger: createLogger("bench", "warn") });
    await waitFor(() => node.host.ownedPartitions().length === node.topology.partitions, { timeoutMs: 30_000, describe: "node to own all partitions" });
    const client = await connect(server.connectOptions());
    const serverVersion = client.info?.version;
    const mailbox = new MailboxClient(client, node.topology.partitions);
    const total = actors * eventsPerActor;

    progress(`actor loop: ${actors} actors x ${eventsPerActor} events, ${window} in flight`);
    // Warm-up: create every actor once so the timed run measures steady-state transitions.
    await windowed(actors, window, async (i) => void (await mailbox.request({ kind: "counter", id: `a${i}` }, { type: "inc" }, `warm-${i}`)));
    const writesBefore = node.host.stats.writes;
    const transitionsBefore = node.host.stats.transitions;
    const askedBefore = node.host.stats.asked;
    const latencies: number[] = [];
    const ticks = clockTicks();
    const cpu = cpuWindow(server.pid, ticks);
    const profiled = await cpuProfile();
    const started = performance.now();
    await windowed(total, window, async (i) => {
      const t0 = performance.now();
      const answer = await mailbox.request({ kind: "counter", id: `a${i % actors}` }, { type: "inc" }, `e-${i}`, 30_000);
      if (answer.outcome !== "applied") throw new Error(`event ${i}: ${answer.outcome}`);
      latencies.push(performance.now() - t0);
    });
    const elapsed = (performance.now() - started) / 1000;
    await profiled?.();
    const writes = node.host.stats.writes - writesBefore;
    const transitions = node.host.stats.transitions - transitionsBefore;
    const transitionCpu = cpu(transitions);
    const asked = node.host.stats.asked - askedBefore;
    progress(`the same through the mailbox (stored, delivered and acknowledged on the way in)`);
    const mailboxStarted = performance.now();
    await windowed(total, window, async (i) => {
      const answer = await mailbox.request({ kind: "counter", id: `a${i % actors}` }, { type: "inc" }, `mb-${i}`, 30_000, { through: "mailbox" });
      if (answer.outcome !== "applied") throw new Error(`mailbox event ${i}: ${answer.outcome}`);
    });
    const mailboxRate = total / ((performance.now() - mailboxStarted) / 1000);
    progress("one event in flight: latency without queueing");
    const single: number[] = [];
    for (let i = 0; i < 1_000; i++) {
      const t0 = performance.now();
      const answer = await mailbox.request({ kind: "counter", id: `a${i % actors}` }, { type: "inc" }, `s-${i}`);
      if (answer.outcome !== "applied") throw new Error(`sequential event ${i}: ${answer.outcome}`);
      single.push(performance.now() - t0);
    }
    await node.stop();

    progress("raw revision-checked KV updates on the same server");
    const kv = await new Kvm(client).create("bench_raw", { history: 1 });
    const keys = 1_000;
    const revs: number[] = [];
    for (let i = 0; i < keys; i++) revs.push(await kv.put(`k${i}`, "v"));
    const kvTotal = 10_000;
    const kvCpu = cpuWindow(server.pid, ticks);
    const kvStarted = performance.now();
    await windowed(kvTotal, 64, async (i) => {
      const k = i % keys;
      revs[k] = await kv.update(`k${k}`, `v${i}`, revs[k]!);
    });
    const kvRate = kvTotal / ((performance.now() - kvStarted) / 1000);
    const kvUpdateCpu = kvCpu(kvTotal);
    const kvLatencies: number[] = [];
    for (let i = 0; i < 2_000; i++) {
      const k = i % keys;
      const t0 = performance.now();
      revs[k] = await kv.update(`k${k}`, `s${i}`, revs[k]!);
      kvLatencies.push(performance.now() - t0);
    }
    await client.close();
    return {
      bench: "actor",
      nats_server: serverVersion,
      actors,
      events_per_actor: eventsPerActor,
      in_flight: window,
      transitions,
      transitions_per_s: Math.round(transitions / elapsed),
      // How the timed events reached their actors: asked of the owner directly (MailboxClient.request's fast path).
      asked_directly: asked,
      mailbox_transitions_per_s: Math.round(mailboxRate),
      latency_ms: percentiles(latencies),
      // CPU a timed transition cost in microseconds: this process (the node and the client, one
      // main thread), its main thread, and nats-server; beside it what one raw KV update cost.
      cpu_us_per_transition: transitionCpu,
      cpu_us_per_raw_kv_update: kvUpdateCpu,
      latency_ms_one_in_flight: percentiles(single),
      kv_writes: writes,
      transitions_per_kv_write: Math.round((transitions / Math.max(1, writes)) * 100) / 100,
      raw_kv_update_per_s_64_in_flight: Math.round(kvRate),
      transitions_to_raw_kv: Math.round((transitions / elapsed / kvRate) * 100) / 100,
      raw_kv_update_latency_ms_sequential: percentiles(kvLatencies),
    };
  } finally {
    await server.dispose();
  }
}
