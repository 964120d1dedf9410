/**
 * a2a: what the A2A server adds to a run, on one in-process node serving HTTP. For a one-step
 * workflow (`echo`), per sample and alternately:
 *
 * - `nats_ms`: `runs.start` over NATS → the run's `run_succeeded` event → `runs.get` (its result);
 * - `nats_keyed_ms`: the same with a start key (as an A2A task's start has: the start looks its run
 *   up first, and asks its tenant after the definition is read rather than beside it);
 * - `blocking_ms`: a blocking JSON-RPC `SendMessage` as one HTTP request on a kept-alive connection
 *   (`node:http`, as a service calling the agent would) → the completed task with the result as
 *   its artifact; `blocking_sdk_ms` the same by the A2A SDK's client (`fetch`: undici's own cost
 *   is in it, in this process, beside the node);
 * - `stream_first_event_ms`: `SendStreamingMessage` → its first event (the task), the stream then
 *   read to its end;
 * - `get_task_ms` beside `runs_get_ms`: one read of an ended task by A2A `GetTask`, and of its run
 *   by `runs.get` over NATS: what HTTP, the SDK's client and server, and the task's record cost;
 *   `get_task_http_ms` the same `GetTask` as one kept-alive HTTP request (as `blocking_ms`: without
 *   the SDK client's `fetch`).
 *
 * - `streams`: A2A_STREAMS (default 1,000; 0 skips it) `SendStreamingMessage` streams opened at once
 *   on the node, each the run of a one-step workflow that sleeps (a durable timer: the task stays
 *   `working` and holds no worker, so every stream stays open): the first event's latency
 *   (p50/p95), the time until all had theirs, the process's heap (after a full GC) and RSS with all
 *   of them open minus before, the process's CPU over 3 s with all open and idle (each stream reads
 *   its run's journal every second); then every run is cancelled and each stream ends with `canceled`.
 *   The clients are plain HTTP requests in the same process (a socket and an SSE parser each), so
 *   the memory figures are the node's with a small client share.
 *
 * Target: A2A adds at most 1 ms at p50 (`added_p50_ms`: `blocking_ms` less `nats_ms`). Env: A2A_N samples (default 200, after 20 warm-up).
 */
import { GetTaskRequest, SendMessageRequest } from "@a2a-js/sdk";
import { ClientFactory, ClientFactoryOptions } from "@a2a-js/sdk/client";
import { connect } from "@nats-io/transport-node";
import { Agent, request } from "node:http";
import { fileURLToPath } from "node:url";
import { RunwayClient } from "../../cluster/client.js";
import { startRunwayNode } from "../../cluster/runway-node.js";
import { createLogger } from "../../runtime/index.js";
import { startServer, waitFor } from "../harness/index.js";
import { forceGc, percentiles, progress } from "./stats.js";
import { runEnds } from "./workflow.js";

const WARM_UP = 20;
const TARGET_ADDED_P50_MS = 1;
const handlers = fileURLToPath(new URL("../fixtures/handlers.ts", import.meta.url));

