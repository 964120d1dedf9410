import { expect, it } from "vitest";
import { RunwayClient } from "../../cluster/client.js";
import { partitionOf } from "../../runtime/index.js";
import { CMD_STREAM, timerSubject } from "../../runtime/topology.js";
import { waitFor } from "../harness/index.js";
import { workflowWorld, type RunAnswer } from "../integration/workflow-support.js";
import { losingLocal, losingReports } from "../fixtures/faults.js";

// Deterministic "randomness": every third offer to the scheduler and every fourth report is lost.
// A short step's grant and result are one write, so a lost report is found by the recovery sweep
// (here every 200 ms, offers repaired after 1 s), as a lost offer is.
let handovers = 0;
let reports = 0;
const world = workflowWorld({
  name: "lossy",
  stepLeaseTtlMs: 1_000,
  waitGraceMs: 500,
  sweepIntervalMs: 200,
  sweep: { lease_grace_ms: 500, reoffer_after_ms: 1_000 },
  decorate: {
    local: losingLocal((channel) => channel === "step.ready" && ++handovers % 3 === 0),
    report: losingReports((event) => event.type === "step.result" && ++reports % 4 === 0),
  },
});

it("every accepted run reaches a terminal state when dispatches and reports are dropped, workers are killed and waits expire", async () => {
  const client = new RunwayClient(world.nc, "loss");
  await client.createTenant("loss");
  const retry = { max_attempts: 10, backoff_ms: 10, max_backoff_ms: 50 };
  await client.putDefinition({
    name: "steps",
    nodes: [0, 1, 2].map((i) => ({ id: `s${i}`, kind: "code", handler: "echo", input: i, retry, ...(i > 0 ? { needs: [`s${i - 1}`] } : {}) })),
  });
  await client.putDefinition({
    name: "crashing",
    nodes: [{ id: "c", kind: "code", handler: "crash", retry: { max_attempts: 2, backoff_ms: 10, max_backoff_ms: 10 } }],
  });
  await client.putDefinition({
    name: "parked",
    nodes: [
      { id: "nap", kind: "sleep", duration_ms: 300 },
      { id: "after", kind: "code", needs: ["nap"], handler: "noop" },
    ],
  });
  const ids: { id: string; kind: string }[] = [];
  for (let i = 0; i < 10; i++) ids.push({ id: ((await client.startRun({ definition: "steps" })).run as RunAnswer).id, kind: "steps" });
  for (let i = 0; i < 3; i++) ids.push({ id: ((await client.startRun({ definition: "crashing" })).run as RunAnswer).id, kind: "crashing" });
  for (let i = 0; i < 3; i++) {
    const id = ((await client.startRun({ definition: "parked" })).run as RunAnswer).id;
    // The wake-up timer is lost: only the wait's own expiry clock can end this run.
    const purged = await world.nc.request(
      `$JS.API.STREAM.PURGE.${CMD_STREAM}`,
      JSON.stringify({ filter: timerSubject(partitionOf(id, 32), "run", id, "sleep-nap") }),
      { timeout: 5_000 },
    );
    expect(JSON.parse(purged.string()).success).toBe(true);
    ids.push({ id, kind: "parked" });
  }
  const final = await waitFor(
    async () => {
      const views = await Promise.all(ids.map(async (r) => ({ ...r, run: (await client.getRun(r.id)).run as RunAnswer })));
      return views.every((v) => ["succeeded", "failed", "cancelled"].includes(v.run.status)) ? views : undefined;
    },
    { timeoutMs: 60_000, describe: "every accepted run to reach a terminal state" },
  );
  const byKind = (k: string) => final.filter((v) => v.kind === k).map((v) => v.run);
  console.log(
    `terminal: dropped ${Math.floor(handovers / 3)} offers and ${Math.floor(reports / 4)} reports; ${JSON.stringify(final.map((v) => `${v.kind}:${v.run.status}${v.run.error ? `:${v.run.error.code}` : ""}`))}`,
  );
  // Terminal is the guarantee; under this much loss a step may spend all its attempts, and then
  // its run fails with the reason on record rather than hanging.
  for (const r of byKind("steps")) expect(r.status === "succeeded" || (r.status === "failed" && r.error !== null)).toBe(true);
  expect(byKind("steps").filter((r) => r.status === "succeeded").length).toBeGreaterThan(0);
  expect(byKind("crashing").every((r) => r.status === "failed")).toBe(true);
  for (const r of byKind("parked")) {
    expect(r.status).toBe("failed");
    expect(r.error?.code).toBe("wait_abandoned");
  }
});
