import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, it } from "vitest";
import type { RunwayClient } from "../../cluster/client.js";
import { childStartKey, RUN_KIND, runIdFor } from "../../actors/index.js";
import { RUN_RECORD } from "../../actors/run/actor.js";
import { readActor } from "../../runtime/index.js";
import { runShapeViolations } from "../../machines/run/index.js";
import { kvSubject, partitionBucket, partitionOf, partitionStream, readLast } from "../../runtime/index.js";
import { waitFor } from "../harness/index.js";
import { settled, workflowWorld, type RunAnswer } from "./workflow-support.js";

/**
 * Admission approvals (machines/execution/admission.ts): a top-level run of a definition whose
 * policy requires a person is held before it asks its tenant or does anything. The sweeper runs
 * only when a test asks (`sweeper.pass(at)`), at a clock the test chooses.
 */

/** The node's clock, moved forward by a test (days pass without waiting). */
let offset = 0;
const world = workflowWorld({
  name: "admission-node",
  clock: { now: () => Date.now() + offset, monotonic: () => performance.now() },
  sweepIntervalMs: false,
  waitGraceMs: 1_000,
});
const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const dir = mkdtempSync(join(tmpdir(), "runway-admission-"));

type View = RunAnswer & {
  waiting: { on: string; ref: string; expires_at: number } | null;
  started_at: number | null;
  cancel: { reason: string; by: string } | null;
};
type Item = { id: string; run: string; node: string; kind: string; prompt: string; group: string | null; payload: unknown; expires_at: number };

/** A definition held for admission whose one step appends a line to `file` (the proof that it ran). */
async function gated(client: RunwayClient, name: string, timeout_ms = 7 * DAY): Promise<void> {
  const def = {
    name,
    admission: { approval: { prompt: `Start ${name}?`, group: "ops", escalation_group: "cto", timeout_ms } },
    nodes: [{ id: "work", kind: "code", handler: "count_slow", input: { file: "${input.file}", value: "${input.value}", ms: "${input.ms}" } }],
  };
  const put = await client.putDefinition(def);
  expect(put.outcome, JSON.stringify(put)).toMatch(/published|unchanged/);
}

async function tenant(id: string, settings?: Record<string, unknown>): Promise<RunwayClient> {
  const client = world.clientFor(id);
  expect((await client.createTenant(id, settings)).outcome).toMatch(/created|exists/);
  return client;
}

const view = async (client: RunwayClient, id: string) => (await client.getRun(id)).run as View;
const lines = (file: string) => (existsSync(file) ? readFileSync(file, "utf8").trim().split("\n").length : 0);
const inbox = async (client: RunwayClient, run: string) => (await client.approvals({ run_id: run })).approvals as Item[];
const startsToday = async (client: RunwayClient) => ((await client.getTenant()).tenant as { starts_today: number }).starts_today;
const revision = async (id: string) => {
  const p = partitionOf(id, 32);
  const read = await readLast(world.nc, partitionStream(p), kvSubject(partitionBucket(p), `${RUN_KIND}.${id}`));
  if (read.outcome !== "found") throw new Error(`run ${id}: ${read.outcome}`);
  return read.message.seq;
};

/** Starts a held run: answered `started`, waiting on its admission approval, listed in the inbox; nothing asked of its tenant. */
async function held(client: RunwayClient, definition: string, file: string, extra: Record<string, unknown> = {}): Promise<{ id: string; approval: string }> {
  const before = await startsToday(client);
  const started = await client.startRun({ definition, input: { file, value: "done", ms: 1_500 }, ...extra });
  expect(started.outcome).toBe("started");
  const id = (started.run as View).id;
  expect((started.run as View).status).toBe("waiting");
  const approval = `${id}:(admission)`;
  const run = await view(client, id);
  expect(run.waiting).toMatchObject({ on: "approval", ref: approval });
  expect(run.started_at).toBeNull();
  await waitFor(async () => (await inbox(client, id)).length === 1 || undefined, { timeoutMs: 10_000, describe: "the admission approval to be listed" });
  expect(await startsToday(client)).toBe(before);
  return { id, approval };
}

