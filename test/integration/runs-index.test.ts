import { expect, it } from "vitest";
import { headers } from "@nats-io/transport-node";
import { buildLiveIndex, LIVE_BUCKET, LiveRunIndex, recoverPartitionPatiently, RUN_KIND, RUNS_STREAM, runIdFor, startKey } from "../../actors/index.js";
import { RUN_RECORD } from "../../actors/run/actor.js";
import { endedSubject, RunIndex } from "../../actors/run/runs-index.js";
import type { RecoveryLog } from "../../actors/engine/recovery.js";
import { readActor } from "../../runtime/index.js";
import { RunwayClient } from "../../cluster/client.js";
import { createLogger, kvSubject, partitionBucket, partitionOf, partitionStream, publish, readJournal, readJournalTail } from "../../runtime/index.js";
import { waitFor } from "../harness/index.js";
import { settled, workflowWorld, type RunAnswer } from "./workflow-support.js";

/**
 * Issue 9: scans bounded by live work. runs.list pages through the runs index with a cursor;
 * the sweep (and recovery at claim) read the live-run index, not every stored run; an ended run
 * is compacted to its final summary after the ended-run retention (short here: 2 s).
 */
const RETENTION_MS = 2_000;
const world = workflowWorld({ name: "index-node", sweepIntervalMs: false, endedRunRetentionMs: RETENTION_MS });

async function tenantWith(id: string): Promise<RunwayClient> {
  const client = new RunwayClient(world.nc, id);
  expect((await client.createTenant(id)).outcome).toMatch(/created|exists/);
  expect((await client.putDefinition({ name: "one", nodes: [{ id: "a", kind: "code", handler: "noop" }] })).outcome).toMatch(/published|unchanged/);
  expect((await client.putDefinition({ name: "nap", nodes: [{ id: "s", kind: "sleep", duration_ms: 3_600_000 }] })).outcome).toMatch(/published|unchanged/);
  return client;
}

const started = async (client: RunwayClient, definition: string, extra: Record<string, unknown> = {}) => {
  const answer = await client.startRun({ definition, ...extra });
  expect(answer.outcome, JSON.stringify(answer)).toBe("started");
  return (answer.run as RunAnswer).id;
};

type Page = { outcome: string; runs: RunAnswer[]; next_cursor: string | null };

