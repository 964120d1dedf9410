import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { Kvm } from "@nats-io/kv";
import { RunwayClient } from "../../cluster/client.js";
import { startRunwayNode, type RunwayWorkflowNode } from "../../cluster/runway-node.js";
import { childStartKey, DEFINITIONS_BUCKET, runIdFor, TENANT_KIND } from "../../actors/index.js";
import { createLogger, partitionBucket, partitionOf } from "../../runtime/index.js";
import { startServer, waitFor, type NatsServerHandle } from "../harness/index.js";
import { HANDLERS, settled, type RunAnswer } from "./workflow-support.js";

/**
 * A child's start gate on a real node (issue 41 §3, C047 C048): a child whose pinned plan this
 * deployment cannot read, or whose tenant's record does not decode, ends `failed` at its create
 * and stops its parent's node whatever `continue_on_error` says; a killed tenant's child is a
 * refused start the parent tolerates. Before the gate, the first threw in the run actor's
 * prepare and the parent's node waited on a child that never existed.
 */
let server: NatsServerHandle;
let node: RunwayWorkflowNode | undefined;
let nc: NatsConnection;
const PARTITIONS = 32;

async function startNode(name: string): Promise<RunwayWorkflowNode> {
  const started = await startRunwayNode({ connection: server.connectOptions(), name, handlers: [HANDLERS], logger: createLogger(name, "error") });
  await waitFor(() => started.node.host.ownedPartitions().length === PARTITIONS, { timeoutMs: 20_000, describe: `${name} to own all partitions` });
  return started;
}

async function tenant(id: string) {
  const client = new RunwayClient(nc, id);
  expect((await client.createTenant(id)).outcome).toMatch(/created|exists/);
  return client;
}

async function publish(client: RunwayClient, definition: object) {
  const put = await client.putDefinition(definition);
  expect(["published", "unchanged"], JSON.stringify(put)).toContain(put.outcome);
}

type View = RunAnswer & { error: (RunAnswer["error"] & { error_code?: string; nodes?: string[] }) | null };
const view = async (client: RunwayClient, id: string) => (await client.getRun(id)).run as View | undefined;

/** A parent that waits for signal `go`, then starts its child, tolerating its failure, then runs `after`. */
const gated = {
  name: "gated",
  nodes: [
    { id: "hold", kind: "wait", signal: "go" },
    { id: "sub", kind: "subworkflow", workflow: "leaf", needs: ["hold"], continue_on_error: true },
    { id: "after", kind: "code", handler: "noop", needs: [{ node: "sub", when: "always" }] },
  ],
};
const leaf = { name: "leaf", nodes: [{ id: "work", kind: "code", handler: "noop" }] };

beforeAll(async () => {
  server = await startServer();
  nc = await connect(server.connectOptions());
  // The first node publishes a leaf and its parent; the leaf's plan is then lost from the store,
  // and a node that never read it serves the rest (a node caches every plan it read).
  const first = await startNode("gate-a");
  const client = await tenant("cg1");
  await publish(client, leaf);
  await publish(client, {
    name: "top",
    nodes: [
      { id: "sub", kind: "subworkflow", workflow: "leaf", continue_on_error: true },
      { id: "after", kind: "code", handler: "noop", needs: [{ node: "sub", when: "always" }] },
    ],
  });
  const pinned = (await client.getDefinition("leaf")) as { ref?: { digest: string } };
  expect(pinned.ref?.digest, JSON.stringify(pinned)).toBeTruthy();
  await first.stop();
  const kv = await new Kvm(nc).open(DEFINITIONS_BUCKET);
  await kv.delete(`plan.${pinned.ref!.digest}`);
  node = await startNode("gate-b");
}, 60_000);

afterAll(async () => {
  await nc?.close();
  await node?.stop();
  await server?.dispose();
});

