import { readFileSync } from "node:fs";
import { expect, it } from "vitest";
import { listMembers, TENANT_KIND } from "../../actors/index.js";
import { actorRecordCodec, kvSubject, partitionBucket, partitionOf, partitionStream, publish, readLast } from "../../runtime/index.js";
import { waitFor } from "../harness/index.js";
import { workflowWorld } from "./workflow-support.js";

/**
 * Issue 9: a tenant's members are keys beside its record, written right behind the record (one
 * chain through the partition's fenced log) and again whenever the record is loaded; a record stored before keeps
 * loading and is migrated. Commands go to the tenant actor on a real node (TenantService).
 */
const world = workflowWorld({ name: "members-node", sweepIntervalMs: false });

async function storedRecord(tenant: string): Promise<Uint8Array | undefined> {
  const p = partitionOf(tenant, 32);
  const read = await readLast(world.nc, partitionStream(p), kvSubject(partitionBucket(p), `${TENANT_KIND}.${tenant}`));
  return read.outcome === "found" ? read.message.data : undefined;
}

async function putRecord(tenant: string, bytes: Uint8Array): Promise<void> {
  const p = partitionOf(tenant, 32);
  const stored = await publish(world.nc, kvSubject(partitionBucket(p), `${TENANT_KIND}.${tenant}`), bytes);
  expect(stored.outcome).toBe("stored");
}

const members = async (tenant: string) =>
  Object.fromEntries((await listMembers(world.nc, 32, tenant)).map((m) => [m.run, m.member.s === "r" ? "running" : `queued ${m.member.g}`]));

it("a tenant record stored before issue 9 (fixture from 3109b83) loads on a node and its first command moves its members out: queue order kept, slots counted once, the record small", async () => {
  const fixture = JSON.parse(readFileSync(new URL("../fixtures/records/tenant-v1-membership-in-record.json", import.meta.url), "utf8")) as {
    record_msgpack_base64: string;
  };
  const old = new Uint8Array(Buffer.from(fixture.record_msgpack_base64, "base64"));
  await putRecord("legacy", old);
  const tenants = world.node.tenants;
  expect(await tenants.get("legacy")).toMatchObject({ active_runs: 3, queued_runs: 3, active_by_project: { p: 1 }, active_descendants: 4, migrating: 8 });
  // The sweep sees the members still inside the record.
  expect((await tenants.members("legacy")).map((m) => m.run).sort()).toEqual(["legacy_a", "legacy_b", "legacy_c", "legacy_d", "legacy_e", "legacy_f"]);
  // b ends: the record is migrated, then b's slot goes to e (c is older, but p is at its cap).
  expect(await tenants.runEnded("legacy", "legacy_b", "q")).toEqual({ outcome: "ended", run_id: "legacy_b", active_runs: 3 });
  expect(await members("legacy")).toEqual({ legacy_a: "running", legacy_d: "running", legacy_e: "running", legacy_c: "queued 0", legacy_f: "queued 2" });
  expect(await tenants.get("legacy")).toMatchObject({ active_runs: 3, queued_runs: 2, migrating: 0, active_descendants: 4 });
  expect(await tenants.admit("legacy", "legacy_z", "q")).toMatchObject({ outcome: "admitted", duplicate: true });
  const now = await storedRecord("legacy");
  expect(now!.length).toBeLessThan(old.length + 2_048);
  const decoded = actorRecordCodec.decode(now!);
  expect(decoded.ok && (decoded.value.snapshot as { context: Record<string, unknown> }).context).toMatchObject({ v: 2 });
  expect(decoded.ok && (decoded.value.snapshot as { context: Record<string, unknown> }).context.running).toBeUndefined();
});

it("a crash after the record was written and before its member keys: the next load writes them before anything is decided, so a run is never counted twice", async () => {
  const tenants = world.node.tenants;
  expect((await tenants.create("crash-a", { max_concurrency: 5 })).outcome).toBe("created");
  expect(await tenants.admit("crash-a", "r1", "p")).toMatchObject({ outcome: "admitted", duplicate: false, active_runs: 1 });
  // The record as it was stored by that admission: counters plus, in its outbox, r1's member key.
  const decoded = actorRecordCodec.decode((await storedRecord("crash-a"))!);
  if (!decoded.ok) throw new Error(decoded.detail);
  expect(decoded.value.outbox.map((e) => e.effect)).toContainEqual({ type: "runway.store", key: "tenant.crash-a.m.r1", value: { s: "r", p: "p" } });
  // The same record for a tenant no node has loaded yet, whose member key was never written: a process that died between the two writes.
  const copy = JSON.parse(JSON.stringify(decoded.value).replaceAll("crash-a", "crash-b")) as typeof decoded.value;
  await putRecord("crash-b", actorRecordCodec.encode(copy));
  expect(await listMembers(world.nc, 32, "crash-b")).toEqual([]);
  expect(await tenants.admit("crash-b", "r1", "p")).toMatchObject({ outcome: "admitted", duplicate: true, active_runs: 1 });
  expect(await members("crash-b")).toEqual({ r1: "running" });
  expect(await tenants.runEnded("crash-b", "r1", "p")).toEqual({ outcome: "ended", run_id: "r1", active_runs: 0 });
  expect(await tenants.get("crash-b")).toMatchObject({ active_runs: 0, queued_runs: 0 });
});

