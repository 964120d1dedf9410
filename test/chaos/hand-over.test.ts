import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { RunwayClient } from "../../cluster/client.js";
import { partitionOf } from "../../runtime/index.js";
import { DEFAULT_TOPOLOGY } from "../../runtime/topology.js";
import { placementFor } from "../../runtime/partitions/placement.js";
import { waitFor } from "../harness/index.js";
import { fenceOwners, singleServerWorld, startWorkflowNode } from "./node-process.js";
import type { RunAnswer } from "../integration/workflow-support.js";

/**
 * A node joins while another runs steps: the running node hands the joining one the partitions
 * placement gives it (a release, not a crash), with attempts of their runs still executing. Those
 * attempts are the live previous owner's: the new owner leases them rather than failing them
 * `worker_lost`, so each step's handler runs once and its result, sent through the mailbox, is
 * taken (the 30-minute soak found a node's return after a kill running its interim owner's steps
 * again).
 */
const world = singleServerWorld();
const dir = mkdtempSync(join(tmpdir(), "runway-hand-over-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const P = DEFAULT_TOPOLOGY.partitions;

it("41 a partition handed over while its runs' steps execute on the node that let it go: each step runs once and its result is taken", async () => {
  const ledger = join(dir, "ledger.txt");
  const gate = join(dir, "gate");
  const first = await startWorkflowNode(world, "hand-b", { leaseTtlMs: 3_000 });
  const client = new RunwayClient(world.nc, "ho");
  await client.createTenant("ho");
  // One step that notes its start in the ledger, then waits for the test's gate.
  const def = { name: "gated-one", nodes: [{ id: "s", kind: "code", handler: "ledger_gate", input: { file: ledger, gate } }] };
  expect((await client.putDefinition(def)).outcome).toBe("published");
  const runs: string[] = [];
  for (let i = 0; i < 12; i++) runs.push(((await client.startRun({ definition: "gated-one" })).run as RunAnswer).id);
  const started = () => (existsSync(ledger) ? readFileSync(ledger, "utf8").trim().split("\n") : []);
  await waitFor(() => started().length >= runs.length || undefined, { timeoutMs: 30_000, describe: "every step to start on hand-b" });

  // The joining node's share of the partitions (placement over both names) holds some of these runs.
  const moving = new Set(placementFor("hand-a", ["hand-a", "hand-b"], P));
  expect(runs.filter((r) => moving.has(partitionOf(r, P))).length).toBeGreaterThan(0);
  const second = await startWorkflowNode(world, "hand-a", { leaseTtlMs: 3_000 });
  await waitFor(async () => (await fenceOwners(world.nc, P)).every((o, p) => o.owner === (moving.has(p) ? "hand-a" : "hand-b")) || undefined, {
    timeoutMs: 30_000,
    describe: "hand-b to hand hand-a its partitions",
  });
  writeFileSync(gate, "go");
  const done = await waitFor(
    async () => {
      const views = await Promise.all(runs.map(async (id) => (await client.getRun(id)).run as RunAnswer));
      return views.every((v) => v.status === "succeeded" || v.status === "failed") ? views : undefined;
    },
    { timeoutMs: 60_000, describe: "every run to end" },
  );
  expect(done.map((v) => v.status)).toEqual(runs.map(() => "succeeded"));
  // Each step started once: on hand-b, as attempt 1.
  const lines = started();
  for (const run of runs) expect(lines.filter((l) => l.startsWith(`${run} `))).toEqual([`${run} s 1`]);
  await second.kill("SIGTERM");
  await first.kill("SIGTERM");
});
