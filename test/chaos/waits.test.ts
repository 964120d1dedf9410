import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";
import { RunwayClient } from "../../cluster/client.js";
import { listInbox, RUN_KIND, runIdFor, startKey } from "../../actors/index.js";
import { RUN_RECORD } from "../../actors/run/actor.js";
import { readActor } from "../../runtime/index.js";
import { RUNWAY_USER, spawnTsx, waitFor } from "../harness/index.js";
import { startEffectsServer } from "../fixtures/mcp/start.js";
import { finished, singleServerWorld, startWorkflowNode } from "./node-process.js";
import type { RunAnswer } from "../integration/workflow-support.js";

const world = singleServerWorld();

it("a run waiting for a signal survives a SIGKILL of its node: after the restart it still waits, and the signal completes it", async () => {
  let node = await startWorkflowNode(world, "wait-node");
  const client = new RunwayClient(world.nc, "w1");
  await client.createTenant("w1");
  const def = {
    name: "held",
    nodes: [
      { id: "gate", kind: "wait", signal: "go", timeout_ms: 3 * 24 * 3_600_000 },
      { id: "after", kind: "code", needs: ["gate"], handler: "echo", input: "${steps.gate.output}" },
    ],
  };
  expect((await client.putDefinition(def)).outcome).toBe("published");
  const id = ((await client.startRun({ definition: "held" })).run as RunAnswer).id;
  const waiting = (run: string) =>
    waitFor(async () => ((await client.getRun(run)).run as RunAnswer).status === "waiting" || undefined, { timeoutMs: 30_000, describe: "the run to wait" });
  await waiting(id);
  await node.kill("SIGKILL");
  node = await startWorkflowNode(world, "wait-node");
  await waiting(id);
  // Delivered by the restarted node once it serves the run's partition again.
  const sent = await waitFor(
    async () => {
      const a = await client.signal(id, "go", { value: 42 }).catch(() => undefined);
      return a?.outcome === "delivered" ? a : undefined;
    },
    { timeoutMs: 30_000, describe: "the signal to be delivered" },
  );
  expect(sent).toEqual({ outcome: "delivered", nodes: ["gate"] });
  const done = await finished(client, id);
  expect(done.status).toBe("succeeded");
  expect(done.result).toMatchObject({ after: { value: 42 } });
  await node.kill("SIGTERM");
});

it("C039 C080 an approval survives a SIGKILL of its node: the inbox holds it once, and approved after the restart, the approved call executes exactly once", async () => {
  const fx = await startEffectsServer({ http: true });
  try {
    let node = await startWorkflowNode(world, "wait-node");
    const client = new RunwayClient(world.nc, "w2");
    await client.createTenant("w2");
    expect((await client.putToolServer({ name: "pay", transport: { type: "http", url: fx.url } })).outcome).toBe("saved");
    const def = {
      name: "gated-charge",
      nodes: [
        { id: "gate", kind: "approval", prompt: "Charge?", payload: { account: "k", amount: 5 }, group: "finance" },
        { id: "pay", kind: "tool", needs: ["gate"], server: "pay", tool: "charge", arguments: "${steps.gate.output.payload}" },
      ],
    };
    expect((await client.putDefinition(def)).outcome).toBe("published");
    const id = ((await client.startRun({ definition: "gated-charge" })).run as RunAnswer).id;
    await waitFor(async () => ((await client.approvals()).approvals as unknown[]).length > 0 || undefined, {
      timeoutMs: 30_000,
      describe: "the approval to be listed",
    });
    await node.kill("SIGKILL");
    node = await startWorkflowNode(world, "wait-node");
    expect(((await client.approvals()).approvals as { id: string }[]).map((a) => a.id)).toEqual([`${id}:gate`]);
    const decided = await waitFor(
      async () => {
        const a = await client.decide(`${id}:gate`, "approve", { by: "alice" }).catch(() => undefined);
        return a?.outcome === "decided" ? a : undefined;
      },
      { timeoutMs: 30_000, describe: "the decision to be taken" },
    );
    expect(decided).toMatchObject({ decision: "approved" });
    const done = await finished(client, id);
    expect(done.status).toBe("succeeded");
    expect(fx.counts().effects.charge).toBe(1);
    await node.kill("SIGTERM");
  } finally {
    await fx.stop();
  }
});

const crashFixture = fileURLToPath(new URL("../fixtures/workflow-node-process.ts", import.meta.url));

it("C080 a node killed right after the write that parks its run on an approval (before the inbox entry is out): the replay files it once, a retried start files none, and the approved call runs once", async () => {
  const fx = await startEffectsServer({ http: true });
  try {
    const armed = join(mkdtempSync(join(tmpdir(), "runway-approval-crash-")), "armed");
    const crashing = spawnTsx(crashFixture, [], {
      name: "approval-node",
      env: { RW_CRASH: JSON.stringify({ servers: [world.server.url], ...RUNWAY_USER, name: "approval-node", armed }) },
    });
    world.children.push(crashing);
    await crashing.waitForLine(/^READY /, { timeoutMs: 30_000 });
    const client = new RunwayClient(world.nc, "w3");
    await client.createTenant("w3");
    expect((await client.putToolServer({ name: "pay", transport: { type: "http", url: fx.url } })).outcome).toBe("saved");
    const def = {
      name: "gated-charge",
      nodes: [
        { id: "gate", kind: "approval", prompt: "Charge?", payload: { account: "k", amount: 5 }, group: "finance" },
        { id: "pay", kind: "tool", needs: ["gate"], server: "pay", tool: "charge", arguments: "${steps.gate.output.payload}" },
      ],
    };
    expect((await client.putDefinition(def)).outcome).toBe("published");
    const start = { definition: "gated-charge", start_key: { source: "test", delivery_id: "c080" } };
    const id = runIdFor("w3", startKey("test", "c080"));
    writeFileSync(armed, `${RUN_KIND}.${id}`);
    // The run's first write creates it parked on its approval; the node dies before its outbox (the inbox entry) is out.
    const starting = client.startRun(start).catch(() => undefined);
    await crashing.exited;
    const stored = await readActor({ nc: world.nc, partitions: 32 }, RUN_RECORD, id);
    expect(stored.outcome).toBe("found");
    const run = stored.outcome === "found" ? stored.snapshot.context?.run : undefined;
    expect(run?.lifecycle).toMatchObject({ status: "waiting", waiting_on: "approval", waiting_ref: `${id}:gate` });
    expect(run?.nodes.gate!.approval).toMatchObject({ id: `${id}:gate`, state: "pending" });
    expect((await listInbox(world.nc, "w3")).approvals).toEqual([]);
    await starting;

    const node = await startWorkflowNode(world, "approval-node");
    // The node that loads the run publishes what its stored write had not: the one inbox entry.
    const listed = await waitFor(async () => ((await client.approvals()).approvals as { id: string }[]).map((a) => a.id).join() || undefined, {
      timeoutMs: 30_000,
      describe: "the approval to be listed",
    });
    expect(listed).toBe(`${id}:gate`);
    expect((await client.startRun(start)).outcome).toBe("duplicate");
    expect(((await client.approvals()).approvals as { id: string }[]).map((a) => a.id)).toEqual([`${id}:gate`]);
    expect(await client.decide(`${id}:gate`, "approve", { by: "alice" })).toMatchObject({ outcome: "decided", decision: "approved" });
    expect((await finished(client, id)).status).toBe("succeeded");
    expect(fx.counts().effects.charge).toBe(1);
    expect((await listInbox(world.nc, "w3")).approvals).toEqual([]);
    await node.kill("SIGTERM");
  } finally {
    await fx.stop();
  }
});