it("a tenant served here reads the member keys it wrote itself from memory: ending ten runs asks the server for none of their keys, and every count stays exact", async () => {
  const tenants = world.node.tenants;
  const host = world.node.node.host;
  expect((await tenants.create("memo", { max_concurrency: 5 })).outcome).toBe("created");
  const runs = Array.from({ length: 10 }, (_, i) => `memo_r${i}`);
  for (const run of runs) expect((await tenants.admit("memo", run, "p")).outcome).toMatch(/admitted|queued/);
  expect(await tenants.get("memo")).toMatchObject({ active_runs: 5, queued_runs: 5 });
  const before = host.ownKeyReads();
  for (const run of runs) expect(await tenants.runEnded("memo", run, "p")).toMatchObject({ outcome: "ended" });
  const after = host.ownKeyReads();
  // Each end reads the run's member key (written by its admission or promotion here): from memory.
  expect(after.hits - before.hits).toBeGreaterThanOrEqual(runs.length);
  expect(after.misses - before.misses).toBe(0);
  expect(await members("memo")).toEqual({});
  expect(await tenants.get("memo")).toMatchObject({ active_runs: 0, queued_runs: 0 });
  // A late duplicate admission of an ended run is still answered as one and not counted.
  expect(await tenants.admit("memo", "memo_r0", "p")).toMatchObject({ duplicate: true });
  expect(await tenants.get("memo")).toMatchObject({ active_runs: 0, queued_runs: 0 });
});

it("commands that queue up at a tenant share one write, each deciding on the member keys of the ones before it: 300 admissions at once, 40 of them twice, count exactly", async () => {
  const tenants = world.node.tenants;
  const host = world.node.node.host;
  expect((await tenants.create("batch", { max_concurrency: 200 })).outcome).toBe("created");
  const runs = Array.from({ length: 300 }, (_, i) => `batch_r${i}`);
  const writes = host.stats.writes;
  // Each of the first 40 is admitted twice at once: the second must see the first's member key, not yet stored.
  const answers = await Promise.all([...runs, ...runs.slice(0, 40)].map((run) => tenants.admit("batch", run, "p")));
  const tenantWrites = host.stats.writes - writes;
  expect(answers.filter((a) => a.outcome === "admitted" && !(a as { duplicate?: boolean }).duplicate)).toHaveLength(200);
  expect(answers.filter((a) => a.outcome === "queued" && !(a as { duplicate?: boolean }).duplicate)).toHaveLength(100);
  expect(answers.filter((a) => (a as { duplicate?: boolean }).duplicate)).toHaveLength(40);
  expect(await tenants.get("batch")).toMatchObject({ active_runs: 200, queued_runs: 100, starts_today: 300 });
  // Fewer record writes than commands: they were applied in batches (each record write counted once).
  expect(tenantWrites).toBeLessThan(340);
  // Every end counted once, the queue drained into the freed slots.
  await Promise.all(runs.map((run) => tenants.runEnded("batch", run, "p")));
  expect(await tenants.get("batch")).toMatchObject({ active_runs: 0, queued_runs: 0 });
  expect(await members("batch")).toEqual({});
});

it("a tenant's scheduling policy, stale, is read again once however many grants ask for it before the read is back", async () => {
  const tenants = world.node.tenants;
  expect((await tenants.create("policy-a", { max_concurrency: 5 })).outcome).toBe("created");
  await tenants.get("policy-a");
  const p = partitionOf("policy-a", 32);
  const subject = kvSubject(partitionBucket(p), `${TENANT_KIND}.policy-a`);
  let reads = 0;
  const sub = world.nc.subscribe(`$JS.API.STREAM.MSG.GET.${partitionStream(p)}`, {
    callback: (_err, msg) => void (new TextDecoder().decode(msg.data).includes(subject) && reads++),
  });
  await world.nc.flush();
  // A burst of grants (a wide map's items offered at once) each asking with the view out of date.
  for (let i = 0; i < 50; i++) expect(tenants.policy("policy-a", 0)).toMatchObject({ max_concurrency: 5 });
  await waitFor(() => reads > 0 || undefined, { timeoutMs: 5_000, describe: "the refresh's read" });
  // Everything the node sent is at the server, and everything the server forwarded is here.
  await world.node.node.nc.flush();
  await world.nc.flush();
  sub.unsubscribe();
  expect(reads).toBe(1);
});

it("a tenant's decision writes its record and the member keys it sets as one chain: each key stored right behind the message before it", async () => {
  const tenants = world.node.tenants;
  expect((await tenants.create("chain-a", { max_concurrency: 5 })).outcome).toBe("created");
  expect(await tenants.admit("chain-a", "r1", "p")).toMatchObject({ outcome: "admitted", duplicate: false });
  const p = partitionOf("chain-a", 32);
  const record = await readLast(world.nc, partitionStream(p), kvSubject(partitionBucket(p), `${TENANT_KIND}.chain-a`));
  const member = await readLast(world.nc, partitionStream(p), kvSubject(partitionBucket(p), `${TENANT_KIND}.chain-a.m.r1`));
  if (record.outcome !== "found" || member.outcome !== "found") throw new Error("record or member key missing");
  // The key named its record as the stream's last message (publishChain): one round trip, never ahead of it.
  expect(member.message.seq).toBe(record.message.seq + 1);
  expect(record.message.headers["Nats-Msg-Id"]).toBeDefined();
  expect(member.message.headers["Nats-Expected-Last-Msg-Id"]).toBe(record.message.headers["Nats-Msg-Id"]);
});
