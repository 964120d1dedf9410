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

/** Gated tools under SIGKILL: the approval record a gated call waits on is durable, filed once, and the approved call is made once. */

const world = singleServerWorld();
const crashFixture = fileURLToPath(new URL("../fixtures/workflow-node-process.ts", import.meta.url));
const DAY = 24 * 3_600_000;

/** A charge that asks finance first (its class is non-idempotent), after a step that runs at once. */
const definition = {
  name: "gated-charge",
  approvals: { classes: ["non_idempotent"], group: "finance", timeout_ms: 7 * DAY },
  nodes: [
    { id: "prep", kind: "code", handler: "echo", input: { account: "k", amount: 5 } },
    { id: "pay", kind: "tool", needs: ["prep"], server: "pay", tool: "charge", arguments: "${steps.prep.output}" },
  ],
};

async function decideWhenServed(client: RunwayClient, approval: string, decision: "approve" | "edit", payload?: unknown) {
  return waitFor(
    async () => {
      const a = await client.decide(approval, decision, { by: "alice", ...(payload !== undefined ? { payload } : {}) }).catch(() => undefined);
      return a?.outcome === "decided" ? a : undefined;
    },
    { timeoutMs: 30_000, describe: "the decision to be taken" },
  );
}

it("C039 a gated tool's call parked on its approval survives a SIGKILL of its node: after the restart it still waits, listed once; approved, the tool executes exactly once", async () => {
  const fx = await startEffectsServer({ http: true });
  try {
    let node = await startWorkflowNode(world, "gated-node");
    const client = new RunwayClient(world.nc, "g1");
    await client.createTenant("g1");
    expect((await client.putToolServer({ name: "pay", transport: { type: "http", url: fx.url } })).outcome).toBe("saved");
    expect((await client.putDefinition(definition)).outcome).toBe("published");
    const id = ((await client.startRun({ definition: "gated-charge" })).run as RunAnswer).id;
    const approval = `${id}:pay:approval.pay/charge`;
    await waitFor(async () => ((await client.approvals()).approvals as unknown[]).length > 0 || undefined, {
      timeoutMs: 30_000,
      describe: "the gated call's approval to be listed",
    });
    await node.kill("SIGKILL");
    node = await startWorkflowNode(world, "gated-node");
    const waiting = await waitFor(async () => ((await client.getRun(id).catch(() => undefined))?.run as RunAnswer | undefined) ?? undefined, {
      timeoutMs: 30_000,
      describe: "the run to be readable again",
    });
    expect(waiting.status).toBe("waiting");
    expect(((await client.approvals()).approvals as { id: string; kind: string }[]).map((a) => [a.id, a.kind])).toEqual([[approval, "tool"]]);
    expect(fx.counts().calls.charge ?? 0).toBe(0);
    expect(await decideWhenServed(client, approval, "approve")).toMatchObject({ decision: "approved" });
    const done = await finished(client, id);
    expect(done.status).toBe("succeeded");
    expect(fx.counts().calls.charge).toBe(1);
    expect(fx.counts().effects.charge).toBe(1);
    await node.kill("SIGTERM");
  } finally {
    await fx.stop();
  }
});

it("C080 C039 a node killed right after the write that files a gated call's approval (before its inbox entry is out): the restarted node lists it once, three days later an edit is made, and the tool executes exactly once with the edited arguments", async () => {
  const fx = await startEffectsServer({ http: true });
  try {
    const dir = mkdtempSync(join(tmpdir(), "runway-gated-crash-"));
    const armed = join(dir, "armed");
    const crashing = spawnTsx(crashFixture, [], {
      name: "gated-crash-node",
      env: { RW_CRASH: JSON.stringify({ servers: [world.server.url], ...RUNWAY_USER, name: "gated-crash-node", armed, contains: "approval.pay/charge" }) },
    });
    world.children.push(crashing);
    await crashing.waitForLine(/^READY /, { timeoutMs: 30_000 });
    const client = new RunwayClient(world.nc, "g2");
    await client.createTenant("g2");
    expect((await client.putToolServer({ name: "pay", transport: { type: "http", url: fx.url } })).outcome).toBe("saved");
    expect((await client.putDefinition(definition)).outcome).toBe("published");
    const start = { definition: "gated-charge", start_key: { source: "test", delivery_id: "gated-c080" } };
    const id = runIdFor("g2", startKey("test", "gated-c080"));
    const approval = `${id}:pay:approval.pay/charge`;
    writeFileSync(armed, `${RUN_KIND}.${id}`);
    expect((await client.startRun(start)).outcome).toBe("started");
    await crashing.exited;

    // No node is up: the one write filed the request, parked the step and set the clock; the inbox entry is still in its outbox.
    const stored = await readActor({ nc: world.nc, partitions: 32 }, RUN_RECORD, id);
    const run = stored.outcome === "found" ? stored.snapshot.context?.run : undefined;
    expect(run?.lifecycle).toMatchObject({ status: "waiting", waiting_on: "approval", waiting_ref: approval });
    expect(run?.nodes.pay).toMatchObject({ s: "active", step: { status: "ready", attempt: 1 }, approval: { id: approval, state: "pending" } });
    expect((await listInbox(world.nc, "g2")).approvals).toEqual([]);
    expect(fx.counts().calls.charge ?? 0).toBe(0);

    // The restarted node runs three days ahead (an injected clock): well inside the approval's seven.
    const clock = join(dir, "clock");
    const restarted = spawnTsx(crashFixture, [], {
      name: "gated-node-later",
      env: { RW_CRASH: JSON.stringify({ servers: [world.server.url], ...RUNWAY_USER, name: "gated-node-later", armed: join(dir, "never"), clockFile: clock }) },
    });
    world.children.push(restarted);
    await restarted.waitForLine(/^READY /, { timeoutMs: 30_000 });
    // The node that loads the run publishes what its stored write had not: the one inbox entry.
    const listed = await waitFor(async () => ((await client.approvals()).approvals as { id: string }[]).map((a) => a.id).join() || undefined, {
      timeoutMs: 30_000,
      describe: "the approval to be listed",
    });
    expect(listed).toBe(approval);
    expect((await client.startRun(start)).outcome).toBe("duplicate");
    writeFileSync(clock, String(3 * DAY));
    await restarted.waitForLine(/^CLOCK /, { timeoutMs: 10_000 });
    expect(((await client.approvals()).approvals as { id: string }[]).map((a) => a.id)).toEqual([approval]);
    expect(((await client.getRun(id)).run as RunAnswer).status).toBe("waiting");

    expect(await decideWhenServed(client, approval, "edit", { account: "k", amount: 4 })).toMatchObject({ decision: "edited" });
    const done = await finished(client, id);
    expect(done.status).toBe("succeeded");
    expect(done.result).toMatchObject({ pay: { account: "k", amount: 4 } });
    expect(fx.counts().calls.charge).toBe(1);
    expect(fx.counts().effects.charge).toBe(1);
    expect((await listInbox(world.nc, "g2")).approvals).toEqual([]);
    await restarted.kill("SIGTERM");
  } finally {
    await fx.stop();
  }
});
