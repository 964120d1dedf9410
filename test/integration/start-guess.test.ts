/**
 * A start without a start key is admitted on the definition version its node last resolved for
 * the name, while the latest version is read (RunService.admitEarly): one round trip less
 * before its answer. What these tests pin down is the guess being wrong: the latest version
 * admits on other terms (its cost ceiling, a person admitting runs first) or the start is
 * refused, and the early slot must go back, so the tenant only ever counts runs that exist.
 */
import { expect, it } from "vitest";
import { listMembers } from "../../actors/index.js";
import type { RunwayClient } from "../../cluster/client.js";
import { waitFor } from "../harness/index.js";
import { workflowWorld } from "./workflow-support.js";

const world = workflowWorld({ name: "guess-node", sweepIntervalMs: false });

type TenantView = { active_runs: number; queued_runs: number; reserved_cents?: number; starts_today: number };

async function tenant(id: string, settings: Record<string, unknown>): Promise<RunwayClient> {
  const client = world.clientFor(id);
  expect((await client.createTenant(id, settings)).outcome).toBe("created");
  return client;
}

async function publish(client: RunwayClient, definition: Record<string, unknown>): Promise<void> {
  const put = await client.putDefinition(definition);
  expect(put.outcome, JSON.stringify(put)).toBe("published");
}

const stats = () => ({ ...world.node.runs.early.stats });
const view = async (client: RunwayClient) => (await client.getTenant()).tenant as TenantView;
const members = async (tenantId: string) => (await listMembers(world.nc, 32, tenantId)).map((m) => m.run).sort();

async function startAndSettle(client: RunwayClient, definition: string): Promise<string> {
  const started = await client.startRun({ definition });
  expect(started.outcome, JSON.stringify(started)).toBe("started");
  const id = (started.run as { id: string }).id;
  expect((await world.settled(id, client)).status).toBe("succeeded");
  return id;
}

const NOOP = [{ id: "a", kind: "code", handler: "noop" }];

/** This node resolves `name`'s first version (a plain one-step run), then `latest` is published: what a start guesses is now out of date. */
async function guessOutdated(client: RunwayClient, name: string, latest: Record<string, unknown>): Promise<void> {
  await publish(client, { name, nodes: NOOP });
  await startAndSettle(client, name);
  await publish(client, { name, nodes: NOOP, ...latest });
}

it("a start on the version its node last resolved is admitted early and counted once", async () => {
  const client = await tenant("g-hit", { max_concurrency: 10 });
  await publish(client, { name: "same", nodes: NOOP });
  await startAndSettle(client, "same");
  const before = stats();
  const id = await startAndSettle(client, "same");
  expect(stats()).toEqual({ admittedEarly: before.admittedEarly + 1, givenBack: before.givenBack });
  await waitFor(async () => ((await view(client)).active_runs === 0 ? true : undefined), { timeoutMs: 10_000, describe: "the run's slot to be released" });
  expect(await members("g-hit")).toEqual([]);
  expect((await client.getRun(id)).outcome).toBe("found");
});

it("a latest version with another cost ceiling: the early slot goes back, the run is admitted again under its own id and reserves the new ceiling", async () => {
  const client = await tenant("g-ceiling", { max_concurrency: 10, day_budget_cents: 1_000, run_reservation_cents: 10 });
  await guessOutdated(client, "priced", { limits: { max_cost_cents: 50 } });
  const before = stats();
  const starts = (await view(client)).starts_today;
  const id = await startAndSettle(client, "priced");
  expect(stats()).toEqual({ admittedEarly: before.admittedEarly, givenBack: before.givenBack + 1 });
  // One start, though it was admitted twice.
  await waitFor(async () => ((await view(client)).starts_today === starts + 1 ? true : undefined), {
    timeoutMs: 10_000,
    describe: "the early start to be taken back",
  });
  expect(((await client.getRun(id)).run as { definition: { version: number } }).definition.version).toBe(2);
  // Both slots are back: the given-back one and the finished run's; nothing reserved, no member left.
  await waitFor(async () => ((await view(client)).active_runs === 0 ? true : undefined), { timeoutMs: 10_000, describe: "every slot to come back" });
  expect((await view(client)).reserved_cents ?? 0).toBe(0);
  expect(await members("g-ceiling")).toEqual([]);
});

it("a latest version that a person admits first: the early slot goes back and the run waits for its approval holding none", async () => {
  const client = await tenant("g-held", { max_concurrency: 10 });
  await guessOutdated(client, "gate", { admission: { approval: { prompt: "Start?", group: "ops", timeout_ms: 3_600_000 } } });
  const before = stats();
  const started = await client.startRun({ definition: "gate" });
  expect(started.outcome).toBe("started");
  expect(stats()).toEqual({ admittedEarly: before.admittedEarly, givenBack: before.givenBack + 1 });
  await waitFor(async () => ((await view(client)).active_runs === 0 ? true : undefined), { timeoutMs: 10_000, describe: "the early slot to come back" });
  expect(await members("g-held")).toEqual([]);
  expect(((await client.getRun((started.run as { id: string }).id)).run as { status: string }).status).toBe("waiting");
});

it("a start refused on the latest version (its input no longer valid) gives the early slot back", async () => {
  const client = await tenant("g-refused", { max_concurrency: 10 });
  await guessOutdated(client, "shape", { input_schema: { type: "object", required: ["n"], properties: { n: { type: "number" } } } });
  const before = stats();
  const starts = (await view(client)).starts_today;
  expect(await client.startRun({ definition: "shape", input: {} })).toMatchObject({ outcome: "invalid_input" });
  expect(stats()).toEqual({ admittedEarly: before.admittedEarly, givenBack: before.givenBack + 1 });
  // Not one of today's starts: no run was made.
  expect(await view(client)).toMatchObject({ active_runs: 0, starts_today: starts });
  expect(await members("g-refused")).toEqual([]);
});