it("runs.list pages through a tenant's runs with a cursor, each once: the runs it did not count at their start (children) in creation order, then the ones it counts, live ones in admission order, then ended ones in the order they ended; another tenant's never; a status filter keeps a page's matches", async () => {
  const a = await tenantWith("la");
  const b = await tenantWith("lb");
  expect((await a.putDefinition({ name: "parent", nodes: [{ id: "c", kind: "subworkflow", workflow: "one" }] })).outcome).toMatch(/published|unchanged/);
  const ended: string[] = [];
  const napping: string[] = [];
  const others: string[] = [];
  for (let i = 0; i < 4; i++) {
    const id = await started(a, "one");
    // Each ends before the next starts: the order they end is the order they started.
    await settled(a, id);
    ended.push(id);
    napping.push(await started(a, "nap"));
    if (i % 3 === 0) others.push(await started(b, "one"));
  }
  const parent = await started(a, "parent");
  await settled(a, parent);
  for (const id of others) await settled(b, id);
  const listedAll = async (limit: number) => {
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page = (await a.listRuns({ limit, ...(cursor ? { cursor } : {}) })) as unknown as Page;
      expect(page.outcome).toBe("ok");
      expect(page.runs.length).toBeLessThanOrEqual(limit);
      seen.push(...page.runs.map((r) => r.id));
      cursor = page.next_cursor;
      pages++;
    } while (cursor !== null && pages < 20);
    return seen;
  };
  // A run's tenant removes its member key once it hears of the end, after the run's record says
  // it ended: until then the run is in both the live and the ended part, as a client paging meanwhile may see it.
  const seen = await waitFor(
    async () => {
      const listed = await listedAll(3);
      return new Set(listed).size === listed.length ? listed : undefined;
    },
    { timeoutMs: 10_000, describe: "every ended run's member key to be removed by its tenant" },
  );
  // The child (its tenant does not count it) first, then the live counted runs, then the ended ones (the parent ended last).
  const children = seen.filter((id) => ![...ended, ...napping, parent].includes(id));
  expect(children).toHaveLength(1);
  expect(((await a.getRun(children[0]!)).run as RunAnswer).status).toBe("succeeded");
  // Only the child has a `.c` entry: a run its tenant counts is listed by its member key, one server operation less.
  const jsm = await (await import("@nats-io/jetstream")).jetstreamManager(world.nc);
  const createdEntry = async (id: string) => (await jsm.streams.getMessage(RUNS_STREAM, { last_by_subj: `rw.runs.la.${id}.c` }).catch(() => null)) !== null;
  expect(await createdEntry(children[0]!)).toBe(true);
  for (const id of [...ended, ...napping, parent]) expect(await createdEntry(id)).toBe(false);
  expect(seen).toEqual([...children, ...napping, ...ended, parent]);
  expect(await listedAll(1)).toEqual(seen);
  expect(await listedAll(500)).toEqual(seen);
  const succeeded = (await a.listRuns({ status: "succeeded", limit: 500 })) as unknown as Page;
  expect(succeeded.runs.map((r) => r.id)).toEqual([...children, ...ended, parent]);
  expect(((await a.listRuns({ status: "waiting", limit: 500 })) as unknown as Page).runs.map((r) => r.id)).toEqual(napping);
  // A status reads only the parts that can hold it: a live one never the ended runs, an ended one never the live runs.
  const cursorsOf = async (status: string) => {
    const cursors: string[] = [];
    for (let cursor: string | null = null, pages = 0; pages === 0 || (cursor !== null && pages < 30); pages++) {
      const page = (await a.listRuns({ status, limit: 1, ...(cursor ? { cursor } : {}) })) as unknown as Page;
      if (page.next_cursor) cursors.push(page.next_cursor);
      cursor = page.next_cursor;
    }
    return cursors;
  };
  expect((await cursorsOf("waiting")).some((c) => c.startsWith("e"))).toBe(false);
  expect((await cursorsOf("succeeded")).some((c) => c.startsWith("m"))).toBe(false);
  expect((await cursorsOf("succeeded")).some((c) => c.startsWith("e"))).toBe(true);
  expect(((await b.listRuns()) as unknown as Page).runs).toHaveLength(2);
  // A cursor is a part of the index and a sequence (a bare sequence, as given before parts, is one of the first): anything else is invalid_input.
  expect((await a.listRuns({ cursor: "abc" })).outcome).toBe("invalid_input");
  expect((await a.listRuns({ cursor: "x12" })).outcome).toBe("invalid_input");
  expect((await a.listRuns({ cursor: "1" })).outcome).toBe("ok");
  for (const id of napping) expect((await a.cancelRun(id)).outcome).toBe("cancelled");
});

it("a run in both the live and the ended part (ended, its tenant not yet told) is listed once on a page (A2A-4 saw a task's run listed twice)", async () => {
  const a = await tenantWith("dup");
  const id = await started(a, "nap");
  // Its end summary published as the run's end would publish it, its member key still there.
  const summary = { ...((await a.getRun(id)).run as RunAnswer as object), counted: true };
  expect((await publish(world.nc, endedSubject("dup", id), new TextEncoder().encode(JSON.stringify(summary)))).outcome).toBe("stored");
  const page = (await a.listRuns({ limit: 500 })) as unknown as Page;
  expect(page.runs.map((r) => r.id)).toEqual([id]);
  expect((await a.cancelRun(id)).outcome).toBe("cancelled");
});

it("a run's journal read from its stream's leader (readJournalTail, for the tail a replica behind it missed) holds the records a direct read does, from any point on", async () => {
  const a = await tenantWith("tail");
  const id = await started(a, "one");
  await settled(a, id);
  const direct = await readJournal(world.nc, 32, RUN_KIND, id);
  if (direct.outcome !== "read") throw new Error(direct.outcome);
  expect(direct.entries.length).toBeGreaterThan(1);
  const whole = await readJournalTail(world.nc, 32, RUN_KIND, id, 1);
  expect(whole).toEqual({ outcome: "read", entries: direct.entries, reset: false });
  const last = direct.entries.at(-1)!;
  expect(await readJournalTail(world.nc, 32, RUN_KIND, id, last.seq)).toEqual({ outcome: "read", entries: [last], reset: false });
  expect(await readJournalTail(world.nc, 32, RUN_KIND, id, last.seq + 1)).toEqual({ outcome: "read", entries: [], reset: false });
});