it("C021 a start whose policy requires a person is held (its tenant not asked, nothing run, listed as an admission approval); approved, it asks its tenant and its claim reads running with the waiting fields cleared", async () => {
  const client = await tenant("a1");
  await gated(client, "gated");
  const file = join(dir, "c021");
  const { id, approval } = await held(client, "gated", file, { input: { file, value: "done", ms: 1_500, note: "for the reviewer" } });
  const [item] = await inbox(client, id);
  expect(item).toMatchObject({
    id: approval,
    run: id,
    node: "(admission)",
    kind: "admission",
    prompt: "Start gated?",
    group: "ops",
    payload: { definition: { name: "gated", version: 1 }, input: { file, note: "for the reviewer" } },
  });
  expect(((await client.approvals({ group: "cto" })).approvals as Item[]).map((a) => a.id)).toContain(approval);
  expect(lines(file)).toBe(0);
  const before = await startsToday(client);

  expect(await client.decide(approval, "approve", { by: "alice" })).toEqual({ outcome: "decided", approval, decision: "approved" });
  const running = await waitFor(
    async () => {
      const r = await view(client, id);
      return r.status === "running" ? r : undefined;
    },
    { timeoutMs: 10_000, describe: "the approved run to be claimed" },
  );
  expect(running.waiting).toBeNull();
  expect(running.started_at).not.toBeNull();
  const stored = await readActor({ nc: world.nc, partitions: 32 }, RUN_RECORD, id);
  const run = stored.outcome === "found" ? stored.snapshot.context!.run! : undefined;
  expect(run!.lifecycle).toMatchObject({ status: "running", waiting_on: null, waiting_ref: null, waiting_expires_at: null });
  expect(runShapeViolations({ ...run!.lifecycle, id: run!.id, root_run_id: run!.root_run_id, parent_run_id: run!.parent_run_id })).toEqual([]);
  // Admitted by its tenant only now, as an ordinary start is.
  expect(await startsToday(client)).toBe(before + 1);
  expect(await inbox(client, id)).toEqual([]);
  const done = await settled(client, id);
  expect(done.status).toBe("succeeded");
  expect(lines(file)).toBe(1);
  expect(await client.decide(approval, "reject", { by: "bob" })).toEqual({ outcome: "already_decided" });
  const events = ((await client.runEvents(id)).events as { type: string }[]).map((e) => e.type);
  expect(events.indexOf("approval_decided")).toBeLessThan(events.indexOf("run_started"));
});

it("C034 a rejected admission approval leaves the run cancelled: no step leased, nothing ran; an edit is refused and a second decision answers already_decided", async () => {
  const client = await tenant("a2");
  await gated(client, "gated");
  const file = join(dir, "c034");
  const { id, approval } = await held(client, "gated", file);
  expect(await client.decide(approval, "edit", { payload: { x: 1 }, by: "alice" })).toMatchObject({ outcome: "invalid_input" });
  expect(await client.decide(approval, "reject", { reason: "not this one", by: "alice" })).toEqual({ outcome: "decided", approval, decision: "rejected" });
  const done = (await settled(client, id)) as View;
  expect(done.status).toBe("cancelled");
  expect(done.waiting).toBeNull();
  expect(done.started_at).toBeNull();
  expect(done.cancel).toMatchObject({ by: "alice", reason: "admission rejected: not this one" });
  expect(done.nodes.work).toEqual({ status: "cancelled" });
  expect(lines(file)).toBe(0);
  const events = ((await client.runEvents(id)).events as { type: string }[]).map((e) => e.type);
  expect(events).not.toContain("step_started");
  expect(events).not.toContain("run_started");
  expect(await client.decide(approval, "approve", { by: "bob" })).toEqual({ outcome: "already_decided" });
  expect(await inbox(client, id)).toEqual([]);
});

