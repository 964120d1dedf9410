import { expect, it } from "vitest";
import { RunwayClient, type ApiAnswer } from "../../cluster/client.js";
import { Kvm } from "@nats-io/kv";
import { childStartKey, LiveRunIndex, runIdFor, RUN_KIND, Sweeper } from "../../actors/index.js";
import { createLogger, partitionBucket, partitionOf, systemClock } from "../../runtime/index.js";
import { STEP_READY } from "../../machines/index.js";
import { waitFor } from "../harness/index.js";
import { settled, workflowWorld, type RunAnswer } from "./workflow-support.js";
import { losingLocal } from "../fixtures/faults.js";
import { readActor } from "../fixtures/read-actor.js";

/**
 * The recovery sweep on a real node (seed 004's reaper and lane contract tests that apply).
 * The sweeper runs only when a test asks (`sweeper.pass(at)`), at a clock the test chooses, so
 * "ten minutes later" and "three days later" are inputs, not waits. Every test leaves no live
 * run behind, so a later pass far in the future touches only its own runs.
 */
const drops = new Set<string>();
const world = workflowWorld({
  name: "sweep-node",
  sweepIntervalMs: false,
  waitGraceMs: 1_000,
  stepLeaseTtlMs: 20_000,
  // One worker slot: a parent waiting on its child must hold none, or a tree deadlocks.
  scheduler: { slots: 1, interactive_reserve: 0 },
  decorate: { local: losingLocal((channel) => drops.delete(channel)) },
});

const HOUR = 3_600_000;
const MIN = 60_000;

type View = RunAnswer & {
  lane: string;
  parent_run_id: string | null;
  definition: { name: string; version: number; digest: string };
  waiting: { expires_at: number } | null;
};

async function tenantWith(id: string, settings?: Record<string, unknown>): Promise<RunwayClient> {
  const client = new RunwayClient(world.nc, id);
  expect((await client.createTenant(id, settings)).outcome).toMatch(/created|exists/);
  return client;
}

async function publish(client: RunwayClient, definition: object): Promise<void> {
  const put = await client.putDefinition(definition);
  expect(put.outcome, JSON.stringify(put)).toBe("published");
}

/**
 * A pass's repairs, less the benign re-release of a slot whose run ended just before the pass
 * read its tenant, and the live-run index's upkeep (an entry whose run ended, or never got a
 * record, e.g. a create refused: removed).
 */
const repairs = (report: { actions: Record<string, number> }) =>
  Object.fromEntries(Object.entries(report.actions).filter(([k]) => k !== "release_ended_slot" && !k.startsWith("unindex_")));

const view = async (client: RunwayClient, id: string) => (await client.getRun(id)).run as View;
const statusOf = async (client: RunwayClient, id: string) => (await view(client, id)).status;
const until = (client: RunwayClient, id: string, status: string) =>
  waitFor(async () => (await statusOf(client, id)) === status || undefined, { timeoutMs: 20_000, describe: `run ${id} to be ${status}` });

it("C133 a run queued behind its tenant's concurrency cap is not reaped at any age, and starts when the slot frees; a waiting run survives every pass", async () => {
  const client = await tenantWith("q1", { max_concurrency: 1 });
  await publish(client, {
    name: "nap",
    nodes: [
      { id: "nap", kind: "sleep", duration_ms: HOUR },
      { id: "after", kind: "code", needs: ["nap"], handler: "noop" },
    ],
  });
  await publish(client, { name: "one", nodes: [{ id: "a", kind: "code", handler: "noop" }] });
  const holder = (await client.startRun({ definition: "nap" })).run as View;
  await until(client, holder.id, "waiting");
  const started = await client.startRun({ definition: "one" });
  expect(started.outcome).toBe("started");
  const queued = started.run as View;
  expect(queued.status).toBe("queued");
  expect((await client.getTenant()).tenant).toMatchObject({ active_runs: 1, queued_runs: 1 });
  const now = Date.now();
  for (const later of [10 * MIN, 30 * MIN, HOUR - MIN]) {
    const report = await world.node.sweeper.pass(now + later);
    expect(report.errors).toBe(0);
    expect(repairs(report)).toEqual({ recheck_admission: 1 });
    expect(await statusOf(client, queued.id)).toBe("queued");
    expect(await statusOf(client, holder.id)).toBe("waiting");
  }
  // The slot frees: the queued run is told by its tenant and runs to the end.
  expect((await client.cancelRun(holder.id)).outcome).toBe("cancelled");
  expect((await settled(client, queued.id)).status).toBe("succeeded");
  // The run's end reaches its tenant from the run's outbox, after the run's own write.
  await waitFor(
    async () => {
      const t = (await client.getTenant()).tenant as { active_runs: number; queued_runs: number };
      return t.active_runs === 0 && t.queued_runs === 0 ? t : undefined;
    },
    { timeoutMs: 10_000, describe: "the tenant to count the slot free" },
  );
});

