/**
 * a2a: what the A2A server adds to a run, on one in-process node serving HTTP. For a one-step
 * workflow (`echo`), per sample and alternately:
 *
 * - `nats_ms`: `runs.start` over NATS → the run's `run_succeeded` event → `runs.get` (its result);
 * - `blocking_ms`: a blocking JSON-RPC `SendMessage` by the SDK's client → the completed task with
 *   the result as its artifact;
 * - `stream_first_event_ms`: `SendStreamingMessage` → its first event (the task), the stream then
 *   read to its end;
 * - `get_task_ms` beside `runs_get_ms`: one read of an ended task by A2A `GetTask`, and of its run
 *   by `runs.get` over NATS: what HTTP, the SDK's client and server, and the task's record cost.
 *
 * Target: A2A adds at most 1 ms at p50 (`added_p50_ms`). Env: A2A_N samples (default 200, after 20 warm-up).
 */
import { GetTaskRequest, SendMessageRequest } from "@a2a-js/sdk";
import { ClientFactory, ClientFactoryOptions } from "@a2a-js/sdk/client";
import { connect } from "@nats-io/transport-node";
import { fileURLToPath } from "node:url";
import { RunwayClient } from "../../cluster/client.js";
import { startRunwayNode } from "../../cluster/runway-node.js";
import { createLogger } from "../../runtime/index.js";
import { startServer, waitFor } from "../harness/index.js";
import { percentiles, progress } from "./stats.js";
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
    let ended = "";
    const blocking = async () => {
      const t0 = performance.now();
      const task = (await a2aClient.sendMessage(message())) as { id: string; status?: { state: number } };
      if (task.status?.state !== 3) throw new Error(`task not completed: ${JSON.stringify(task.status)}`);
      ended = task.id;
      return performance.now() - t0;
    };
    const reads = async () => {
      const t0 = performance.now();
      await a2aClient.getTask(GetTaskRequest.fromJSON({ id: ended }));
      const t1 = performance.now();
      await client.getRun(ended);
      return { a2a: t1 - t0, nats: performance.now() - t1 };
    };
    const streaming = async () => {
      const t0 = performance.now();
      let first: number | undefined;
      for await (const _ of a2aClient.sendMessageStream(message())) first ??= performance.now() - t0;
      return first!;
    };
    progress(`a2a: ${WARM_UP} warm-up + ${samples} samples of each, one at a time`);
    for (let i = 0; i < WARM_UP; i++) await Promise.resolve().then(viaNats).then(blocking).then(streaming);
    const nats: number[] = [];
    const blocked: number[] = [];
    const firsts: number[] = [];
    const getTask: number[] = [];
    const runsGet: number[] = [];
    for (let i = 0; i < samples; i++) {
      nats.push(await viaNats());
      blocked.push(await blocking());
      firsts.push(await streaming());
      const r = await reads();
      getTask.push(r.a2a);
      runsGet.push(r.nats);
    }
    const natsP = percentiles(nats);
    const blockingP = percentiles(blocked);
    const added = blockingP.p50 - natsP.p50;
    return {
      bench: "a2a",
      samples,
      warm_up: WARM_UP,
      nats_ms: natsP,
      blocking_ms: blockingP,
      stream_first_event_ms: percentiles(firsts),
      get_task_ms: percentiles(getTask),
      runs_get_ms: percentiles(runsGet),
      added_p50_ms: added,
      target: { added_p50_ms_max: TARGET_ADDED_P50_MS },
      target_met: added <= TARGET_ADDED_P50_MS,
    };
  } finally {
    await nc.close();
    await node.stop();
    await server.dispose();
  }
}
