import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";
import { RunwayClient } from "../../cluster/client.js";
import { RUN_KIND, runIdFor, startKey } from "../../actors/index.js";
import { RUN_RECORD } from "../../actors/run/actor.js";
import { readActor } from "../../runtime/index.js";
import { RUNWAY_USER, spawnTsx, waitFor } from "../harness/index.js";
import { finished, singleServerWorld, startWorkflowNode } from "./node-process.js";
import type { RunAnswer } from "../integration/workflow-support.js";

const world = singleServerWorld();
const fixture = fileURLToPath(new URL("../fixtures/workflow-node-process.ts", import.meta.url));

it("C010 a crash (SIGKILL) before the start stores its run leaves no run; the retry with the same start key answers started, once, and the run executes once", async () => {
  const dir = mkdtempSync(join(tmpdir(), "runway-start-crash-"));
  const armed = join(dir, "armed");
  const file = join(dir, "ran");
  const client = new RunwayClient(world.nc, "k1");
  const crashing = spawnTsx(fixture, [], {
    name: "start-node",
    env: { RW_CRASH: JSON.stringify({ servers: [world.server.url], ...RUNWAY_USER, name: "start-node", armed, before: true }) },
  });
  world.children.push(crashing);
  await crashing.waitForLine(/^READY /, { timeoutMs: 30_000 });
  await client.createTenant("k1");
  expect(
    (await client.putDefinition({ name: "once", nodes: [{ id: "work", kind: "code", handler: "count_invocations", input: { file, value: "ran" } }] })).outcome,
  ).toBe("published");
  const key = { source: "cron", delivery_id: "tick-1" };
  const id = runIdFor("k1", startKey(key.source, key.delivery_id));
  writeFileSync(armed, `${RUN_KIND}.${id}`);
  // The node dies as it is about to store the run's record: the start gets no answer.
  const first = await client.startRun({ definition: "once", start_key: key }).catch(() => undefined);
  await crashing.exited;
  expect(crashing.lines).toContain(`CRASHING before the write of ${RUN_KIND}.${id}`);
  expect(first?.outcome).not.toBe("started");
  expect((await readActor({ nc: world.nc, partitions: 32 }, RUN_RECORD, id)).outcome).not.toBe("found");

  await startWorkflowNode(world, "start-node");
  const retry = await waitFor(async () => (await client.startRun({ definition: "once", start_key: key }).catch(() => undefined)) ?? undefined, {
    timeoutMs: 30_000,
    describe: "the retried start to be answered",
  });
  expect(retry.outcome).toBe("started");
  expect((retry.run as RunAnswer).id).toBe(id);
  expect((await finished(client, id)).status).toBe("succeeded");
  const again = await client.startRun({ definition: "once", start_key: key });
  expect(again.outcome).toBe("duplicate");
  expect((again.run as RunAnswer).id).toBe(id);
  expect(readFileSync(file, "utf8").trim().split("\n")).toHaveLength(1);
  // The tenant counted one run, whose slot the crashed start took and the retry used: it is given back once.
  const tenant = await waitFor(
    async () => {
      const t = (await client.getTenant()).tenant as { active_runs: number };
      return t.active_runs === 0 ? t : undefined;
    },
    { timeoutMs: 15_000, describe: "the run's tenant slot to be given back" },
  );
  expect(tenant).toMatchObject({ active_runs: 0, queued_runs: 0, starts_today: 1 });
  rmSync(dir, { recursive: true, force: true });
});
