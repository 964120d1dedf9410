import { expect, it } from "vitest";
import { RunwayClient } from "../../cluster/client.js";
import { waitFor } from "../harness/index.js";
import { settled, workflowWorld, type RunAnswer } from "./workflow-support.js";

const world = workflowWorld({ name: "options-node" });

type Started = RunAnswer & { status: string };

it("a run counts under the project it was started with: over the project's cap it queues, another project's run starts; the queued one starts when the slot frees", async () => {
  const client = new RunwayClient(world.nc, "p1");
  expect((await client.createTenant("p1", { project_max_concurrency: { reports: 1 } })).outcome).toBe("created");
  // The holder parks until it is cancelled: nothing here depends on how long anything takes.
  expect((await client.putDefinition({ name: "hold", nodes: [{ id: "s", kind: "sleep", duration_ms: 3_600_000 }] })).outcome).toBe("published");
  expect((await client.putDefinition({ name: "quick", nodes: [{ id: "s", kind: "code", handler: "noop", cost: 2 }] })).outcome).toBe("published");
  const first = (await client.startRun({ definition: "hold", project: "reports" })).run as Started;
  expect(first.status).toBe("waiting");
  const second = (await client.startRun({ definition: "quick", project: "reports", priority: 9 })).run as Started;
  expect(second.status).toBe("queued");
  const other = (await client.startRun({ definition: "quick", project: "billing", priority: 0 })).run as Started;
  expect(other.status).toBe("running");
  expect((await settled(client, other.id)).status).toBe("succeeded");
  expect((await client.getTenant()).tenant).toMatchObject({ active_by_project: { reports: 1 }, queued_runs: 1 });
  expect((await client.cancelRun(first.id)).outcome).toBe("cancelled");
  expect((await settled(client, second.id)).status).toBe("succeeded");
  await waitFor(async () => ((await client.getTenant()).tenant as { active_runs: number }).active_runs === 0 || undefined, {
    timeoutMs: 10_000,
    describe: "every slot to be given back",
  });
});

it("start options are checked at the boundary: a priority outside 0–9, a malformed project or a negative deadline is invalid_input and starts nothing", async () => {
  const client = new RunwayClient(world.nc, "p2");
  await client.createTenant("p2");
  expect((await client.putDefinition({ name: "quick", nodes: [{ id: "s", kind: "code", handler: "noop" }] })).outcome).toBe("published");
  for (const bad of [{ priority: 10 }, { priority: 1.5 }, { project: "no spaces" }, { project: "__proto__" }, { deadline_ms: -1 }]) {
    const answer = await client.startRun({ definition: "quick", ...(bad as object) });
    expect(answer.outcome, JSON.stringify(bad)).toBe("invalid_input");
  }
  expect((await client.putDefinition({ name: "costly", nodes: [{ id: "s", kind: "code", handler: "noop", cost: -1 }] })).outcome).toBe("invalid_definition");
  expect(((await client.listRuns()).runs as unknown[]).length).toBe(0);
});

it("a tenant's class share caps how many of its attempts of that class run at once on a node", async () => {
  const client = new RunwayClient(world.nc, "p3");
  // 16 slots on this node: batch (automation) work of p3 may hold ceil(0.125 × 16) = 2 of them.
  expect((await client.createTenant("p3", { class_shares: { automation: 0.125 } })).outcome).toBe("created");
  expect((await client.putDefinition({ name: "work", nodes: [{ id: "s", kind: "code", handler: "slow", input: { ms: 150 } }] })).outcome).toBe("published");
  await world.node.tenants.get("p3");
  const runs: string[] = [];
  for (let i = 0; i < 8; i++) runs.push(((await client.startRun({ definition: "work", lane: "batch" })).run as RunAnswer).id);
  let most = 0;
  const sampler = setInterval(() => (most = Math.max(most, world.node.dispatcher!.metrics(Date.now()).running_by_tenant.p3 ?? 0)), 2);
  try {
    for (const id of runs) expect((await settled(client, id)).status).toBe("succeeded");
  } finally {
    clearInterval(sampler);
  }
  expect(most).toBeGreaterThanOrEqual(1);
  expect(most).toBeLessThanOrEqual(2);
});