it("C014 C015 a waiting run past its deadline plus grace is ended wait_abandoned by the sweep, and its record says why; inside the grace window the sweep writes nothing", async () => {
  const client = await tenantWith("w1");
  await publish(client, { name: "nap", nodes: [{ id: "nap", kind: "sleep", duration_ms: HOUR }] });
  const run = (await client.startRun({ definition: "nap" })).run as View;
  await until(client, run.id, "waiting");
  const deadline = (await view(client, run.id)).waiting!.expires_at;
  const revision = (await readActor(world.nc, RUN_KIND, run.id))!.revision;
  expect(repairs(await world.node.sweeper.pass(deadline - 1))).toEqual({});
  expect(await statusOf(client, run.id)).toBe("waiting");
  expect((await readActor(world.nc, RUN_KIND, run.id))!.revision).toBe(revision);
  expect(repairs(await world.node.sweeper.pass(deadline))).toEqual({ wait_abandoned: 1 });
  const done = await settled(client, run.id);
  expect(done.status).toBe("failed");
  expect(done.error).toMatchObject({ code: "wait_abandoned" });
  expect(done.error!.message).toMatch(/recovery sweep/);
});

it("lost dispatch: an offer that never reached the scheduler is offered again by the sweep, and the run completes", async () => {
  const client = await tenantWith("d1");
  await publish(client, { name: "one", nodes: [{ id: "a", kind: "code", handler: "echo", input: { ok: true } }] });
  drops.add(STEP_READY);
  const run = (await client.startRun({ definition: "one" })).run as View;
  await waitFor(() => !drops.has(STEP_READY) || undefined, { timeoutMs: 10_000, describe: "the offer to be dropped" });
  const stuck = await view(client, run.id);
  expect(stuck.status).toBe("running");
  expect(stuck.nodes.a).toMatchObject({ status: "active", attempt: 0 });
  // Too early to call it lost.
  expect(repairs(await world.node.sweeper.pass(Date.now() + 30_000))).toEqual({});
  expect(repairs(await world.node.sweeper.pass(Date.now() + 61_000))).toEqual({ reoffer: 1 });
  const done = await settled(client, run.id);
  expect(done.status).toBe("succeeded");
  expect(done.nodes.a!.attempt).toBe(1);
});

it("C106 C123 a dispatch lost again after its re-offer fails the attempt dispatch_lost, and the retry policy decides: the next attempt runs; C133 a queued run is never failed", async () => {
  const client = await tenantWith("d2");
  await publish(client, {
    name: "one",
    nodes: [{ id: "a", kind: "code", handler: "echo", input: { ok: true }, retry: { max_attempts: 2, backoff_ms: 0, max_backoff_ms: 0 } }],
  });
  drops.add(STEP_READY);
  const run = (await client.startRun({ definition: "one" })).run as View;
  await waitFor(() => !drops.has(STEP_READY) || undefined, { timeoutMs: 10_000, describe: "the offer to be dropped" });
  // The re-offer is lost too.
  drops.add(STEP_READY);
  const t = Date.now();
  expect(repairs(await world.node.sweeper.pass(t + 61_000))).toEqual({ reoffer: 1 });
  await waitFor(() => !drops.has(STEP_READY) || undefined, { timeoutMs: 10_000, describe: "the re-offer to be dropped" });
  expect((await view(client, run.id)).nodes.a).toMatchObject({ status: "active", attempt: 0 });
  // The next pass finds it still not moved: attempt 1 fails dispatch_lost and attempt 2 is offered (and runs).
  expect(repairs(await world.node.sweeper.pass(t + 122_000))).toEqual({ dispatch_lost: 1 });
  const done = await settled(client, run.id);
  expect(done.status).toBe("succeeded");
  expect(done.nodes.a!.attempt).toBe(2);
});

