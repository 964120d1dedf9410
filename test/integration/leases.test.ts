import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { RunwayClient } from "../../cluster/client.js";
import { waitFor } from "../harness/index.js";
import { settled, workflowWorld, type RunAnswer } from "./workflow-support.js";

const dir = mkdtempSync(join(tmpdir(), "runway-lease-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
// Leases shorter than the handlers' timeouts: a handler that stops heartbeating loses its lease.
const world = workflowWorld({ name: "lease-node", stepLeaseTtlMs: 1_500 });

it("zombie commit refused: a handler spinning past its lease gets stale_lease; the retry's result is the step's result; its effect counts once", async () => {
  const client = new RunwayClient(world.nc, "z1");
  await client.createTenant("z1");
  const ledger = join(dir, "effects.txt");
  const def = {
    name: "zombie-step",
    nodes: [
      {
        id: "work",
        kind: "code",
        handler: "spin_first",
        input: { ms: 3_000 },
        timeout_ms: 60_000,
        retry: { max_attempts: 3, backoff_ms: 0, max_backoff_ms: 0 },
      },
      { id: "effect", kind: "code", needs: ["work"], handler: "count_invocations", input: { file: ledger, value: "${steps.work.output}" } },
    ],
  };
  expect((await client.putDefinition(def)).outcome).toBe("published");
  const started = await client.startRun({ definition: "zombie-step" });
  const done = await settled(client, (started.run as RunAnswer).id);
  expect(done.status).toBe("succeeded");
  // The retry (attempt 2, after the lease of attempt 1 expired) produced the step's result.
  expect((done.result as { work: { attempt: number } }).work).toEqual({ attempt: 2 });
  // The zombie finished later and tried to commit: refused.
  await waitFor(() => world.node.executor.stats.staleCommits >= 1, { timeoutMs: 15_000, describe: "the zombie's commit to be refused" });
  const run = (await client.getRun(done.id)).run as RunAnswer;
  expect(run.nodes.work!.attempt).toBe(2);
  // The step's effect, downstream of its result, happened exactly once, with the retry's output.
  const lines = readFileSync(ledger, "utf8").trim().split("\n");
  expect(lines).toHaveLength(1);
});

it("heartbeats keep a long handler's lease alive", async () => {
  const client = new RunwayClient(world.nc, "z2");
  await client.createTenant("z2");
  expect((await client.putDefinition({ name: "beating", nodes: [{ id: "b", kind: "code", handler: "long_beat", input: { ms: 3_000 } }] })).outcome).toBe(
    "published",
  );
  const started = await client.startRun({ definition: "beating" });
  const done = await settled(client, (started.run as RunAnswer).id);
  expect(done.status).toBe("succeeded");
  expect(done.nodes.b!.attempt).toBe(1);
  expect(world.node.executor.stats.heartbeats).toBeGreaterThan(0);
});

it("a report from an attempt whose run was cancelled meanwhile is refused stale_cancel_epoch", async () => {
  const client = new RunwayClient(world.nc, "z3");
  await client.createTenant("z3");
  expect(
    (await client.putDefinition({ name: "long", nodes: [{ id: "s", kind: "code", handler: "delay_echo", input: { ms: 3_000, value: 1 } }] })).outcome,
  ).toBe("published");
  const before = world.node.executor.stats.staleCancelCommits;
  const started = (await client.startRun({ definition: "long" })).run as RunAnswer;
  await waitFor(async () => ((await client.getRun(started.id)).run as RunAnswer).nodes.s?.attempt === 1 || undefined, {
    timeoutMs: 10_000,
    describe: "the attempt to be leased",
  });
  expect((await client.cancelRun(started.id)).outcome).toBe("cancelled");
  // A cancel does not stop a running handler: it finishes and reports into a cancelled run.
  // (It runs 3 s, far longer than a cancel takes, so the report always meets the cancelled run.)
  await waitFor(() => world.node.executor.stats.staleCancelCommits > before || undefined, {
    timeoutMs: 10_000,
    describe: "the late report to be refused stale_cancel_epoch",
  });
  expect(((await client.getRun(started.id)).run as RunAnswer).status).toBe("cancelled");
});

it("metrics: lease acquisitions and expiries and zombie rejections, as JSON over NATS and as Prometheus text", async () => {
  const reply = await world.nc.request("runway.v1.ops.metrics", "", { timeout: 5_000 });
  const body = JSON.parse(reply.string()) as { outcome: string; node: string; metrics: Record<string, unknown> };
  expect(body.outcome).toBe("ok");
  expect(body.node).toBe("lease-node");
  expect(body.metrics.lease_acquisitions).toBeGreaterThanOrEqual(3);
  expect(body.metrics.zombie_commit_rejections).toBeGreaterThanOrEqual(1);
  expect(body.metrics.lease_expiries).toEqual({ "tenant=z1": 1 });
  // Queue wait and slowdown of the served attempts, by tenant and class ((wait + run) / run ≥ 1).
  const slowdown = body.metrics.scheduler_mean_slowdown as Record<string, number>;
  expect(slowdown["tenant=z1,class=automation"]).toBeGreaterThanOrEqual(1);
  expect((body.metrics.scheduler_mean_wait_ms as Record<string, number>)["tenant=z1,class=automation"]).toBeGreaterThanOrEqual(0);
  const text = (await world.nc.request("runway.v1.ops.metrics.prometheus", "", { timeout: 5_000 })).string();
  expect(text).toMatch(/^# TYPE runway_lease_acquisitions counter$/m);
  expect(text).toMatch(/^runway_lease_expiries\{node="lease-node",tenant="z1"\} 1$/m);
});
