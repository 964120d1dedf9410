import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import { RunwayClient } from "../../cluster/client.js";
import { RUNWAY_USER, spawnTsx, waitFor, type ChildHandle } from "../harness/index.js";
import { startEffectsServer, type EffectsServerHandle } from "../fixtures/mcp/start.js";
import { finished, singleServerWorld, startWorkflowNode } from "./node-process.js";
import type { RunAnswer } from "../integration/workflow-support.js";

/**
 * A node SIGSTOPped (as a frozen VM or a stalled host would be) while it holds an attempt, kept
 * stopped past its lease while another node takes its partitions and runs the attempt again, then
 * continued. The run refuses the stopped node's late report (the fences), but what the attempt
 * would do before reporting is the point here: it must not start its handler, nor send its tool
 * call, once its node no longer surely holds the run's partition (the 30-minute soak found both).
 */
const world = singleServerWorld();
const dir = mkdtempSync(join(tmpdir(), "runway-paused-"));
const fixture = fileURLToPath(new URL("../fixtures/pausing-node-process.ts", import.meta.url));
const LEASE_TTL_MS = 3_000;
let tools: EffectsServerHandle;

beforeAll(async () => {
  tools = await startEffectsServer({ http: true });
}, 30_000);
// Each test's nodes go with it: a node left running would take the next test's partitions.
afterEach(async () => {
  for (const c of world.children.splice(0)) await c.kill("SIGKILL").catch(() => undefined);
});
afterAll(async () => {
  await tools?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** The node that pauses itself (alone on the server when the run starts, so the run is its). */
async function startPausingNode(name: string, pause: { pauseAtOffer?: string; pauseAfterWrite?: string }): Promise<ChildHandle> {
  const child = spawnTsx(fixture, [], {
    name,
    env: { RW_PAUSE: JSON.stringify({ servers: [world.server.url], ...RUNWAY_USER, name, leaseTtlMs: LEASE_TTL_MS, ...pause }), RUNWAY_LOG: "warn" },
  });
  world.children.push(child);
  await child.waitForLine(/^READY /, { timeoutMs: 30_000 });
  return child;
}

/** Until the process really is stopped (its PAUSING line is written just before it stops itself). */
async function pausedAt(child: ChildHandle): Promise<string> {
  const line = await child.waitForLine(/^PAUSING /, { timeoutMs: 30_000 });
  await waitFor(() => readFileSync(`/proc/${child.pid}/stat`, "utf8").split(") ")[1]?.startsWith("T") || undefined, {
    timeoutMs: 10_000,
    describe: "the node to be stopped",
  });
  return line;
}

it("41 a node SIGSTOPped with an attempt's offer in hand, continued after another node ran the attempt, does not start the handler", async () => {
  const ledger = join(dir, "offer-ledger.txt");
  const paused = await startPausingNode("pause-offer-a", { pauseAtOffer: "second" });
  // Short answers: the stopped node still holds its share of the API's queue group, and a request it was handed goes unanswered.
  const client = new RunwayClient(world.nc, "po", 2_000);
  await client.createTenant("po");
  const def = {
    name: "two-steps",
    nodes: [
      { id: "first", kind: "code", handler: "count_invocations", input: { file: ledger, value: 1 } },
      { id: "second", kind: "code", handler: "count_invocations", input: { file: ledger, value: 2 }, needs: ["first"] },
    ],
  };
  expect((await client.putDefinition(def)).outcome).toBe("published");
  const started = await client.startRun({ definition: "two-steps" });
  const run = (started.run as RunAnswer).id;
  await pausedAt(paused);

  // Another node takes the partitions once the stopped node's lease lapses, and runs `second` again.
  await startWorkflowNode(world, "pause-offer-b", { leaseTtlMs: LEASE_TTL_MS });
  const done = await finished(client, run);
  expect(done.status).toBe("succeeded");

  paused.resume();
  const report = await paused.waitForLine(new RegExp(`^REPORT ${run} second 1 `), { timeoutMs: 30_000 });
  const invocations = readFileSync(ledger, "utf8").trim().split("\n");
  // `second` ran once, as attempt 2 on the other node; the stopped node's attempt 1 never started.
  expect(invocations.filter((l) => l.startsWith(`${run} second `))).toEqual([`${run} second 2`]);
  expect(invocations.filter((l) => l.startsWith(`${run} first `))).toEqual([`${run} first 1`]);
  expect(report).toContain("failed lease_lapsed");
});

it("41 a node SIGSTOPped between a charge's intent and its call, continued after another node made the charge, does not send it", async () => {
  const paused = await startPausingNode("pause-call-a", { pauseAfterWrite: "effect_intent" });
  const client = new RunwayClient(world.nc, "pc", 2_000);
  await client.createTenant("pc");
  const server = { name: "fx", transport: { type: "http", url: tools.url }, trusted: true, lookups: { charge: "find_charge" } };
  expect((await client.putToolServer(server)).outcome).toBe("saved");
  const def = { name: "charge-once", nodes: [{ id: "call", kind: "tool", server: "fx", tool: "charge", arguments: { account: "acme", amount: 7 } }] };
  expect((await client.putDefinition(def)).outcome).toBe("published");
  const before = tools.counts().effects.charge ?? 0;
  const started = await client.startRun({ definition: "charge-once" });
  const run = (started.run as RunAnswer).id;
  await pausedAt(paused);

  // The other node meets the intent with no receipt, asks the lookup (not found: the call was never sent) and charges.
  await startWorkflowNode(world, "pause-call-b", { leaseTtlMs: LEASE_TTL_MS });
  const done = await finished(client, run);
  expect(done.status).toBe("succeeded");
  expect(tools.counts().effects.charge).toBe(before + 1);

  paused.resume();
  const report = await paused.waitForLine(new RegExp(`^REPORT ${run} call 1 `), { timeoutMs: 30_000 });
  const counts = tools.counts();
  expect(counts.effects.charge).toBe(before + 1);
  expect(Object.entries(counts.charged ?? {}).filter(([k]) => k.startsWith(`${run}:`))).toEqual([[expect.any(String), 1]]);
  expect(report).toContain("failed lease_lapsed");
});