it("an ended run (head and journal) is compacted to its final summary after the retention: runs.get answers the summary, runs.list still lists it, and its start key still answers duplicate", async () => {
  const client = await tenantWith("rt");
  const key = { source: "queue", delivery_id: "m-1" };
  const id = await started(client, "one", { start_key: key });
  expect((await settled(client, id)).status).toBe("succeeded");
  // Its journal is kept whole for the retention; then the sweep purges its key (head and journal).
  const journal = await readJournal(world.nc, 32, RUN_KIND, id);
  expect(journal.outcome === "read" && journal.entries.length).toBeGreaterThan(1);
  await waitFor(
    async () => (await world.node.sweeper.pass(), (await readActor({ nc: world.nc, partitions: 32 }, RUN_RECORD, id)).outcome === "missing") || undefined,
    {
      timeoutMs: 20_000,
      describe: `run ${id}'s record to be compacted`,
    },
  );
  const got = await client.getRun(id);
  expect(got).toMatchObject({ outcome: "found", run: { id, status: "succeeded", compacted: true, definition: { name: "one" }, nodes: {}, result: null } });
  const listed = (await client.listRuns()) as unknown as Page;
  expect(listed.runs.map((r) => r.id)).toContain(id);
  const again = await client.startRun({ definition: "one", start_key: key });
  expect(again).toMatchObject({ outcome: "duplicate", run: { id, status: "succeeded", compacted: true } });
  // Commands find no record now: the run is still known (not `run_not_found`), and ended.
  expect(await client.cancelRun(id)).toMatchObject({ outcome: "not_cancellable", run: { id, status: "succeeded", compacted: true } });
  expect(await client.decide(`${id}:a`, "approve")).toEqual({ outcome: "run_not_waiting" });
  expect(await client.signal(id, "go")).toEqual({ outcome: "run_not_waiting" });
  expect((await client.getTenant()).tenant).toMatchObject({ active_runs: 0, queued_runs: 0 });
});

it("the sweep reads the live runs only: with 20 runs ended and 2 waiting, a pass reads 2 entries", async () => {
  const client = await tenantWith("lv");
  const live = new LiveRunIndex(world.nc, 32);
  const total = async () => (await Promise.all(Array.from({ length: 32 }, (_, p) => live.list(p)))).flat();
  const done: string[] = [];
  for (let i = 0; i < 20; i++) done.push(await started(client, "one"));
  for (const id of done) await settled(client, id);
  const naps = [await started(client, "nap"), await started(client, "nap")];
  // An ended run's entry goes with the last of its outbox: wait for the index, not for time.
  await waitFor(async () => ((await total()).sort().join() === [...naps].sort().join() ? true : undefined), {
    timeoutMs: 10_000,
    describe: "the live-run index to hold the two waiting runs only",
  });
  const report = await world.node.sweeper.pass();
  expect(report).toMatchObject({ scanned: 2, live: 2, errors: 0 });
  for (const id of naps) expect((await client.cancelRun(id)).outcome).toBe("cancelled");
  await waitFor(async () => ((await total()).length === 0 ? true : undefined), { timeoutMs: 10_000, describe: "the index to empty" });
});

it("runs stored before the live-run index existed are indexed once by their partition's owner: the live ones listed, each one in the runs index", async () => {
  const client = await tenantWith("old");
  const id = await started(client, "nap");
  const p = partitionOf(id, 32);
  // As before the upgrade: no index entry, no mark that the partition was indexed, nothing in the runs index.
  const purge = headers();
  purge.set("KV-Operation", "PURGE");
  purge.set("Nats-Rollup", "sub");
  for (const key of [`p${p}.${id}`, `built.p${p}`]) await publish(world.nc, kvSubject(LIVE_BUCKET, key), new Uint8Array(), { headers: purge });
  const jsm = await (await import("@nats-io/jetstream")).jetstreamManager(world.nc);
  await jsm.streams.purge(RUNS_STREAM, { filter: `rw.runs.old.>` });
  const live = new LiveRunIndex(world.nc, 32);
  const created = async () => (await jsm.streams.getMessage(RUNS_STREAM, { last_by_subj: `rw.runs.old.${id}.c` }).catch(() => null)) !== null;
  expect(await live.indexed(p)).not.toContain(id);
  expect(await created()).toBe(false);
  const log = world.node.node.host.logOf(p)!;
  // The store does not answer for the run's record: the partition is not marked built with the run left out, and the next try indexes it.
  const unanswered = {
    epoch: log.epoch,
    read: (key: string) => (key.endsWith(id) ? Promise.resolve({ outcome: "unavailable" as const, detail: "timeout" }) : log.read(key)),
  };
  await expect(buildLiveIndex({ nc: world.nc, live, logger: createLogger("test", "error") }, p, unanswered)).rejects.toThrow(/not read \(timeout\)/);
  expect(await live.indexed(p)).not.toContain(id);
  await buildLiveIndex({ nc: world.nc, live, logger: createLogger("test", "error") }, p, log);
  expect(await live.indexed(p)).toContain(id);
  expect(await created()).toBe(true);
  // Its tenant counts it: listed once, by its member key, though it has a `.c` entry now too.
  expect(((await client.listRuns()) as unknown as Page).runs.map((r) => r.id)).toEqual([id]);
  expect((await client.cancelRun(id)).outcome).toBe("cancelled");
});

