import { afterAll, beforeAll, expect, it } from "vitest";
import { jetstreamManager } from "@nats-io/jetstream";
import { UsageMeter } from "../../actors/index.js";
import { waitFor } from "../harness/index.js";
import { startEffectsServer, type EffectsServerHandle } from "../fixtures/mcp/start.js";
import { workflowWorld, type RunAnswer } from "./workflow-support.js";

/** Money: a tree's `max_cost_cents` (its root's), metered at priced tool calls, and a tenant's day budget checked at start. */
const world = workflowWorld({ name: "budgets-node" });
const PRICE = 30;
let fx: EffectsServerHandle;
beforeAll(async () => {
  fx = await startEffectsServer({ http: true });
  for (const tenant of ["t1", "tday", "tres"]) {
    if (tenant !== "t1") expect((await world.client.createTenant(tenant, settingsOf(tenant))).outcome).toBe("created");
    const put = await world.clientFor(tenant).putToolServer({ name: "fx", transport: { type: "http", url: fx.url }, prices: { charge: PRICE } });
    expect(put.outcome).toBe("saved");
  }
}, 30_000);
afterAll(async () => {
  await fx?.stop();
});

function settingsOf(tenant: string): Record<string, unknown> {
  return tenant === "tday" ? { day_budget_cents: 2 * PRICE } : { day_budget_cents: 100, run_reservation_cents: 10 };
}

type Ended = RunAnswer & { partial_reason?: string; usage?: { steps: number; tool_calls: number; cost_cents?: number } };

async function publish(def: object, tenant = "t1"): Promise<void> {
  expect((await world.clientFor(tenant).putDefinition(def)).outcome).toMatch(/published|unchanged/);
}

async function run(def: object, tenant = "t1"): Promise<Ended> {
  await publish(def, tenant);
  const started = await world.clientFor(tenant).startRun({ definition: (def as { name: string }).name });
  expect(started.outcome).toBe("started");
  return (await world.settled((started.run as RunAnswer).id, world.clientFor(tenant))) as Ended;
}

const charge = (id: string, needs: string[] = []) => ({ id, kind: "tool", server: "fx", tool: "charge", needs, arguments: { account: id, amount: 1 } });
const charges = () => fx.counts().calls.charge ?? 0;

it("C044 C113 a priced call refused on the tree's money ceiling is never made; after work the run succeeds with partial_reason budget_exhausted and keeps its output", async () => {
  const before = charges();
  const r = await run({
    name: "spend-twice",
    limits: { max_cost_cents: PRICE + PRICE / 2 },
    nodes: [{ id: "a", kind: "code", handler: "echo", input: "A" }, charge("first", ["a"]), charge("second", ["first"])],
  });
  expect(r.status).toBe("succeeded");
  expect(r.partial_reason).toBe("budget_exhausted");
  expect(r.result).toMatchObject({ a: "A", first: { amount: 1 } });
  expect(r.nodes.second!.status).toBe("cancelled");
  expect(charges()).toBe(before + 1);
  expect(r.usage?.cost_cents).toBe(PRICE);
  expect(await new UsageMeter(world.nc).spentByTree("t1", r.id)).toBe(PRICE);
});

it("C114 a money ceiling reached before any work is a failure carrying the code; nothing is called", async () => {
  const before = charges();
  const r = await run({ name: "too-poor", limits: { max_cost_cents: PRICE - 1 }, nodes: [charge("only")] });
  expect(r.status).toBe("failed");
  expect(r.error).toMatchObject({ code: "budget_exhausted" });
  expect(charges()).toBe(before);
});

it("C084 a workflow of ten children cannot spend ten currency budgets: every child spends its root's ceiling, not its own", async () => {
  // Each child's own definition allows ten calls; the root allows three, for the whole tree.
  await publish({ name: "child-spender", limits: { max_cost_cents: 10 * PRICE }, nodes: [charge("pay")] });
  const before = charges();
  const children = Array.from({ length: 10 }, (_, i) => ({ id: `c${i}`, kind: "subworkflow", workflow: "child-spender", continue_on_error: true }));
  const r = await run({ name: "ten-children", limits: { max_cost_cents: 3 * PRICE }, nodes: children });
  const spent = await new UsageMeter(world.nc).spentByTree("t1", r.id);
  expect(spent).toBeLessThanOrEqual(3 * PRICE);
  expect(charges() - before).toBe(spent / PRICE);
  expect(charges() - before).toBeGreaterThanOrEqual(1);
  // The children refused at their first (only) call ended failed with the ceiling's code.
  const refused = Object.values(r.nodes).filter((n) => n.status === "failed").length;
  expect(refused).toBe(10 - (charges() - before));
});

