import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";
import { RunwayClient } from "../../cluster/client.js";
import { childStartKey, runIdFor } from "../../actors/index.js";
import { RUN_RECORD } from "../../actors/run/actor.js";
import { readActor } from "../../runtime/index.js";
import { RUNWAY_USER, spawnTsx, waitFor } from "../harness/index.js";
import { singleServerWorld, startWorkflowNode } from "./node-process.js";
import type { RunAnswer } from "../integration/workflow-support.js";

const world = singleServerWorld();

async function storedStatus(run: string): Promise<string | undefined> {
  const read = await readActor({ nc: world.nc, partitions: 32 }, RUN_RECORD, run);
  return read.outcome === "found" ? read.snapshot.context?.run?.lifecycle.status : undefined;
}
const fixture = fileURLToPath(new URL("../fixtures/workflow-node-process.ts", import.meta.url));

it("C099 a crash between the cancel's write and what it sends leaves the run cancelled, never running; whoever loads it next sends the rest (its child is cancelled); a second cancel changes nothing", async () => {
  const client = new RunwayClient(world.nc, "x1");
  const armed = join(mkdtempSync(join(tmpdir(), "runway-cancel-crash-")), "armed");
  const crashing = spawnTsx(fixture, [], {
    name: "cancel-node",
    env: { RW_CRASH: JSON.stringify({ servers: [world.server.url], ...RUNWAY_USER, name: "cancel-node", armed }) },
  });
  world.children.push(crashing);
  await crashing.waitForLine(/^READY /, { timeoutMs: 30_000 });
  await client.createTenant("x1");
  expect((await client.putDefinition({ name: "leaf", nodes: [{ id: "work", kind: "code", handler: "slow", input: { ms: 60_000 } }] })).outcome).toBe(
    "published",
  );
  expect((await client.putDefinition({ name: "parent", nodes: [{ id: "down", kind: "subworkflow", workflow: "leaf" }] })).outcome).toBe("published");
  const root = ((await client.startRun({ definition: "parent" })).run as RunAnswer).id;
  const child = runIdFor("x1", childStartKey(root, "down"));
  await waitFor(async () => ((await client.getRun(child)).run as RunAnswer | undefined)?.status === "running" || undefined, {
    timeoutMs: 30_000,
    describe: "the child to run",
  });
  writeFileSync(armed, `run.${root}`);
  // The node dies right after storing the cancel, before telling the child: no answer comes back.
  const cancelling = client.cancelRun(root).catch(() => undefined);
  await crashing.exited;
  // No node is up: what the store holds is the parent cancelled and the child not told.
  expect(await storedStatus(root)).toBe("cancelled");
  expect(await storedStatus(child)).toBe("running");
  const node = await startWorkflowNode(world, "cancel-node");
  await waitFor(async () => ((await client.getRun(child)).run as RunAnswer).status === "cancelled" || undefined, {
    timeoutMs: 30_000,
    describe: "the child to be cancelled from the parent's outbox",
  });
  expect(((await client.getRun(root)).run as RunAnswer).status).toBe("cancelled");
  await cancelling;
  expect((await client.cancelRun(root)).outcome).toBe("not_cancellable");
  await node.kill("SIGTERM");
});