it("lists a partition's live runs by one batched get, past the server's 1,024 keys for it by consumer, and the same either way", async () => {
  const purge = headers();
  purge.set("KV-Operation", "PURGE");
  purge.set("Nats-Rollup", "sub");
  const fill = async (partition: number, n: number) => {
    const ids = Array.from({ length: n }, (_, i) => `run_list${partition}x${i}`);
    for (const id of ids) await publish(world.nc, kvSubject(LIVE_BUCKET, `p${partition}.${id}`), new TextEncoder().encode("{}"));
    // A removed entry (its purge marker is the key's last message) is not listed.
    await publish(world.nc, kvSubject(LIVE_BUCKET, `p${partition}.${ids[0]}`), new Uint8Array(), { headers: purge });
    return ids.slice(1).sort();
  };
  // Partitions past the node's 32: no run of the world lands there.
  const few = await fill(900, 10);
  const many = await fill(901, 1_100);
  const direct = new LiveRunIndex(world.nc, 32);
  const replicated = new LiveRunIndex(world.nc, 32, 3);
  expect((await direct.list(900)).sort()).toEqual(few);
  expect((await replicated.list(900)).sort()).toEqual(few);
  expect((await direct.list(901)).sort()).toEqual(many);
  expect((await replicated.list(901)).sort()).toEqual(many);
  expect(await direct.list(902)).toEqual([]);
});

it("lists the runs tenants count by their member keys, from every partition bucket, past 1,024 in one bucket by consumer, and the same either way", async () => {
  // Member keys of a tenant with no record (no sweep reads it), in one bucket, for runs of every partition.
  const bucket = partitionBucket(7);
  const runs = Array.from({ length: 1_100 }, (_, i) => `ghostlist_${i}`);
  for (const run of runs)
    await publish(world.nc, kvSubject(bucket, `tenant.ghostlist.m.${run}`), new TextEncoder().encode(JSON.stringify({ s: "r", p: "default" })));
  // A removed member is not listed.
  const purge = headers();
  purge.set("KV-Operation", "PURGE");
  purge.set("Nats-Rollup", "sub");
  await publish(world.nc, kvSubject(bucket, `tenant.ghostlist.m.${runs[0]}`), new Uint8Array(), { headers: purge });
  const want = (p: number) =>
    runs
      .slice(1)
      .filter((r) => partitionOf(r, 32) === p)
      .sort();
  const direct = new LiveRunIndex(world.nc, 32);
  const replicated = new LiveRunIndex(world.nc, 32, 3);
  try {
    // Concurrent callers share listings.
    const [a, b] = await Promise.all([
      Promise.all(Array.from({ length: 32 }, (_, p) => direct.entries(p))),
      Promise.all(Array.from({ length: 32 }, (_, p) => replicated.entries(p))),
    ]);
    for (let p = 0; p < 32; p++) {
      expect(a[p]!.counted.filter((r) => r.startsWith("ghostlist_")).sort()).toEqual(want(p));
      expect(b[p]!.counted.filter((r) => r.startsWith("ghostlist_")).sort()).toEqual(want(p));
    }
  } finally {
    const jsm = await (await import("@nats-io/jetstream")).jetstreamManager(world.nc);
    await jsm.streams.purge(partitionStream(7), { filter: kvSubject(bucket, "tenant.ghostlist.>") });
  }
});