export async function a2a(): Promise<Record<string, unknown>> {
  const samples = Number(process.env.A2A_N ?? 200);
  const server = await startServer();
  const node = await startRunwayNode({
    connection: server.connectOptions(),
    name: "bench",
    handlers: [handlers],
    logger: createLogger("bench", "warn"),
    http: { port: 0 },
  });
  const nc = await connect({ ...server.connectOptions(), noAsyncTraces: true });
  try {
    await waitFor(() => node.node.host.ownedPartitions().length === 32, { timeoutMs: 30_000, describe: "partitions" });
    const client = new RunwayClient(nc, "bench", 60_000);
    await client.createTenant("bench", { max_concurrency: 10_000 });
    await client.putDefinition({ name: "echo", nodes: [{ id: "e", kind: "code", handler: "echo", input: "${input}" }], result: "${steps.e.output}" });
    await client.exposeAgent({ definition: "echo", public: true });
    const finished = await runEnds(nc, "bench");
    const a2aClient = await new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { preferredTransports: ["JSONRPC"] }),
    ).createFromUrl(`${node.httpUrl}/a2a/bench/echo/`);
    let n = 0;
    const message = () => SendMessageRequest.fromJSON({ message: { messageId: `b-${n++}`, role: "ROLE_USER", parts: [{ data: { n } }] } });
    const viaNats = async () => {
      const t0 = performance.now();
      const s = await client.startRun({ definition: "echo", input: { n: n++ } });
      const id = (s.run as { id: string }).id;
      if ((await finished(id)) !== "run_succeeded") throw new Error(`run ${id} failed`);
      await client.getRun(id);
      return performance.now() - t0;
    };
    const viaNatsKeyed = async () => {
      const t0 = performance.now();
      const i = n++;
      const s = await client.startRun({ definition: "echo", input: { n: i }, start_key: { source: "bench", delivery_id: `k-${process.pid}-${i}` } });
      const id = (s.run as { id: string }).id;
      if ((await finished(id)) !== "run_succeeded") throw new Error(`run ${id} failed`);
      await client.getRun(id);
      return performance.now() - t0;
    };
    let ended = "";
    const blockingSdk = async () => {
      const t0 = performance.now();
      const task = (await a2aClient.sendMessage(message())) as { id: string; status?: { state: number } };
      if (task.status?.state !== 3) throw new Error(`task not completed: ${JSON.stringify(task.status)}`);
      ended = task.id;
      return performance.now() - t0;
    };
    const keptAlive = new Agent({ keepAlive: true, maxSockets: 1 });
    const blocking = async () => {
      const t0 = performance.now();
      const i = n++;
      const answer = await postJson(`${node.httpUrl}/a2a/bench/echo/`, keptAlive, {
        jsonrpc: "2.0",
        id: i,
        method: "SendMessage",
        params: { message: { messageId: `h-${i}`, role: "ROLE_USER", parts: [{ data: { n: i } }] } },
      });
      if (!/"state":"TASK_STATE_COMPLETED"/.test(answer)) throw new Error(`task not completed: ${answer.slice(0, 300)}`);
      return performance.now() - t0;
    };
    const reads = async () => {
      const t0 = performance.now();
      await a2aClient.getTask(GetTaskRequest.fromJSON({ id: ended }));
      const t1 = performance.now();
      await client.getRun(ended);
      const t2 = performance.now();
      const i = n++;
      const answer = await postJson(`${node.httpUrl}/a2a/bench/echo/`, keptAlive, { jsonrpc: "2.0", id: i, method: "GetTask", params: { id: ended } });
      if (!/"state":"TASK_STATE_COMPLETED"/.test(answer)) throw new Error(`task not read: ${answer.slice(0, 300)}`);
      return { a2a: t1 - t0, nats: t2 - t1, http: performance.now() - t2 };
    };
    const streaming = async () => {
      const t0 = performance.now();
      let first: number | undefined;
      for await (const _ of a2aClient.sendMessageStream(message())) first ??= performance.now() - t0;
      return first!;
    };
    progress(`a2a: ${WARM_UP} warm-up + ${samples} samples of each, one at a time`);
    for (let i = 0; i < WARM_UP; i++) await Promise.resolve().then(viaNats).then(viaNatsKeyed).then(blocking).then(blockingSdk).then(streaming);
    const nats: number[] = [];
    const natsKeyed: number[] = [];
    const blocked: number[] = [];
    const blockedSdk: number[] = [];
    const firsts: number[] = [];
    const getTask: number[] = [];
    const getTaskHttp: number[] = [];
    const runsGet: number[] = [];
    for (let i = 0; i < samples; i++) {
      nats.push(await viaNats());
      natsKeyed.push(await viaNatsKeyed());
      blocked.push(await blocking());
      blockedSdk.push(await blockingSdk());
      firsts.push(await streaming());
      const r = await reads();
      getTask.push(r.a2a);
      getTaskHttp.push(r.http);
      runsGet.push(r.nats);
    }
    keptAlive.destroy();
    const streamsN = Number(process.env.A2A_STREAMS ?? 1_000);
    const streamsFigures = streamsN > 0 ? await streams(client, `${node.httpUrl}/a2a/bench/doze`, streamsN) : undefined;
    const natsP = percentiles(nats);
    const blockingP = percentiles(blocked);
    const added = blockingP.p50 - natsP.p50;
    return {
      bench: "a2a",
      samples,
      warm_up: WARM_UP,
      nats_ms: natsP,
      nats_keyed_ms: percentiles(natsKeyed),
      blocking_ms: blockingP,
      blocking_sdk_ms: percentiles(blockedSdk),
      stream_first_event_ms: percentiles(firsts),
      get_task_ms: percentiles(getTask),
      get_task_http_ms: percentiles(getTaskHttp),
      runs_get_ms: percentiles(runsGet),
      added_p50_ms: added,
      // What A2A adds over a start as keyed as its own (the target is over one without a key).
      added_over_keyed_p50_ms: blockingP.p50 - percentiles(natsKeyed).p50,
      ...(streamsFigures ? { streams: streamsFigures } : {}),
      target: { added_p50_ms_max: TARGET_ADDED_P50_MS },
      target_met: added <= TARGET_ADDED_P50_MS,
    };
  } finally {
    await nc.close();
    await node.stop();
    await server.dispose();
  }
}

/** POSTs `body` as JSON on `agent`'s connection: the answer's body. */
function postJson(url: string, agent: Agent, body: unknown): Promise<string> {
  const text = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method: "POST", agent, headers: { "content-type": "application/json", "a2a-version": "1.0", "content-length": Buffer.byteLength(text) } },
      (res) => {
        let answer = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (answer += chunk));
        res.on("end", () => resolve(answer));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(text);
  });
}

