import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { readFence } from "../../runtime/store/partition-log.js";
import { repoRoot, RUNWAY_USER, spawnTsx, startServer, waitFor, type ChildHandle, type NatsServerHandle } from "../harness/index.js";
import type { RunwayClient } from "../../cluster/client.js";
import type { RunAnswer } from "../integration/workflow-support.js";

const fixture = fileURLToPath(new URL("../fixtures/node-process.ts", import.meta.url));

export interface NodeProcessOptions {
  name: string;
  leaseTtlMs?: number;
  replicas?: number;
  crashAfterWrite?: string;
  holdBeforeWrite?: { key: string; file: string };
}

/** Starts `test/fixtures/node-process.ts` as a real child process and waits until it is serving. */
export async function startNodeProcess(servers: readonly string[], options: NodeProcessOptions): Promise<ChildHandle> {
  const child = spawnTsx(fixture, [], {
    name: options.name,
    env: { RW_TEST_NODE: JSON.stringify({ servers, ...RUNWAY_USER, ...options }) },
  });
  await child.waitForLine(/^READY /, { timeoutMs: 30_000 });
  return child;
}

/** The owner named by every partition's fence record (null: unowned or unreadable). */
export async function fenceOwners(nc: NatsConnection, partitions: number): Promise<{ owner: string | null; epoch: number }[]> {
  const out: { owner: string | null; epoch: number }[] = [];
  for (let p = 0; p < partitions; p++) {
    const f = await readFence(nc, p);
    out.push(f.outcome === "found" ? { owner: f.fence.owner, epoch: f.epoch } : { owner: null, epoch: 0 });
  }
  return out;
}

/**
 * One single-server world per test file: a server, a client connection, and the node processes
 * the test starts (killed afterwards whatever happened).
 */
export function singleServerWorld(): { readonly server: NatsServerHandle; readonly nc: NatsConnection; readonly children: ChildHandle[] } {
  const world = { server: undefined as unknown as NatsServerHandle, nc: undefined as unknown as NatsConnection, children: [] as ChildHandle[] };
  beforeAll(async () => {
    world.server = await startServer();
    world.nc = await connect(world.server.connectOptions());
  });
  afterAll(async () => {
    for (const c of world.children) await c.kill().catch(() => undefined);
    await world.nc?.close();
    await world.server?.dispose();
  });
  return world;
}

/** How `spawnWorkflowNode` starts a node, beyond its name. */
export interface WorkflowNodeOptions {
  /** Shortens its partition leases so another node takes over soon after a SIGKILL. */
  leaseTtlMs?: number;
  /** Flags after the others (`--http-port 0`, …). */
  extra?: readonly string[];
  /** Added to its environment (RUNWAY_LOG is `warn` unless set here). */
  env?: Record<string, string>;
  /** Another checkout (an older version): its cli and fixture handlers, run with it as the working directory. */
  tree?: string;
}

/**
 * `runway node` with the fixture handlers in its own process on the server at `serverUrl`, pushed
 * onto `children` (killed at the end of the file). Not waited for.
 */
export function spawnWorkflowNode(serverUrl: string, children: ChildHandle[], name: string, options: WorkflowNodeOptions = {}): ChildHandle {
  const tree = options.tree ?? repoRoot;
  const lease = options.leaseTtlMs === undefined ? [] : ["--lease-ttl-ms", String(options.leaseTtlMs)];
  const child = spawnTsx(
    join(tree, "cluster/cli.ts"),
    [
      "node",
      "--servers",
      serverUrl,
      "--user",
      RUNWAY_USER.user,
      "--pass",
      RUNWAY_USER.pass,
      "--name",
      name,
      "--handlers",
      join(tree, "test/fixtures/handlers.ts"),
      ...lease,
      ...(options.extra ?? []),
    ],
    { name, env: { RUNWAY_LOG: "warn", ...options.env }, ...(options.tree !== undefined ? { cwd: options.tree } : {}) },
  );
  children.push(child);
  return child;
}

/** A workflow node (`spawnWorkflowNode`) on `world`'s server, once it is serving; killed with the world. */
export async function startWorkflowNode(
  world: { readonly server: NatsServerHandle; readonly children: ChildHandle[] },
  name: string,
  options: { leaseTtlMs?: number } = {},
): Promise<ChildHandle> {
  const child = spawnWorkflowNode(world.server.url, world.children, name, options);
  await child.waitForLine(/^READY /, { timeoutMs: 30_000 });
  return child;
}

/** Waits until the run ended (succeeded or failed). */
export function finished(client: RunwayClient, run: string): Promise<RunAnswer> {
  return waitFor(
    async () => {
      const r = (await client.getRun(run)).run as RunAnswer;
      return r.status === "succeeded" || r.status === "failed" ? r : undefined;
    },
    { timeoutMs: 60_000, describe: `run ${run} to finish` },
  );
}