describe("a child's start gate", () => {
  it("C047 a child whose pinned plan cannot be read ends failed snapshot_unbuildable at its create, and its parent fails invalid_snapshot despite continue_on_error (its node does not wait forever)", async () => {
    const client = new RunwayClient(nc, "cg1");
    const top = ((await client.startRun({ definition: "top" })).run as View).id;
    const done = (await settled(client, top)) as View;
    expect(done.status).toBe("failed");
    expect(done.error).toMatchObject({ code: "invalid_snapshot", error_code: "snapshot_unbuildable", nodes: ["sub"] });
    expect(done.nodes.sub!.error).toMatchObject({ code: "invalid_snapshot", error_code: "snapshot_unbuildable" });
    expect(done.nodes.after!.status).toBe("cancelled");
    const child = await view(client, runIdFor("cg1", childStartKey(top, "sub")));
    expect(child).toMatchObject({ status: "failed", parent_run_id: top, started_at: null, error: { code: "snapshot_unbuildable" } });
  });

  it("C047 C048 a child whose tenant's record does not decode ends failed policy_unavailable at its create; its parent's node carries that code as error_code and stops the parent despite continue_on_error", async () => {
    const client = await tenant("cg2");
    await publish(client, leaf);
    await publish(client, gated);
    const run = ((await client.startRun({ definition: "gated" })).run as View).id;
    await waitFor(async () => (await view(client, run))?.status === "waiting" || undefined, {
      timeoutMs: 20_000,
      describe: `run ${run} to wait for its signal`,
    });
    // The tenant's record no longer decodes: the child's gate cannot decide.
    const kv = await new Kvm(nc).open(partitionBucket(partitionOf("cg2", PARTITIONS)));
    await kv.put(`${TENANT_KIND}.cg2`, new Uint8Array([0xc1, 0xc1, 0xc1]));
    expect((await client.signal(run, "go")).outcome).toBe("delivered");
    const done = (await settled(client, run)) as View;
    expect(done.status).toBe("failed");
    expect(done.error).toMatchObject({ code: "policy_unavailable", error_code: "policy_unavailable", nodes: ["sub"] });
    expect(done.nodes.after!.status).toBe("cancelled");
    const child = await view(client, runIdFor("cg2", childStartKey(run, "sub")));
    expect(child).toMatchObject({ status: "failed", started_at: null, error: { code: "policy_unavailable" } });
    expect(child!.nodes.work!.status).toBe("pending");
  });

  it("C047 C048 a killed tenant's child ends failed tenant_killed at its create; its parent's node reads start_refused (error_code tenant_killed), which continue_on_error tolerates", async () => {
    const client = await tenant("cg3");
    await publish(client, leaf);
    await publish(client, gated);
    const run = ((await client.startRun({ definition: "gated" })).run as View).id;
    await waitFor(async () => (await view(client, run))?.status === "waiting" || undefined, {
      timeoutMs: 20_000,
      describe: `run ${run} to wait for its signal`,
    });
    expect((await client.setTenantState("cg3", "kill")).outcome).toBe("killed");
    expect((await client.signal(run, "go")).outcome).toBe("delivered");
    const refused = await waitFor(
      async () => {
        const v = await view(client, run);
        return v?.nodes.sub?.status === "failed" ? v : undefined;
      },
      { timeoutMs: 20_000, describe: `run ${run}'s child node to settle` },
    );
    expect(refused.nodes.sub!.error).toMatchObject({ code: "start_refused", error_code: "tenant_killed" });
    expect(refused.status).not.toBe("failed");
    const child = await view(client, runIdFor("cg3", childStartKey(run, "sub")));
    expect(child).toMatchObject({ status: "failed", error: { code: "tenant_killed" } });
    // Tolerated: once the tenant is resumed, the walk goes on and the run succeeds.
    expect((await client.setTenantState("cg3", "resume")).outcome).toBe("active");
    const done = await settled(client, run);
    expect(done.status).toBe("succeeded");
    expect(done.nodes.after!.status).toBe("succeeded");
  });
});