it("a stale lease (its holder stopped beating, its timer not due yet) is expired by the sweep: worker_lost, then the retry runs", async () => {
  const client = await tenantWith("l1");
  await publish(client, { name: "one", nodes: [{ id: "a", kind: "code", handler: "echo", input: { ok: true } }] });
  // The offer never reaches this node's executor: a worker elsewhere (here: the test) takes attempt 1,
  // leases it durably with a heartbeat, and is never heard from again.
  drops.add(STEP_READY);
  const run = (await client.startRun({ definition: "one" })).run as View;
  await waitFor(() => !drops.has(STEP_READY) || undefined, { timeoutMs: 10_000, describe: "the offer to be dropped" });
  const beat = await world.node.node.host.dispatch(
    { kind: RUN_KIND, id: run.id },
    { type: "step.heartbeat", node: "a", attempt: 1, lease_epoch: 1 },
    `hb/${run.id}`,
  );
  expect(beat.outcome).toBe("applied");
  await waitFor(async () => (await view(client, run.id)).nodes.a?.attempt === 1 || undefined, { timeoutMs: 10_000, describe: "attempt 1 leased" });
  expect(repairs(await world.node.sweeper.pass(Date.now() + 25_000 + 5_000))).toEqual({ expire_lease: 1 });
  const done = await settled(client, run.id);
  expect(done.status).toBe("succeeded");
  expect(done.nodes.a!.attempt).toBe(2);
});

it("the middle run of a three-deep tree is not reaped while its descendant works; a child created after its parent was cancelled is refused parent_cancelled", async () => {
  const client = await tenantWith("g1");
  await publish(client, { name: "leaf", nodes: [{ id: "nap", kind: "sleep", duration_ms: HOUR }] });
  await publish(client, { name: "mid", nodes: [{ id: "sub", kind: "subworkflow", workflow: "leaf" }] });
  await publish(client, { name: "root", nodes: [{ id: "sub", kind: "subworkflow", workflow: "mid" }] });
  const root = (await client.startRun({ definition: "root" })).run as View;
  const mid = runIdFor("g1", childStartKey(root.id, "sub"));
  const leaf = runIdFor("g1", childStartKey(mid, "sub"));
  await until(client, leaf, "waiting");
  const now = Date.now();
  for (const later of [0, 10 * MIN, 30 * MIN]) {
    const report = await world.node.sweeper.pass(now + later);
    expect(repairs(report)).toEqual({});
    expect(report.live).toBeGreaterThanOrEqual(3);
    expect([await statusOf(client, root.id), await statusOf(client, mid), await statusOf(client, leaf)]).toEqual(["running", "running", "waiting"]);
  }
  expect((await client.cancelRun(root.id)).outcome).toBe("cancelled");
  await until(client, leaf, "cancelled");

  // C026 C031 C100: a child created after its parent was cancelled (a parent's outbox replayed
  // after the cancel) reads its parent at create and is refused before it exists.
  const leafDef = (await view(client, leaf)).definition;
  const orphan = runIdFor("g1", childStartKey(mid, "replayed"));
  const create = (id: string, parent: string, node: string, depth: number) =>
    world.node.node.mailbox.request(
      { kind: RUN_KIND, id },
      {
        type: "run.create",
        run: {
          id,
          tenant: "g1",
          root_run_id: root.id,
          parent_run_id: parent,
          parent_node: node,
          depth,
          definition: leafDef,
          source: "workflow_step",
          start_key: `${parent}:${node}`,
          lane: "batch",
          input: {},
        },
      },
      `create/${id}`,
      10_000,
    );
  const refused = await create(orphan, mid, "sub", 2);
  expect(refused).toMatchObject({ outcome: "applied", value: { outcome: "parent_cancelled" } });
  expect((await client.getRun(orphan)).outcome).toBe("run_not_found");
  expect(repairs(await world.node.sweeper.pass())).toEqual({});
});

