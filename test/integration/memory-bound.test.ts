import { expect, it } from "vitest";
import type { ApiAnswer } from "../../cluster/client.js";
import { waitFor } from "../harness/index.js";
import { workflowWorld, type RunAnswer } from "./workflow-support.js";

const world = workflowWorld({ name: "memory-node" });

async function gauge(name: "actors_in_memory" | "run_memories_held"): Promise<number> {
  const reply = await world.nc.request("runway.v1.ops.metrics", "", { timeout: 5_000 });
  return (JSON.parse(reply.string()) as ApiAnswer & { metrics: Record<string, number> }).metrics[name]!;
}

it("a node holds its live runs in memory, not every run it has served: 40 runs end and leave it with their outputs; one started again with its key is answered from the store", async () => {
  const client = world.client;
  // Each step reads the one before it, so every run's decisions need its outputs in memory.
  const chain = {
    name: "chain",
    nodes: [
      { id: "a", kind: "code", handler: "echo", input: { v: "${input.v}" } },
      { id: "b", kind: "code", handler: "echo", needs: ["a"], input: { from: "${steps.a.output}" } },
      { id: "c", kind: "code", handler: "echo", needs: ["b"], input: { from: "${steps.b.output}" } },
    ],
  };
  expect((await client.putDefinition(chain)).outcome).toBe("published");
  expect((await client.putDefinition({ name: "park", nodes: [{ id: "s", kind: "sleep", duration_ms: 3_600_000 }] })).outcome).toBe("published");
  const parked = (await client.startRun({ definition: "park" })).run as RunAnswer;
  await waitFor(async () => ((await client.getRun(parked.id)).run as RunAnswer | undefined)?.status === "waiting" || undefined, {
    timeoutMs: 10_000,
    describe: "the parked run to wait",
  });
  const actorsBefore = await gauge("actors_in_memory");
  const memoriesBefore = await gauge("run_memories_held");
  expect(memoriesBefore).toBeGreaterThanOrEqual(1);

  const keys = Array.from({ length: 40 }, (_, i) => ({ source: "memory-test", delivery_id: `r${i}` }));
  const ids = await Promise.all(
    keys.map(async (key, i) => ((await client.startRun({ definition: "chain", input: { v: i }, start_key: key })).run as RunAnswer).id),
  );
  for (const id of ids) expect((await world.settled(id)).status).toBe("succeeded");
  // Each leaves once its last write is out: the parked run and the tenants stay, the 40 are gone.
  await waitFor(async () => ((await gauge("actors_in_memory")) === actorsBefore && (await gauge("run_memories_held")) === memoriesBefore) || undefined, {
    timeoutMs: 10_000,
    describe: "the ended runs to leave the node's memory",
  });

  // Addressed again, an ended run is loaded from the store (its head: an ended run needs no outputs to answer).
  const again = await client.startRun({ definition: "chain", input: { v: 999 }, start_key: keys[7]! });
  expect(again.outcome).toBe("duplicate");
  expect((again.run as RunAnswer).id).toBe(ids[7]);
  expect((again.run as RunAnswer).status).toBe("succeeded");
  expect((again.run as RunAnswer).result).toEqual({ a: { v: 7 }, b: { from: { v: 7 } }, c: { from: { from: { v: 7 } } } });
  await waitFor(async () => (await gauge("actors_in_memory")) === actorsBefore || undefined, { timeoutMs: 10_000, describe: "it to leave again" });
  expect((await client.cancelRun(parked.id)).outcome).toBe("cancelled");
});