it("a run its tenant counts has no live-index key of its own: its member key lists it until its tenant hears of its end; a run a person admits first has a key; a refused start leaves nothing", async () => {
  const client = await tenantWith("refused");
  const live = new LiveRunIndex(world.nc, 32);
  const id = await started(client, "nap", { start_key: { source: "t", delivery_id: "in" } });
  expect(id).toBe(runIdFor("refused", startKey("t", "in")));
  const p = partitionOf(id, 32);
  const entries = await live.entries(p);
  expect(entries.indexed).not.toContain(id);
  expect(entries.counted).toContain(id);
  expect(await live.list(p)).toContain(id);
  // A run a person admits first asks its tenant only once approved: it has a key from its start.
  expect(
    (
      await client.putDefinition({
        name: "asked",
        admission: { approval: { prompt: "Start?", group: "ops", timeout_ms: 3_600_000 } },
        nodes: [{ id: "a", kind: "code", handler: "noop" }],
      })
    ).outcome,
  ).toMatch(/published|unchanged/);
  const held = await started(client, "asked");
  expect(await live.indexed(partitionOf(held, 32))).toContain(held);
  expect((await client.setTenantState("refused", "kill", "test")).outcome).toBe("killed");
  const refusedId = runIdFor("refused", startKey("t", "out"));
  expect((await client.startRun({ definition: "nap", start_key: { source: "t", delivery_id: "out" } })).outcome).toBe("tenant_killed");
  expect(await live.list(partitionOf(refusedId, 32))).not.toContain(refusedId);
  expect((await client.setTenantState("refused", "resume", "test")).outcome).toBe("active");
  for (const run of [id, held]) expect((await client.cancelRun(run)).outcome).toBe("cancelled");
  // The end reaches the tenant after the run's own write: wait for the index, not for time.
  await waitFor(async () => ((await live.list(p)).includes(id) || (await live.list(partitionOf(held, 32))).includes(held) ? undefined : true), {
    timeoutMs: 10_000,
    describe: "both runs to leave the live-run index",
  });
});

it("recovery at a claim tries again while listing the partition's runs fails and the partition is still served; it stops when it is not, and gives up after eight tries", async () => {
  const p = 3;
  const log = world.node.node.host.logOf(p)!;
  /** A live-run index whose listing fails `failures` times first. */
  const failing = (failures: number) => {
    const live = new LiveRunIndex(world.nc, 32);
    let calls = 0;
    const entries = live.entries.bind(live);
    live.entries = (partition: number) => (++calls <= failures ? Promise.reject(new Error("store unavailable")) : entries(partition));
    return { live, calls: () => calls };
  };
  const slept: number[] = [];
  const deps = (live: LiveRunIndex, serving: () => boolean) => ({
    nc: world.nc,
    host: world.node.node.host,
    logger: createLogger("test", "error"),
    live,
    now: () => Date.now(),
    serving,
    sleep: (ms: number) => {
      slept.push(ms);
      return Promise.resolve();
    },
  });
  const twice = failing(2);
  expect(
    await recoverPartitionPatiently(
      deps(twice.live, () => true),
      p,
      log,
    ),
  ).toBe(0);
  expect(twice.calls()).toBe(3);
  expect(slept).toEqual([100, 200]);
  // The partition went elsewhere meanwhile: nothing more to recover here.
  let served = true;
  const moved = failing(5);
  const gone = recoverPartitionPatiently({ ...deps(moved.live, () => served), sleep: async () => void (served = false) }, p, log);
  expect(await gone).toBe(0);
  expect(moved.calls()).toBe(1);
  const always = failing(100);
  await expect(
    recoverPartitionPatiently(
      deps(always.live, () => true),
      p,
      log,
    ),
  ).rejects.toThrow(/store unavailable/);
  expect(always.calls()).toBe(8);
});