it("the sweep's parent_gone is the backstop for a child whose parent vanished after the child's create read it", async () => {
  const client = await tenantWith("g2");
  await publish(client, { name: "leaf", nodes: [{ id: "nap", kind: "sleep", duration_ms: HOUR }] });
  await publish(client, { name: "root", nodes: [{ id: "sub", kind: "subworkflow", workflow: "leaf" }] });
  const root = (await client.startRun({ definition: "root" })).run as View;
  const leaf = runIdFor("g2", childStartKey(root.id, "sub"));
  await until(client, leaf, "waiting");
  expect(repairs(await world.node.sweeper.pass())).toEqual({});
  // The parent's record is gone (an operator purged it, say): nothing would ever end the child but the sweep.
  const kv = await new Kvm(world.nc).open(partitionBucket(partitionOf(root.id, 32)));
  await kv.purge(`${RUN_KIND}.${root.id}`);
  expect(repairs(await world.node.sweeper.pass())).toEqual({ parent_gone: 1 });
  const done = await settled(client, leaf);
  expect(done.status).toBe("failed");
  expect(done.error).toMatchObject({ code: "parent_gone" });
  expect(done.error!.message).toMatch(/recovery sweep/);
  // The purged root's tenant slot is an orphan now: released after two passes a minute apart,
  // and with its member key goes its live-run index entry (its tenant counts it: no key of its own).
  const live = new LiveRunIndex(world.nc, 32);
  expect(await live.entries(partitionOf(root.id, 32))).toMatchObject({ counted: expect.arrayContaining([root.id]) });
  const late = await world.node.sweeper.pass(Date.now() + 61_000);
  expect(repairs(late)).toEqual({ release_orphan_slot: 1 });
  await waitFor(async () => ((await live.list(partitionOf(root.id, 32))).includes(root.id) ? undefined : true), {
    timeoutMs: 10_000,
    describe: "the released root to leave the live-run index",
  });
  // The child had a key of its own: it left with the child's end.
  expect(await live.list(partitionOf(leaf, 32))).not.toContain(leaf);
  expect((await client.getTenant()).tenant).toMatchObject({ active_runs: 0 });
});

it("a tree three deep runs to completion at a tenant concurrency limit of one and one worker slot; every child takes the batch lane", async () => {
  const client = await tenantWith("c1", { max_concurrency: 1, interactive_sources: ["api"] });
  await publish(client, { name: "leaf", nodes: [{ id: "x", kind: "code", handler: "echo", input: "leaf" }] });
  await publish(client, {
    name: "mid",
    nodes: [
      { id: "pre", kind: "code", handler: "noop" },
      { id: "sub", kind: "subworkflow", needs: ["pre"], workflow: "leaf" },
    ],
  });
  await publish(client, {
    name: "root",
    nodes: [
      { id: "pre", kind: "code", handler: "noop" },
      { id: "sub", kind: "subworkflow", needs: ["pre"], workflow: "mid" },
    ],
  });
  const root = (await client.startRun({ definition: "root", lane: "interactive" })).run as View;
  const done = await settled(client, root.id);
  expect(done.status).toBe("succeeded");
  const mid = await view(client, runIdFor("c1", childStartKey(root.id, "sub")));
  const leaf = await view(client, runIdFor("c1", childStartKey(mid.id, "sub")));
  expect([mid.status, leaf.status]).toEqual(["succeeded", "succeeded"]);
  expect([(await view(client, root.id)).lane, mid.lane, leaf.lane]).toEqual(["interactive", "batch", "batch"]);
});

it("a tenant slot held by a run that was admitted but never created (the start crashed, nobody retried) is released after two passes; the queued run behind it starts", async () => {
  const client = await tenantWith("o1", { max_concurrency: 1 });
  await publish(client, { name: "one", nodes: [{ id: "a", kind: "code", handler: "noop" }] });
  const ghost = runIdFor("o1", "crashed-start");
  const admitted = await world.node.node.mailbox.request(
    { kind: "tenant", id: "o1" },
    { type: "tenant.admit_run", run_id: ghost, project: "default" },
    `admit/${ghost}`,
    10_000,
  );
  expect(admitted.outcome).toBe("applied");
  const queued = (await client.startRun({ definition: "one" })).run as View;
  expect(queued.status).toBe("queued");
  const now = Date.now();
  expect(repairs(await world.node.sweeper.pass(now))).toEqual({ recheck_admission: 1 });
  // Too soon to call it an orphan (a start may be between its admission and its create).
  expect(repairs(await world.node.sweeper.pass(now + 30_000))).toEqual({ recheck_admission: 1 });
  expect(repairs(await world.node.sweeper.pass(now + 60_000))).toEqual({ recheck_admission: 1, release_orphan_slot: 1 });
  expect((await settled(client, queued.id)).status).toBe("succeeded");
  // The run's end reaches its tenant from the run's outbox, after the run's own write.
  await waitFor(
    async () => {
      const t = (await client.getTenant()).tenant as { active_runs: number; queued_runs: number };
      return t.active_runs === 0 && t.queued_runs === 0 ? t : undefined;
    },
    { timeoutMs: 10_000, describe: "the tenant to count the slot free" },
  );
});

