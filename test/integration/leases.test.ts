import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { RunwayClient } from "../../cluster/client.js";
import { startRunwayNode, type RunwayWorkflowNode } from "../../cluster/runway-node.js";
import { createLogger } from "../../runtime/index.js";
import { startServer, waitFor, type NatsServerHandle } from "../harness/index.js";
import { HANDLERS, settled, type RunAnswer } from "./workflow-support.js";

let server: NatsServerHandle;
let node: RunwayWorkflowNode;
let nc: NatsConnection;
const dir = mkdtempSync(join(tmpdir(), "runway-lease-"));

beforeAll(async () => {
  server = await startServer();
  // Leases shorter than the handlers' timeouts: a handler that stops heartbeating loses its lease.
  node = await startRunwayNode({ connection: server.connectOptions(), name: "lease-node", handlers: [HANDLERS], stepLeaseTtlMs: 1_500, logger: createLogger("lease-node", "error") });
  await waitFor(() => node.node.host.ownedPartitions().length === 32, { timeoutMs: 20_000, describe: "partitions" });
  nc = await connect(server.connectOptions());
});
afterAll(async () => {
  await nc?.close();
  await node?.stop();
  await server?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

it("zombie commit refused: a handler spinning past its lease gets stale_lease; the retry's result is the step's result; its effect counts once", async () => {
  const client = new RunwayClient(nc, "z1");
  await client.createTenant("z1");
  const ledger = join(dir, "effects.txt");
  const def = {
    name: "zombie-step",
    nodes: [
      { id: "work", kind: "code", handler: "spin_first", input: { ms: 3_000 }, timeout_ms: 60_000, retry: { max_attempts: 3, backoff_ms: 0, max_backoff_ms: 0 } },
      { id: "effect", kind: "code", needs: ["work"], handler: "count_invocations", input: { file: ledger, value: "${steps.work.output}" } },
    ],
  };
  expect((await client.putDefinition(def)).outcome).toBe("published");
  const started = await client.startRun({ definition: "zombie-step" });
  const done = await settled(client, (started.run as RunAnswer).id);
  expect(done.status).toBe("succeeded");
  // The retry (attempt 2, after the lease of attempt 1 expired) produced the step's result.
  expect((done.result as { work: { attempt: number } }).work).toEqual({ attempt: 2 });
  // The zombie finished later and tried to commit: refused.
  await waitFor(() => node.executor.stats.staleCommits >= 1, { timeoutMs: 15_000, describe: "the zombie's commit to be refused" });
  const run = (await client.getRun(done.id)).run as RunAnswer;
  expect(run.nodes.work!.attempt).toBe(2);
  // The step's effect, downstream of its result, happened exactly once, with the retry's output.
  const lines = readFileSync(ledger, "utf8").trim().split("\n");
  expect(lines).toHaveLength(1);
});

it("heartbeats keep a long handler's lease alive", async () => {
  const client = new RunwayClient(nc, "z2");
  await client.createTenant("z2");
  expect((await client.putDefinition({ name: "beating", nodes: [{ id: "b", kind: "code", handler: "long_beat", input: { ms: 3_000 } }] })).outcome).toBe("published");
  const started = await client.startRun({ definition: "beating" });
  const done = await settled(client, (started.run as RunAnswer).id);
  expect(done.status).toBe("succeeded");
  expect(done.nodes.b!.attempt).toBe(1);
  expect(node.executor.stats.heartbeats).toBeGreaterThan(0);
});

it("metrics: lease acquisitions and expiries and zombie rejections, as JSON over NATS and as Prometheus text", async () => {
  const reply = await nc.request("runway.v1.ops.metrics", "", { timeout: 5_000 });
  const body = JSON.parse(reply.string()) as { outcome: string; node: string; metrics: Record<string, unknown> };
  expect(body.outcome).toBe("ok");
  expect(body.node).toBe("lease-node");
  expect(body.metrics.lease_acquisitions).toBeGreaterThanOrEqual(3);
  expect(body.metrics.zombie_commit_rejections).toBeGreaterThanOrEqual(1);
  expect(body.metrics.lease_expiries).toEqual({ "tenant=z1": 1 });
  const text = (await nc.request("runway.v1.ops.metrics.prometheus", "", { timeout: 5_000 })).string();
  expect(text).toMatch(/^# TYPE runway_lease_acquisitions counter$/m);
  expect(text).toMatch(/^runway_lease_expiries\{node="lease-node",tenant="z1"\} 1$/m);
});