/** One open SSE stream of a JSON-RPC `SendStreamingMessage`: when its first event came, and when it ended (with its last state). */
interface OpenStream {
  first: Promise<number>;
  ended: Promise<string>;
}

/** Opens a JSON-RPC `SendStreamingMessage` as a plain HTTP request, reading its SSE lines. */
function openStream(url: string, agent: Agent, i: number, t0: number): OpenStream {
  const body = JSON.stringify({
    jsonrpc: "2.0",
    id: i,
    method: "SendStreamingMessage",
    params: { message: { messageId: `s-${process.pid}-${i}`, role: "ROLE_USER", parts: [{ data: { i } }] } },
  });
  let gotFirst!: (ms: number) => void;
  let failed!: (err: Error) => void;
  const first = new Promise<number>((resolve, reject) => {
    gotFirst = resolve;
    failed = reject;
  });
  const ended = new Promise<string>((resolve, reject) => {
    const req = request(
      url,
      {
        method: "POST",
        agent,
        headers: { "content-type": "application/json", "a2a-version": "1.0", accept: "text/event-stream", "content-length": Buffer.byteLength(body) },
      },
      (res) => {
        let buffer = "";
        let last = "";
        let seen = false;
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          buffer += chunk;
          for (let nl = buffer.indexOf("\n"); nl >= 0; nl = buffer.indexOf("\n")) {
            const line = buffer.slice(0, nl);
            buffer = buffer.slice(nl + 1);
            if (!line.startsWith("data:")) continue;
            if (!seen) {
              seen = true;
              gotFirst(performance.now() - t0);
            }
            last = /"state":"(TASK_STATE_[A-Z_]+)"/.exec(line)?.[1] ?? last;
          }
        });
        res.on("end", () => (seen ? resolve(last) : reject(new Error(`stream ${i} ended with no event (HTTP ${res.statusCode})`))));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(body);
  });
  ended.catch((err: Error) => failed(err));
  return { first, ended };
}

/**
 * `n` streaming clients at once on one node: each starts a run that sleeps (its stream stays open
 * while the task is `working`); first-event latency, memory with all open, then all are ended.
 */
async function streams(client: RunwayClient, url: string, n: number): Promise<Record<string, unknown>> {
  await client.putDefinition({ name: "doze", nodes: [{ id: "z", kind: "sleep", duration_ms: 3_600_000 }] });
  await client.exposeAgent({ definition: "doze", public: true });
  const agent = new Agent({ keepAlive: true, maxSockets: Infinity });
  const mb = (bytes: number) => Math.round((bytes / 1024 / 1024) * 10) / 10;
  forceGc();
  const before = process.memoryUsage();
  progress(`a2a: ${n} streams at once`);
  const t0 = performance.now();
  const open = Array.from({ length: n }, (_, i) => openStream(url, agent, i, t0));
  const firsts = await Promise.all(open.map((s) => s.first));
  const allFirst = performance.now() - t0;
  // Every run started and asleep: the streams are open and idle.
  const ids = await waitFor(
    async () => {
      const waiting: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await client.listRuns({ status: "waiting", limit: 500, ...(cursor ? { cursor } : {}) });
        waiting.push(...(page.runs as { id: string }[]).map((r) => r.id));
        cursor = typeof page.next_cursor === "string" ? page.next_cursor : undefined;
      } while (cursor);
      return waiting.length >= n ? waiting : undefined;
    },
    { timeoutMs: 120_000, describe: `${n} runs asleep` },
  );
  forceGc();
  const during = process.memoryUsage();
  // What 1,000 open, idle streams cost the process: each reads its run's journal every second without a live event.
  const cpu0 = process.cpuUsage();
  const idle0 = performance.now();
  await new Promise((r) => setTimeout(r, 3_000));
  const cpu = process.cpuUsage(cpu0);
  const idleCpu = Math.round(((cpu.user + cpu.system) / 1000 / (performance.now() - idle0)) * 1000) / 10;
  progress(`a2a: ${n} streams open; ending them`);
  const t1 = performance.now();
  for (let i = 0; i < ids.length; i += 100) await Promise.all(ids.slice(i, i + 100).map((id) => client.cancelRun(id, "bench over")));
  const states = await Promise.all(open.map((s) => s.ended));
  const endedMs = performance.now() - t1;
  agent.destroy();
  return {
    streams: n,
    first_event_ms: percentiles(firsts),
    all_first_events_ms: Math.round(allFirst),
    heap_delta_mb: mb(during.heapUsed - before.heapUsed),
    rss_delta_mb: mb(during.rss - before.rss),
    heap_per_stream_kb: Math.round(((during.heapUsed - before.heapUsed) / n / 1024) * 10) / 10,
    idle_open_cpu_percent: idleCpu,
    all_ended_ms: Math.round(endedMs),
    ended_canceled: states.filter((s) => s === "TASK_STATE_CANCELED").length,
  };
}