it("one unreadable record is counted and skipped, never aborting the pass; a pass reads at most its bound and the next goes on from there", async () => {
  const client = await tenantWith("b1");
  await publish(client, { name: "nap", nodes: [{ id: "nap", kind: "sleep", duration_ms: HOUR }] });
  const runs: View[] = [];
  for (let i = 0; i < 3; i++) runs.push((await client.startRun({ definition: "nap" })).run as View);
  for (const r of runs) await until(client, r.id, "waiting");
  // A record no codec can read, in a partition this node serves.
  const bad = runIdFor("b1", "garbage");
  const kv = await new Kvm(world.nc).open(partitionBucket(partitionOf(bad, 32)));
  await kv.put(`${RUN_KIND}.${bad}`, new Uint8Array([0xc1, 0xff, 0x00, 0x13]));
  // The sweep reads the runs the live-run index lists: this one is listed as if it had been created.
  await new LiveRunIndex(world.nc, 32).add(bad, { tenant: "b1", at: Date.now() });
  const deadline = Math.max(...(await Promise.all(runs.map(async (r) => (await view(client, r.id)).waiting!.expires_at))));
  const report = await world.node.sweeper.pass(deadline);
  expect(report.errors).toBe(1);
  expect(repairs(report)).toEqual({ wait_abandoned: 3 });
  for (const r of runs) expect((await settled(client, r.id)).error).toMatchObject({ code: "wait_abandoned" });

  // A sweeper bounded at 2 runs a pass: every live run is still reached, over several passes.
  const more: View[] = [];
  for (let i = 0; i < 5; i++) more.push((await client.startRun({ definition: "nap" })).run as View);
  for (const r of more) await until(client, r.id, "waiting");
  const n = world.node.node;
  const live = new LiveRunIndex(world.nc, 32);
  const bounded = new Sweeper({
    nc: world.nc,
    host: n.host,
    mailbox: n.mailbox,
    partitions: 32,
    clock: systemClock,
    logger: createLogger("bounded", "error"),
    maxPerPass: 2,
    live,
    members: (tenant) => world.node.tenants.members(tenant),
  });
  const at = Math.max(...(await Promise.all(more.map(async (r) => (await view(client, r.id)).waiting!.expires_at))));
  let abandoned = 0;
  for (let pass = 0; pass < 200 && abandoned < 5; pass++) {
    const r = await bounded.pass(at);
    // One listing of the tenants' member keys a pass, whatever the partitions it covers.
    expect(live.memberListings).toBe(pass + 1);
    expect(r.scanned).toBeLessThanOrEqual(2);
    abandoned += r.actions.wait_abandoned ?? 0;
  }
  expect(abandoned).toBe(5);
  for (const r of more) expect((await settled(client, r.id)).status).toBe("failed");
});

it("an operator runs a pass on every node with runway.v1.ops.sweep and reads each node's report; a malformed request is invalid_input", async () => {
  const answer = JSON.parse((await world.nc.request("runway.v1.ops.sweep", "", { timeout: 10_000 })).string()) as ApiAnswer & {
    node: string;
    report: { scanned: number; errors: number; truncated: boolean };
  };
  expect(answer).toMatchObject({ outcome: "swept", node: "sweep-node" });
  expect(answer.report.scanned).toBeGreaterThan(0);
  expect(answer.report.truncated).toBe(false);
  const bad = JSON.parse((await world.nc.request("runway.v1.ops.sweep", JSON.stringify({ at: 1 }), { timeout: 10_000 })).string()) as ApiAnswer;
  expect(bad.outcome).toBe("invalid_input");
});

it("sweep actions are counted in the node's metrics, by action", async () => {
  const reply = await world.nc.request("runway.v1.ops.metrics", "", { timeout: 5_000 });
  const metrics = (JSON.parse(reply.string()) as ApiAnswer & { metrics: Record<string, Record<string, number>> }).metrics;
  expect(metrics.sweep_passes as unknown as number).toBeGreaterThanOrEqual(10);
  // One listing of the member keys a pass (the node's own passes; the bounded sweeper above had its own index).
  expect(metrics.live_index_member_listings as unknown as number).toBeGreaterThanOrEqual(metrics.sweep_passes as unknown as number);
  expect(metrics.sweep_errors as unknown as number).toBeGreaterThanOrEqual(1);
  expect(metrics.sweep_actions).toMatchObject({
    "tenant=q1,action=recheck_admission": 3,
    "tenant=w1,action=wait_abandoned": 1,
    "tenant=d1,action=reoffer": 1,
    "tenant=d2,action=dispatch_lost": 1,
    "tenant=l1,action=expire_lease": 1,
    "tenant=g2,action=parent_gone": 1,
    "tenant=o1,action=release_orphan_slot": 1,
    "tenant=b1,action=wait_abandoned": 8,
  });
});