it("C035 C127 an admission approval never answered ends the run at its timeout by its own timer: failed approval_expired, nothing ran, its tenant never asked; a decision past the deadline answers approval_expired", async () => {
  const client = await tenant("a3");
  await gated(client, "quick", 300);
  const file = join(dir, "c035");
  const before = await startsToday(client);
  const started = await client.startRun({ definition: "quick", input: { file, value: "done", ms: 1 } });
  const id = (started.run as View).id;
  const done = (await settled(client, id)) as View;
  expect(done.status).toBe("failed");
  expect(done.error).toMatchObject({ code: "approval_expired" });
  expect(done.started_at).toBeNull();
  expect(done.nodes.work).toEqual({ status: "pending" });
  expect(lines(file)).toBe(0);
  expect(await startsToday(client)).toBe(before);
  expect(await client.decide(`${id}:(admission)`, "approve", { by: "late" })).toEqual({ outcome: "approval_expired" });
  expect(await inbox(client, id)).toEqual([]);
  const events = ((await client.runEvents(id)).events as { type: string }[]).map((e) => e.type);
  expect(events.filter((t) => t === "approval_expired")).toHaveLength(1);
  expect(events).not.toContain("run_started");

  // Days later on the node's clock, a decision meets the deadline first.
  await gated(client, "gated");
  const week = await held(client, "gated", join(dir, "c127"));
  offset = 8 * DAY;
  try {
    expect(await client.decide(week.approval, "approve", { by: "alice" })).toEqual({ outcome: "approval_expired" });
  } finally {
    offset = 0;
  }
  expect((await client.cancelRun(week.id)).outcome).toBe("cancelled");
  expect(await inbox(client, week.id)).toEqual([]);
});

it("C128 a run waiting on an admission approval stays waiting through sweep passes until its own deadline (its record untouched); a pass past deadline and grace (as if its timer were lost) ends it approval_expired", async () => {
  const client = await tenant("a4");
  await gated(client, "hour", HOUR);
  const file = join(dir, "c128");
  const { id } = await held(client, "hour", file);
  const rev = await revision(id);
  const deadline = (await view(client, id)).waiting!.expires_at;
  const now = Date.now();
  for (const at of [now + 60_000, now + HOUR / 2, deadline - 1]) {
    const report = await world.node.sweeper.pass(at);
    expect(report.errors).toBe(0);
    expect(report.actions.wait_abandoned ?? 0).toBe(0);
    expect((await view(client, id)).status).toBe("waiting");
    expect(await revision(id)).toBe(rev);
  }
  expect((await world.node.sweeper.pass(deadline)).actions.wait_abandoned).toBe(1);
  const done = (await settled(client, id)) as View;
  expect(done.status).toBe("failed");
  expect(done.error).toMatchObject({ code: "approval_expired" });
  expect(lines(file)).toBe(0);
  expect(await inbox(client, id)).toEqual([]);
});

it("an approved run its tenant then refuses (killed meanwhile) fails with the tenant's code before any work", async () => {
  const client = await tenant("a5");
  await gated(client, "gated");
  const file = join(dir, "killed");
  const { id, approval } = await held(client, "gated", file);
  expect((await client.setTenantState("a5", "kill", "incident")).outcome).toBe("killed");
  expect(await client.decide(approval, "approve", { by: "alice" })).toMatchObject({ outcome: "decided", decision: "approved" });
  const done = (await settled(client, id)) as View;
  expect(done.status).toBe("failed");
  expect(done.error).toMatchObject({ code: "tenant_killed" });
  expect(done.started_at).toBeNull();
  expect(lines(file)).toBe(0);
});

it("a repeated start key answers the held run (one approval); a child of a gated definition is not held: its tenant admits the tree at its root", async () => {
  const client = await tenant("a6");
  await gated(client, "gated");
  const file = join(dir, "dup");
  const key = { source: "webhook", delivery_id: "d-1" };
  const { id } = await held(client, "gated", file, { start_key: key });
  const again = await client.startRun({ definition: "gated", input: {}, start_key: key });
  expect(again.outcome).toBe("duplicate");
  expect((again.run as View).id).toBe(id);
  expect(await inbox(client, id)).toHaveLength(1);
  expect((await client.cancelRun(id)).outcome).toBe("cancelled");

  const childFile = join(dir, "child");
  expect(
    (
      await client.putDefinition({
        name: "parent",
        nodes: [{ id: "down", kind: "subworkflow", workflow: "gated", input: { file: childFile, value: "child", ms: 1 } }],
      })
    ).outcome,
  ).toMatch(/published|unchanged/);
  const parent = ((await client.startRun({ definition: "parent" })).run as View).id;
  const done = await settled(client, parent);
  expect(done.status).toBe("succeeded");
  expect(lines(childFile)).toBe(1);
  expect(await inbox(client, runIdFor("a6", childStartKey(parent, "down")))).toEqual([]);
});
