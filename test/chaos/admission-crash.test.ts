import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";
import { RunwayClient } from "../../cluster/client.js";
import { listInbox, RUN_KIND, runIdFor, startKey } from "../../actors/index.js";
import { RUN_RECORD } from "../../actors/run/actor.js";
import { readActor } from "../../runtime/index.js";
import { RUNWAY_USER, spawnTsx, waitFor } from "../harness/index.js";
import { finished, singleServerWorld, startWorkflowNode } from "./node-process.js";
import type { RunAnswer } from "../integration/workflow-support.js";

const world = singleServerWorld();
const fixture = fileURLToPath(new URL("../fixtures/workflow-node-process.ts", import.meta.url));

it("a crash right after a held start's create write never runs it unapproved: the stored run waits on its admission approval, whoever loads it next lists it, a second SIGKILL while pending changes nothing, and approved it runs once", async () => {
  const dir = mkdtempSync(join(tmpdir(), "runway-admission-crash-"));
  const armed = join(dir, "armed");
  const file = join(dir, "ran");
  const client = new RunwayClient(world.nc, "k1");
  const crashing = spawnTsx(fixture, [], {
    name: "admission-node",
    env: { RW_CRASH: JSON.stringify({ servers: [world.server.url], ...RUNWAY_USER, name: "admission-node", armed }) },
  });
  world.children.push(crashing);
  await crashing.waitForLine(/^READY /, { timeoutMs: 30_000 });
  await client.createTenant("k1");
  const def = {
    name: "gated",
    admission: { approval: { prompt: "Start it?", group: "ops" } },
    nodes: [{ id: "work", kind: "code", handler: "count_invocations", input: { file, value: "ran" } }],
  };
  expect((await client.putDefinition(def)).outcome).toBe("published");
  const key = { source: "webhook", delivery_id: "crash-1" };
  const id = runIdFor("k1", startKey(key.source, key.delivery_id));
  writeFileSync(armed, `${RUN_KIND}.${id}`);
  // The node dies right after storing the create, before anything it sends: the start gets no answer.
  const starting = client.startRun({ definition: "gated", start_key: key }).catch(() => undefined);
  await crashing.exited;

  // No node is up: the one write holds the run, its request and its clock; the inbox entry is still in its outbox.
  const stored = await readActor({ nc: world.nc, partitions: 32 }, RUN_RECORD, id);
  const run = stored.outcome === "found" ? stored.snapshot.context?.run : undefined;
  expect(run?.lifecycle).toMatchObject({ status: "waiting", waiting_on: "approval", waiting_ref: `${id}:(admission)`, started_at: null });
  expect(run?.admission_approval).toMatchObject({ state: "pending", prompt: "Start it?" });
  expect((await listInbox(world.nc, "k1")).approvals).toEqual([]);
  expect(existsSync(file)).toBe(false);

  let node = await startWorkflowNode(world, "admission-node");
  await starting;
  const listed = await waitFor(async () => (await listInbox(world.nc, "k1")).approvals.find((a) => a.run === id), {
    timeoutMs: 30_000,
    describe: "the node that loads the run to list its admission approval",
  });
  expect(listed).toMatchObject({ id: `${id}:(admission)`, kind: "admission", group: "ops" });
  expect(((await client.getRun(id)).run as RunAnswer).status).toBe("waiting");

  await node.kill("SIGKILL");
  node = await startWorkflowNode(world, "admission-node");
  const waiting = await waitFor(async () => ((await client.getRun(id).catch(() => undefined))?.run as RunAnswer | undefined) ?? undefined, {
    timeoutMs: 30_000,
    describe: "the run to be readable again",
  });
  expect(waiting.status).toBe("waiting");
  expect((await client.approvals()).approvals).toHaveLength(1);
  expect(existsSync(file)).toBe(false);

  const decided = await waitFor(
    async () => {
      const a = await client.decide(`${id}:(admission)`, "approve", { by: "alice" }).catch(() => undefined);
      return a?.outcome === "decided" ? a : undefined;
    },
    { timeoutMs: 30_000, describe: "the approval to be decided" },
  );
  expect(decided).toMatchObject({ decision: "approved" });
  const done = await finished(client, id);
  expect(done.status).toBe("succeeded");
  expect(readFileSync(file, "utf8").trim().split("\n")).toHaveLength(1);
  await node.kill("SIGTERM");
});
