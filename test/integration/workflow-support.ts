import { fileURLToPath } from "node:url";
import { afterAll, beforeAll } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { RunwayClient, type ApiAnswer } from "../../cluster/client.js";
import { startRunwayNode, type RunwayNodeConfig, type RunwayWorkflowNode } from "../../cluster/runway-node.js";
import { createLogger } from "../../runtime/index.js";
import { startServer, waitFor, type NatsServerHandle } from "../harness/index.js";

export const HANDLERS = fileURLToPath(new URL("../fixtures/handlers.ts", import.meta.url));

/** A server, one in-process workflow node serving the API (with `overrides`), and a client for tenant `t1`. */
export function workflowWorld(overrides: Partial<RunwayNodeConfig> = {}): {
  readonly server: NatsServerHandle;
  readonly node: RunwayWorkflowNode;
  readonly nc: NatsConnection;
  readonly client: RunwayClient;
  clientFor(tenant: string): RunwayClient;
  settled(runId: string, client?: RunwayClient): Promise<RunAnswer>;
} {
  const world = {
    server: undefined as unknown as NatsServerHandle,
    node: undefined as unknown as RunwayWorkflowNode,
    nc: undefined as unknown as NatsConnection,
    client: undefined as unknown as RunwayClient,
    clientFor: (tenant: string) => new RunwayClient(world.nc, tenant),
    settled: (runId: string, client?: RunwayClient) => settled(client ?? world.client, runId),
  };
  beforeAll(async () => {
    world.server = await startServer();
    const name = overrides.name ?? "wf-node";
    world.node = await startRunwayNode({
      connection: world.server.connectOptions(),
      name,
      handlers: [HANDLERS],
      logger: createLogger(name, "error"),
      ...overrides,
    });
    await waitFor(() => world.node.node.host.ownedPartitions().length === 32, { timeoutMs: 20_000, describe: "node to own all partitions" });
    world.nc = await connect(world.server.connectOptions());
    world.client = new RunwayClient(world.nc, "t1");
    await world.client.createTenant("t1");
    await world.client.createTenant("t2");
  });
  afterAll(async () => {
    await world.nc?.close();
    await world.node?.stop();
    await world.server?.dispose();
  });
  return world;
}

export type RunAnswer = {
  status: string;
  result: unknown;
  error: { code: string; message: string } | null;
  nodes: Record<string, { status: string; attempt?: number; items?: number; error?: { code: string } }>;
  id: string;
};

export async function settled(client: RunwayClient, runId: string): Promise<RunAnswer> {
  return waitFor(
    async () => {
      const a: ApiAnswer = await client.getRun(runId);
      const run = a.run as RunAnswer | undefined;
      return run && ["succeeded", "failed", "cancelled"].includes(run.status) ? run : undefined;
    },
    { timeoutMs: 30_000, describe: `run ${runId} to settle` },
  );
}

/** How a run ended, or `absent` if it was never created (a child refused or not yet asked for). */
export function endOf(client: RunwayClient, runId: string): Promise<string> {
  return waitFor(
    async () => {
      const got = await client.getRun(runId);
      if (got.outcome === "run_not_found") return "absent";
      const s = (got.run as RunAnswer).status;
      return s === "running" || s === "queued" || s === "waiting" ? undefined : s;
    },
    { timeoutMs: 20_000, describe: `run ${runId} to end` },
  );
}