it("C032 C033 acceptance 8: 500 starts over the tenant's day budget are refused budget_exhausted before any run exists; each leaves one decision with no run id", async () => {
  const client = world.clientFor("tday");
  // Two priced calls spend the day's budget (60 cents).
  const spender = await run({ name: "spend-the-day", nodes: [charge("one"), charge("two", ["one"])] }, "tday");
  expect(spender.status).toBe("succeeded");
  expect(await new UsageMeter(world.nc).spentOn("tday", new Date().toISOString().slice(0, 10))).toBe(2 * PRICE);
  // tenant.get (the CLI's `tenant get`, the console's tenants page) carries the day's money: spent, reserved, the budget.
  expect((await client.getTenant()).tenant).toMatchObject({
    day: new Date().toISOString().slice(0, 10),
    spent_cents: 2 * PRICE,
    reserved_cents: 0,
    settings: { day_budget_cents: 2 * PRICE },
  });
  await publish({ name: "cheap", nodes: [{ id: "a", kind: "code", handler: "echo" }] }, "tday");
  const jsm = await jetstreamManager(world.nc);
  const decisions = async () =>
    (await jsm.streams.info("RUNWAY_AUDIT", { subjects_filter: "rw.audit.tday.admission" })).state.subjects?.["rw.audit.tday.admission"] ?? 0;
  const audited = await decisions();
  const outcomes = new Map<string, number>();
  for (let i = 0; i < 500; i++) {
    if (i % 100 === 0) process.stderr.write(`  start ${i}/500 over the day budget\n`);
    const answer = await client.startRun({ definition: "cheap", start_key: { source: "trigger", delivery_id: `d${i}` } });
    outcomes.set(answer.outcome, (outcomes.get(answer.outcome) ?? 0) + 1);
  }
  expect(Object.fromEntries(outcomes)).toEqual({ budget_exhausted: 500 });
  const listed = await client.listRuns({ limit: 500 });
  expect(listed.outcome).toBe("ok");
  expect((listed.runs as unknown[]).length).toBe(1);
  expect(await decisions()).toBe(audited + 500);
  const last = await jsm.streams.getMessage("RUNWAY_AUDIT", { last_by_subj: "rw.audit.tday.admission" });
  expect(last!.json()).toMatchObject({ type: "start_refused", code: "budget_exhausted", tenant: "tday", run_id: null });
}, 120_000);

it("G1 a start reserves its ceiling of the day budget until it ends; a retried start is one run and one reservation; a start that would pass the budget waits for none (refused)", async () => {
  const client = world.clientFor("tres");
  await publish({ name: "held", limits: { max_cost_cents: 60 }, nodes: [{ id: "w", kind: "wait", signal: "go" }] }, "tres");
  const key = { source: "trigger", delivery_id: "first" };
  const first = await client.startRun({ definition: "held", start_key: key });
  expect(first.outcome).toBe("started");
  const id = (first.run as RunAnswer).id;
  expect((await client.startRun({ definition: "held", start_key: key })).outcome).toBe("duplicate");
  const reserved = async () => ((await client.getTenant()).tenant as { reserved_cents: number }).reserved_cents;
  expect(await reserved()).toBe(60);
  // 60 reserved + 60 would pass 100: refused, no run.
  expect((await client.startRun({ definition: "held" })).outcome).toBe("budget_exhausted");
  await publish({ name: "plain", nodes: [{ id: "a", kind: "code", handler: "echo" }] }, "tres");
  // A definition with no ceiling reserves the tenant's default (10): 70 fits.
  const plain = await client.startRun({ definition: "plain" });
  expect(plain.outcome).toBe("started");
  await world.settled((plain.run as RunAnswer).id, client);
  await waitFor(async () => (await reserved()) === 60 || undefined, { timeoutMs: 10_000, describe: "the plain run's reservation to come back" });
  // The held run ends: its reservation comes back, and the next start fits.
  expect((await client.signal(id, "go")).outcome).toBe("delivered");
  expect((await world.settled(id, client)).status).toBe("succeeded");
  await waitFor(async () => (await reserved()) === 0 || undefined, { timeoutMs: 10_000, describe: "the held run's reservation to come back" });
  expect((await client.startRun({ definition: "held" })).outcome).toBe("started");
});

it("budget settings are checked: a negative day budget is invalid_input", async () => {
  const bad = await world.client.createTenant("tbad", { day_budget_cents: -1 });
  expect(bad.outcome).toBe("invalid_input");
});