it("recovery at a claim reads again a run whose record the store did not answer for, and a run whose command a store fault kept, and recovers both", async () => {
  const client = await tenantWith("lost");
  expect((await client.putDefinition({ name: "long", nodes: [{ id: "w", kind: "code", handler: "slow", input: { ms: 60_000 } }] })).outcome).toMatch(
    /published|unchanged/,
  );
  // Two runs on one partition, each with an attempt running; this process is made to hold none of them, as after a takeover.
  const first = await started(client, "long");
  const p = partitionOf(first, 32);
  // A start key whose run lands on the same partition, found before anything is started.
  let i = 0;
  while (partitionOf(runIdFor("lost", startKey("lost", `d${i}`)), 32) !== p) i++;
  const second = await started(client, "long", { start_key: { source: "lost", delivery_id: `d${i}` } });
  const log = world.node.node.host.logOf(p)!;
  const running = async (id: string) => ((await client.getRun(id)).run as RunAnswer).status === "running";
  await waitFor(async () => ((await running(first)) && (await running(second)) ? true : undefined), { timeoutMs: 10_000, describe: "both runs running" });
  const reads = new Map<string, number>();
  const flaky: RecoveryLog = {
    settled: false,
    epoch: log.epoch,
    read: (key: string) => {
      const n = (reads.get(key) ?? 0) + 1;
      reads.set(key, n);
      return key.endsWith(first) && n <= 2 ? Promise.resolve({ outcome: "unavailable" as const, detail: "timeout" }) : log.read(key);
    },
  };
  const host = world.node.node.host;
  let kept = 0;
  const faulty = Object.create(host) as typeof host;
  faulty.dispatch = (address, event, id, options) =>
    address.id === second && kept++ === 0 ? Promise.resolve({ outcome: "kept", reason: "fault" }) : host.dispatch(address, event, id, options);
  // As after a takeover: this process holds none of their attempts (they run on, as a lost node's would).
  const { executor, dispatcher } = world.node;
  const holds = { executor: executor.alive, dispatcher: dispatcher?.alive };
  executor.alive = () => [];
  if (dispatcher) dispatcher.alive = () => [];
  const slept: number[] = [];
  let recovered: number;
  try {
    recovered = await recoverPartitionPatiently(
      {
        nc: world.nc,
        host: faulty,
        logger: createLogger("test", "error"),
        live: new LiveRunIndex(world.nc, 32),
        now: () => Date.now(),
        serving: () => true,
        sleep: (ms: number) => {
          slept.push(ms);
          return Promise.resolve();
        },
      },
      p,
      flaky,
    );
  } finally {
    executor.alive = holds.executor;
    if (dispatcher) dispatcher.alive = holds.dispatcher!;
  }
  expect(recovered).toBe(2);
  // Every run reached: a release now tells the next owner it is a hand-over.
  expect(flaky.settled).toBe(true);
  expect(reads.get(`${RUN_KIND}.${first}`)).toBe(3);
  expect(kept).toBe(2);
  expect(slept).toEqual([100, 200]);
  // Each lost attempt failed as worker_lost, its retry offered (the pool's threads still run the first ones).
  for (const id of [first, second]) {
    const journal = await readJournal(world.nc, 32, RUN_KIND, id);
    expect(journal.outcome === "read" && JSON.stringify(journal.entries.at(-1)?.record.outbox)).toContain("step_retrying");
    expect((await client.cancelRun(id)).outcome).toBe("cancelled");
  }
});

it("a recovery still under way after 2 s says so, and one cut short by a hand-over names the live runs it left to the next owner (soak, 30 minutes: a run held up 8 s)", async () => {
  const client = await tenantWith("handed");
  expect((await client.putDefinition({ name: "long", nodes: [{ id: "w", kind: "code", handler: "slow", input: { ms: 60_000 } }] })).outcome).toMatch(
    /published|unchanged/,
  );
  const id = await started(client, "long");
  const p = partitionOf(id, 32);
  await waitFor(async () => (((await client.getRun(id)).run as RunAnswer).status === "running" ? true : undefined), {
    timeoutMs: 10_000,
    describe: "the run running",
  });
  // The listing is held until the slow warning is out; then the partition has gone to another node.
  let listed!: () => void;
  const gate = new Promise<void>((r) => (listed = r));
  const live = new LiveRunIndex(world.nc, 32);
  const entries = live.entries.bind(live);
  live.entries = (partition: number) => gate.then(() => entries(partition));
  const host = world.node.node.host;
  const gone = Object.create(host) as typeof host;
  gone.dispatch = () => Promise.resolve({ outcome: "not_served" });
  const lines: { msg: string; runs?: string[]; partition?: number; stage?: string; listed?: number; settled?: number }[] = [];
  const served = world.node.node.host.logOf(p)!;
  const log: RecoveryLog = { epoch: served.epoch, read: (key) => served.read(key), settled: false };
  const recovery = recoverPartitionPatiently(
    {
      nc: world.nc,
      host: gone,
      logger: createLogger("test", "info", (line) => lines.push(JSON.parse(line) as (typeof lines)[number])),
      live,
      now: () => Date.now(),
      serving: () => false,
    },
    p,
    log,
  );
  try {
    await waitFor(() => (lines.some((l) => l.msg === "recovery not done yet" && l.partition === p) ? true : undefined), {
      timeoutMs: 10_000,
      describe: "the slow recovery's warning",
    });
  } finally {
    listed();
  }
  expect(await recovery).toBe(0);
  // Cut short: the run's attempt died with no one failing it, so a release must not call the next claim a hand-over.
  expect(log.settled).toBe(false);
  // The slow one said where it was (listing the partition's runs), and when it was done.
  expect(lines.find((l) => l.msg === "recovery not done yet")?.stage).toBe("listing");
  const cut = lines.find((l) => l.msg.startsWith("recovery cut short"));
  expect(cut?.partition).toBe(p);
  expect(cut?.runs).toContain(id);
  const done = lines.find((l) => l.msg === "slow recovery done");
  expect(done).toMatchObject({ partition: p, stage: "settling" });
  expect(done?.settled).toBe(done?.listed);
  expect((await client.cancelRun(id)).outcome).toBe("cancelled");
});

