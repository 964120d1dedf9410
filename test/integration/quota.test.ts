import { afterAll, beforeAll, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { RunwayClient } from "../../cluster/client.js";
import { startRunwayNode, type RunwayWorkflowNode } from "../../cluster/runway-node.js";
import { runIdFor, startKey } from "../../actors/index.js";
import { createLogger, partitionOf } from "../../runtime/index.js";
import { startServer, waitFor, type NatsServerHandle } from "../harness/index.js";
import { HANDLERS, settled, type RunAnswer } from "./workflow-support.js";

const WINDOW_MS = 3_000;
const N = 5;
let server: NatsServerHandle;
const nodes: RunwayWorkflowNode[] = [];
let nc: NatsConnection;

beforeAll(async () => {
  server = await startServer();
  for (const name of ["quota-a", "quota-b"]) {
    nodes.push(
      await startRunwayNode({
        connection: server.connectOptions(),
        name,
        handlers: [HANDLERS],
        quotaWindowMs: WINDOW_MS,
        leaseTtlMs: 3_000,
        logger: createLogger(name, "error"),
      }),
    );
  }
  await waitFor(
    () => nodes.every((n) => n.node.host.ownedPartitions().length > 0) && nodes.reduce((s, n) => s + n.node.host.ownedPartitions().length, 0) === 32,
    {
      timeoutMs: 30_000,
      describe: "two nodes sharing the partitions",
    },
  );
  nc = await connect(server.connectOptions());
});
afterAll(async () => {
  await nc?.close();
  for (const n of nodes) await n.stop();
  await server?.dispose();
});

/** `perNode` runs of `ask` on each node: start keys chosen so the runs land in each node's partitions. */
async function startOnEachNode(client: RunwayClient, tenant: string, perNode: number): Promise<string[]> {
  const runs: string[] = [];
  const placed = new Map<RunwayWorkflowNode, number>();
  for (let i = 0; runs.length < perNode * nodes.length; i++) {
    const key = { source: "quota", delivery_id: `d${i}` };
    const owner = nodes.find((n) => n.node.host.owns(partitionOf(runIdFor(tenant, startKey(key.source, key.delivery_id)), 32)))!;
    if ((placed.get(owner) ?? 0) >= perNode) continue;
    placed.set(owner, (placed.get(owner) ?? 0) + 1);
    runs.push(((await client.startRun({ definition: "ask", start_key: key })).run as RunAnswer).id);
  }
  return runs;
}

it("provider quota: with N requests per window, no more than N calls are leased per window across two nodes; waiting steps hold no worker", async () => {
  const client = new RunwayClient(nc, "q1");
  await client.createTenant("q1", { provider_quotas: { "llm/fast": { requests_per_minute: N, tokens_per_minute: 100_000 } } });
  expect(
    (await client.putDefinition({ name: "ask", nodes: [{ id: "call", kind: "code", handler: "slow", input: { ms: 50 }, provider: "llm/fast" }] })).outcome,
  ).toBe("published");
  // Let both nodes learn the tenant's quota before the calls arrive.
  for (const n of nodes) await n.tenants.get("q1");
  const runs = await startOnEachNode(client, "q1", 6);
  let maxInFlight = 0;
  const sampler = setInterval(
    () =>
      (maxInFlight = Math.max(
        maxInFlight,
        nodes.reduce((s, n) => s + n.executor.inFlight, 0),
      )),
    5,
  );
  try {
    for (const id of runs) expect((await settled(client, id)).status).toBe("succeeded");
  } finally {
    clearInterval(sampler);
  }
  const perWindow = new Map<number, number>();
  for (const n of nodes) for (const g of n.dispatcher!.quotaGrants) perWindow.set(g.window, (perWindow.get(g.window) ?? 0) + 1);
  const waits = nodes.reduce((s, n) => s + n.dispatcher!.quotaWaits, 0);
  console.log(
    `provider quota: grants per ${WINDOW_MS} ms window across both nodes ${JSON.stringify([...perWindow.values()])}; ${waits} waits; at most ${maxInFlight} attempts executing at once`,
  );
  expect([...perWindow.values()].reduce((a, b) => a + b, 0)).toBe(12);
  for (const count of perWindow.values()) expect(count).toBeLessThanOrEqual(N);
  expect(nodes.every((n) => n.dispatcher!.quotaGrants.length > 0)).toBe(true);
  expect(waits).toBeGreaterThan(0);
  // Waiting calls held no worker: never more executing than one window allows.
  expect(maxInFlight).toBeLessThanOrEqual(N);
});

it("provider token quota: steps' estimated tokens (their cost) per window stay within tokens_per_minute across two nodes", async () => {
  const TOKENS = 10;
  const COST = 4;
  const client = new RunwayClient(nc, "q2");
  await client.createTenant("q2", { provider_quotas: { "llm/big": { requests_per_minute: 1_000, tokens_per_minute: TOKENS } } });
  expect((await client.putDefinition({ name: "ask", nodes: [{ id: "call", kind: "code", handler: "noop", provider: "llm/big", cost: COST }] })).outcome).toBe(
    "published",
  );
  for (const n of nodes) await n.tenants.get("q2");
  const before = new Set(nodes.flatMap((n) => n.dispatcher!.quotaGrants));
  const runs = await startOnEachNode(client, "q2", 3);
  for (const id of runs) expect((await settled(client, id)).status).toBe("succeeded");
  const perWindow = new Map<number, number>();
  for (const n of nodes)
    for (const g of n.dispatcher!.quotaGrants) if (!before.has(g) && g.tenant === "q2") perWindow.set(g.window, (perWindow.get(g.window) ?? 0) + 1);
  expect([...perWindow.values()].reduce((a, b) => a + b, 0)).toBe(6);
  // 10 tokens a window at 4 a call: two calls per window, never three.
  for (const count of perWindow.values()) expect(count * COST).toBeLessThanOrEqual(TOKENS);
  expect(nodes.every((n) => n.dispatcher!.quotaGrants.some((g) => !before.has(g) && g.tenant === "q2"))).toBe(true);
});
