import { afterAll, beforeAll, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { RunwayClient } from "../../cluster/client.js";
import { startRunwayNode, type RunwayWorkflowNode } from "../../cluster/runway-node.js";
import { RUN_KIND } from "../../actors/index.js";
import { STEP_READY } from "../../machines/index.js";
import { createLogger } from "../../runtime/index.js";
import { startServer, waitFor, type NatsServerHandle } from "../harness/index.js";
import { losingLocal } from "../fixtures/faults.js";
import { startOtlpReceiver, STATUS_ERROR, type OtlpReceiver } from "../fixtures/otlp.js";
import { settled, HANDLERS, type RunAnswer } from "./workflow-support.js";

/**
 * C118 on a real node exporting to a receiver process: the recovery sweep (run here only when the
 * test asks, at a clock it chooses) fails a run whose attempt's worker went silent, and the same
 * stored transition closes that attempt's span `worker_lost` and ends the run's own span.
 */
const drops = new Set<string>();
let server: NatsServerHandle;
let receiver: OtlpReceiver;
let node: RunwayWorkflowNode;
let nc: NatsConnection;

beforeAll(async () => {
  server = await startServer();
  receiver = await startOtlpReceiver();
  node = await startRunwayNode({
    connection: server.connectOptions(),
    name: "sweep-traced",
    handlers: [HANDLERS],
    logger: createLogger("sweep-traced", "error"),
    sweepIntervalMs: false,
    stepLeaseTtlMs: 20_000,
    decorate: { local: losingLocal((channel) => drops.delete(channel)) },
    traces: { url: `${receiver.endpoint}/v1/traces` },
  });
  await waitFor(() => node.node.host.ownedPartitions().length === 32, { timeoutMs: 20_000, describe: "node to own all partitions" });
  nc = await connect(server.connectOptions());
}, 60_000);

afterAll(async () => {
  await nc?.close();
  await node?.stop();
  await receiver?.process.kill("SIGTERM").catch(() => undefined);
  await server?.dispose();
});

it("C118 a run the sweep fails has its open attempt span closed worker_lost in the same pass as the run's own span", async () => {
  const client = new RunwayClient(nc, "r1");
  expect((await client.createTenant("r1")).outcome).toMatch(/created|exists/);
  const def = { name: "once", nodes: [{ id: "a", kind: "code", handler: "echo", input: 1, retry: { max_attempts: 1, backoff_ms: 0, max_backoff_ms: 0 } }] };
  expect((await client.putDefinition(def)).outcome).toBe("published");
  // The offer never reaches this node's executor: a worker elsewhere (here: the test) leases attempt 1 and goes silent.
  drops.add(STEP_READY);
  const id = ((await client.startRun({ definition: "once" })).run as RunAnswer).id;
  await waitFor(() => !drops.has(STEP_READY) || undefined, { timeoutMs: 10_000, describe: "the offer to be dropped" });
  const beat = await node.node.host.dispatch({ kind: RUN_KIND, id }, { type: "step.heartbeat", node: "a", attempt: 1, lease_epoch: 1 }, `hb/${id}`);
  expect(beat.outcome).toBe("applied");
  await waitFor(async () => ((await client.getRun(id)).run as RunAnswer).nodes.a?.attempt === 1 || undefined, {
    timeoutMs: 10_000,
    describe: "attempt 1 leased",
  });

  // A pass reads the live-run index, which may not list a run this new yet on a loaded machine: passes until one finds it.
  await waitFor(async () => (await node.sweeper.pass(Date.now() + 30_000)).actions.expire_lease === 1 || undefined, {
    timeoutMs: 10_000,
    describe: "a sweep pass to expire the lease",
  });
  const done = await settled(client, id);
  expect(done.status).toBe("failed");
  expect(done.nodes.a!.error?.code).toBe("worker_lost");

  const all = await receiver.traceOf(id, (a) => a.some((s) => s.name === "step a"));
  const root = all.find((s) => s.name === "run once")!;
  const lost = all.filter((s) => s.name === "step a");
  expect(lost).toHaveLength(1);
  expect(lost[0]!.parentSpanId).toBe(root.spanId);
  expect(lost[0]!.status).toBe(STATUS_ERROR);
  expect(lost[0]!.attributes).toMatchObject({ "error.type": "worker_lost", "runway.attempt": 1 });
  expect(root.status).toBe(STATUS_ERROR);
  expect(root.attributes["error.type"]).toBe(done.error!.code);
  // The same pass: both spans end at the sweep's transition.
  expect(lost[0]!.end).toBe(root.end);
}, 60_000);