it("a page of a tenant's live runs costs a few reads however many of its runs just ended: the removal markers of 2,000 runs ended within the minute are read in batches of 1,000, not a page's worth at a time", async () => {
  const tenant = "ghostpage";
  const bucket = partitionBucket(partitionOf(tenant, 32));
  // A member key is removed as the tenant removes it: a purge rolling up its history (its marker then lives a minute).
  const removal = () => {
    const h = headers();
    h.set("KV-Operation", "PURGE");
    h.set("Nats-Rollup", "sub");
    return h;
  };
  // 2,000 runs that were counted and ended within the minute (each member key's one message is its removal), then 3 live ones.
  for (let i = 0; i < 2_000; i++) {
    const key = kvSubject(bucket, `tenant.${tenant}.m.${tenant}_ended${i}`);
    await publish(world.nc, key, new TextEncoder().encode(JSON.stringify({ s: "r", p: "default" })));
    await publish(world.nc, key, new Uint8Array(), { headers: removal() });
  }
  const live = ["a", "b", "c"].map((x) => `${tenant}_live_${x}`);
  for (const run of live)
    await publish(world.nc, kvSubject(bucket, `tenant.${tenant}.m.${run}`), new TextEncoder().encode(JSON.stringify({ s: "r", p: "default" })));
  // What a page costs, seen on the wire: the direct-get batch requests for this tenant's member keys
  // (a connection receives what it publishes, so the index's own requests pass this subscription).
  let reads = 0;
  const wire = world.nc.subscribe(`$JS.API.DIRECT.GET.${partitionStream(partitionOf(tenant, 32))}`, {
    callback: (_err, m) => {
      if (m.string().includes(`tenant.${tenant}.m.`)) reads++;
    },
  });
  try {
    await world.nc.flush();
    const index = new RunIndex(world.nc, 32);
    const page = await index.page(tenant, undefined, 50, ["m"]);
    expect(page.entries.map((e) => e.run)).toEqual(live);
    expect(page.next).toBeNull();
    await world.nc.flush();
    // 2,003 messages: three reads of at most 1,000 (a page's worth of 50 at a time would be 41).
    expect(reads).toBeGreaterThanOrEqual(1);
    expect(reads).toBeLessThanOrEqual(3);
    // Paging still takes each run once when a page is smaller than what one read returns.
    const small = new RunIndex(world.nc, 32);
    const first = await small.page(tenant, undefined, 2, ["m"]);
    expect(first.entries.map((e) => e.run)).toEqual(live.slice(0, 2));
    const second = await small.page(tenant, first.next!, 2, ["m"]);
    expect(second.entries.map((e) => e.run)).toEqual(live.slice(2));
    expect(second.next).toBeNull();
  } finally {
    wire.unsubscribe();
    const jsm = await (await import("@nats-io/jetstream")).jetstreamManager(world.nc);
    await jsm.streams.purge(partitionStream(partitionOf(tenant, 32)), { filter: kvSubject(bucket, `tenant.${tenant}.>`) });
  }
});
