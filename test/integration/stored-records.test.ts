// Issue 9, item 5 (acceptance 5): stored records from the previous schema version load and
// continue to the end. The records of test/fixtures/records/v1 were written by the code of the
// commit their index names; each test puts their exact bytes into a fresh server's buckets,
// lets a node of today's code load them, hands it the event the record was waiting for and
// checks where the run or tenant ends up. Nothing here decodes a record: what a record holds is
// read from the fixture index and from the API's answers, so the test outlives format changes.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { Kvm } from "@nats-io/kv";
import { RunwayClient, type ApiAnswer } from "../../cluster/client.js";
import { startRunwayNode, type RunwayWorkflowNode } from "../../cluster/runway-node.js";
import { DEFINITIONS_BUCKET, ensureDomainTopology } from "../../actors/index.js";
import { createLogger, partitionBucket, partitionOf, systemClock, type Clock } from "../../runtime/index.js";
import { DEFAULT_TOPOLOGY, ensureTopology } from "../../runtime/topology.js";
import { startServer, waitFor, type NatsServerHandle } from "../harness/index.js";
import { settled, type RunAnswer } from "./workflow-support.js";

const V1 = new URL("../fixtures/records/v1/", import.meta.url);
const HANDLERS = fileURLToPath(new URL("../fixtures/records/handlers.ts", import.meta.url));

interface StepNote {
  node: string;
  item?: number;
  status: string;
  attempt: number;
  lease_epoch: number;
  not_before?: number | null;
}
interface RecordNote {
  key: string;
  kind: "run" | "tenant";
  id: string;
  role: string;
  file: string;
  sha256: string;
  partition: number;
  bucket: string;
  envelope: { schema: string; version: number };
  snapshot_version: number;
  state: string;
  steps?: StepNote[];
  run?: { tenant: string; parent: string | null; error: { code: string } | null; result: unknown };
}
interface Scenario {
  name: string;
  tenant: string;
  records: string[];
  defs: string[];
}
interface Index {
  partitions: number;
  scenarios: Scenario[];
  records: RecordNote[];
  definitions: { key: string; file: string }[];
}

const index = JSON.parse(readFileSync(new URL("index.json", V1), "utf8")) as Index;
const bytesOf = (file: string) => new Uint8Array(readFileSync(new URL(file, V1)));

function scenario(name: string): Scenario {
  const s = index.scenarios.find((x) => x.name === name);
  if (!s) throw new Error(`no fixture scenario ${name}`);
  return s;
}

/** The record of `role` in scenario `name`. */
function record(name: string, role: string): RecordNote {
  const s = scenario(name);
  const r = index.records.find((x) => s.records.includes(x.key) && x.role === role);
  if (!r) throw new Error(`no record ${role} in fixture scenario ${name}`);
  return r;
}

/** The stored attempt of `node` (`item`): what its lease holder would report with. */
function stored(r: RecordNote, node: string, item?: number): StepNote {
  const s = r.steps?.find((x) => x.node === node && x.item === item);
  if (!s) throw new Error(`${r.key}: no stored step ${node}${item === undefined ? "" : `[${item}]`}`);
  return s;
}

/**
 * Puts a scenario's records where the runtime keeps them: its definition records in `rw_defs`,
 * each actor record in the partition bucket the runtime's partition function gives its id,
 * under `<kind>.<id>`, byte for byte.
 */
async function store(nc: NatsConnection, name: string): Promise<void> {
  const s = scenario(name);
  const kvm = new Kvm(nc);
  const defs = await kvm.open(DEFINITIONS_BUCKET);
  for (const key of s.defs) {
    const file = index.definitions.find((d) => d.key === key)?.file;
    if (!file) throw new Error(`no definition record ${key}`);
    await defs.put(key, bytesOf(file));
  }
  for (const key of s.records) {
    const r = index.records.find((x) => x.key === key)!;
    const bucket = await kvm.open(partitionBucket(partitionOf(r.id, index.partitions)));
    await bucket.put(key, bytesOf(r.file));
  }
}

/**
 * The node's clock runs a week ahead of the wall clock, so every instant a fixture stored (a
 * lease's expiry, a backoff, a wake-up) is long past for it, as it is for a node that loads the
 * records months after they were written, and the tests behave the same right after a
 * regeneration. Timers the node sets for itself land a week out and never fire here.
 */
const LATER_MS = 7 * 24 * 3_600_000;
const later: Clock = { now: () => systemClock.now() + LATER_MS, monotonic: () => systemClock.monotonic() };

/** A server and one node of today's code with the fixtures' handlers; the sweep only on demand. */
function world(options: { before?: (nc: NatsConnection) => Promise<void>; clock?: Clock } = {}) {
  const w = {
    server: undefined as unknown as NatsServerHandle,
    node: undefined as unknown as RunwayWorkflowNode,
    nc: undefined as unknown as NatsConnection,
    client: (tenant: string) => new RunwayClient(w.nc, tenant),
    /** The node's last log lines (each partition's recovery pass among them), for a failure to show; errors also go to stderr. */
    log: [] as string[],
  };
  const sink = (line: string) => {
    w.log.push(line);
    if (w.log.length > 500) w.log.shift();
    if (line.includes('"level":"error"')) process.stderr.write(`${line}\n`);
  };
  beforeAll(async () => {
    w.server = await startServer();
    w.nc = await connect(w.server.connectOptions());
    await options.before?.(w.nc);
    w.node = await startRunwayNode({
      connection: w.server.connectOptions(),
      name: "today",
      handlers: [HANDLERS],
      logger: createLogger("today", "debug", sink),
      clock: options.clock ?? later,
      sweepIntervalMs: false,
    });
    await waitFor(() => w.node.node.host.ownedPartitions().length === index.partitions, { timeoutMs: 20_000, describe: "the node to own all partitions" });
  });
  afterAll(async () => {
    await w.nc?.close();
    await w.node?.stop();
    await w.server?.dispose();
  });
  return w;
}

type TenantView = { state: string; active_runs: number; queued_runs: number; active_descendants: number; settings: { max_concurrency: number } };

async function tenantOf(client: RunwayClient): Promise<TenantView> {
  const a = await client.getTenant();
  expect(a.outcome, JSON.stringify(a)).toBe("found");
  return a.tenant as TenantView;
}

/** Waits until the tenant's view shows `expected` (its counts are updated by the runs' last words, after they settle). */
async function tenantSettles(client: RunwayClient, tenant: string, expected: Partial<TenantView>): Promise<TenantView> {
  let last: TenantView | undefined;
  try {
    return await waitFor(
      async () => {
        last = await tenantOf(client);
        return Object.entries(expected).every(([k, v]) => last![k as keyof TenantView] === v) ? last : undefined;
      },
      { timeoutMs: 30_000, describe: `tenant ${tenant} to show ${JSON.stringify(expected)}` },
    );
  } catch (err) {
    throw new Error(`${String(err)}; last view ${JSON.stringify(last)}`);
  }
}

describe("v1 stored records, loaded by a running node and driven by their next event", () => {
  const w = world();
  let sent = 0;

  /** Hands the run the event the way the node's executor reports: straight to the actor's lane on this node. */
  async function deliver(runId: string, event: { type: string } & Record<string, unknown>) {
    const answer = await w.node.node.host.dispatch({ kind: "run", id: runId }, event, `fixture/${runId}/${sent++}`);
    return answer as { outcome: string; value?: { outcome?: string } };
  }

  /**
   * Delivers `events` together and expects each applied: accepted by the loaded record, not
   * refused as stale. Together, because loading the record re-publishes its stored outbox, whose
   * lease timers are long past for this node and fire at once: a report queued behind them
   * would find its lease lapsed (and the attempt retried here), which is another test's story.
   */
  async function apply(runId: string, ...events: ({ type: string } & Record<string, unknown>)[]): Promise<void> {
    const answers = await Promise.all(events.map((event) => deliver(runId, event)));
    for (const [i, answer] of answers.entries()) {
      expect(answer.outcome, `${events[i]!.type} to ${runId}: ${JSON.stringify(answer)}`).toBe("applied");
      expect(answer.value?.outcome, `${events[i]!.type} to ${runId}: ${JSON.stringify(answer)}`).toBeUndefined();
    }
  }

  /** The report of a stored attempt: its attempt and lease epoch, as its lease holder would send it. */
  function result(r: RecordNote, node: string, output: unknown, item?: number) {
    const s = stored(r, node, item);
    expect(["leased", "running"], `${r.key} ${node}`).toContain(s.status);
    return { type: "step.result", node, ...(item !== undefined ? { item } : {}), attempt: s.attempt, lease_epoch: s.lease_epoch, outcome: "succeeded", output };
  }

  async function succeeds(tenant: string, runId: string): Promise<RunAnswer> {
    const done = await settled(w.client(tenant), runId);
    expect(done.status, JSON.stringify(done)).toBe("succeeded");
    return done;
  }

  it("every v1 record is an rw.actor@1 envelope of snapshot version 1, where the runtime's partition function puts its id, byte for byte as the index says", () => {
    expect(index.partitions).toBe(DEFAULT_TOPOLOGY.partitions);
    for (const r of index.records) {
      expect(r.envelope, r.key).toEqual({ schema: "rw.actor", version: 1 });
      expect(r.snapshot_version, r.key).toBe(1);
      expect(r.key, r.key).toBe(`${r.kind}.${r.id}`);
      expect(partitionOf(r.id, index.partitions), r.key).toBe(r.partition);
      expect(partitionBucket(r.partition), r.key).toBe(r.bucket);
      expect(createHash("sha256").update(bytesOf(r.file)).digest("hex"), r.file).toBe(r.sha256);
    }
    for (const d of index.definitions) expect(bytesOf(d.file).length, d.file).toBeGreaterThan(0);
  });

  it("a tenant stored by v1 just after it was created admits its first run and counts it", async () => {
    await store(w.nc, "fresh");
    const client = w.client("fx-fresh");
    expect(await tenantOf(client)).toMatchObject({ state: "active", active_runs: 0, queued_runs: 0 });
    const started = await client.startRun({ definition: "fx-two", input: { value: "first" } });
    expect(started.outcome, JSON.stringify(started)).toBe("started");
    const done = await succeeds("fx-fresh", (started.run as RunAnswer).id);
    expect(done.result).toEqual({ a: "first", b: { a: "first" } });
    await tenantSettles(client, "fx-fresh", { state: "active", active_runs: 0, queued_runs: 0, active_descendants: 0 });
  });

  describe("runs stored by v1 after they ended", () => {
    beforeAll(() => store(w.nc, "ended"));
    const ends: [string, string][] = [
      ["succeeded", "a run stored by v1 after it succeeded reads back as it ended and refuses a late report and a cancel"],
      ["failed", "a run stored by v1 after a node failed reads back failed (node_failed) and refuses a late report and a cancel"],
      ["stopped", "a run stored by v1 after a platform stop reads back failed (reference_unreadable) and refuses a late report and a cancel"],
      ["cancelled", "a run stored by v1 after it was cancelled reads back cancelled and refuses a late report and a cancel"],
    ];
    for (const [role, title] of ends) {
      it(title, async () => {
        const r = record("ended", role);
        const client = w.client("fx-ended");
        const read = (await client.getRun(r.id)).run as RunAnswer;
        expect(read.status).toBe(r.state);
        expect(read.error?.code ?? null).toBe(r.run!.error?.code ?? null);
        expect(read.result).toEqual(r.run!.result);
        const s = r.steps![0]!;
        const late = await deliver(r.id, {
          type: "step.result",
          node: s.node,
          attempt: s.attempt,
          lease_epoch: s.lease_epoch,
          outcome: "succeeded",
          output: "late",
        });
        expect(late, JSON.stringify(late)).toMatchObject({ outcome: "applied", value: { outcome: "stale_lease" } });
        expect((await client.cancelRun(r.id)).outcome).toBe("not_cancellable");
        expect(((await client.getRun(r.id)).run as RunAnswer).status).toBe(r.state);
      });
    }
    it("the tenant stored by v1 beside them holds no slot for any of them", async () => {
      await tenantSettles(w.client("fx-ended"), "fx-ended", { state: "active", active_runs: 0, queued_runs: 0, active_descendants: 0 });
    });
  });

  it("a run stored by v1 while its first step was leased loads and finishes when that step's result arrives", async () => {
    await store(w.nc, "leased");
    const r = record("leased", "run");
    await apply(r.id, result(r, "a", "leased-value"));
    const done = await succeeds("fx-leased", r.id);
    expect(done.result).toEqual({ a: "leased-value", b: { a: "leased-value" } });
    await tenantSettles(w.client("fx-leased"), "fx-leased", { active_runs: 0 });
  });

  it("a run stored by v1 while its first step was running loads, renews the lease on a heartbeat and finishes when the result arrives", async () => {
    await store(w.nc, "running");
    const r = record("running", "run");
    const s = stored(r, "a");
    expect(s.status).toBe("running");
    await apply(r.id, { type: "step.heartbeat", node: "a", attempt: s.attempt, lease_epoch: s.lease_epoch });
    // Renewed, the lease outlives the stored lease timer that loading re-armed: the result may come after it.
    await apply(r.id, result(r, "a", "running-value"));
    const done = await succeeds("fx-running", r.id);
    expect(done.result).toEqual({ a: "running-value", b: { a: "running-value" } });
    await tenantSettles(w.client("fx-running"), "fx-running", { active_runs: 0 });
  });

  it("a run stored by v1 while a step waited out its retry backoff loads and retries when the timer fires", async () => {
    await store(w.nc, "retry");
    const r = record("retry", "run");
    const s = stored(r, "a");
    expect(s).toMatchObject({ status: "ready", attempt: 1 });
    expect(s.not_before).toBeLessThan(later.now());
    await apply(r.id, { type: "timer.fired", kind: "retry", node: "a" });
    const done = await succeeds("fx-retry", r.id);
    expect(done.nodes.a!.attempt).toBe(2);
    expect(done.result).toEqual({ a: "retried", b: { a: "retried" } });
    await tenantSettles(w.client("fx-retry"), "fx-retry", { active_runs: 0 });
  });

  it("a run stored by v1 while a map was half done loads and finishes", async () => {
    await store(w.nc, "map");
    const r = record("map", "run");
    expect(r.steps!.map((s) => s.status)).toEqual(["succeeded", "running", "leased", "ready", "ready"]);
    await apply(r.id, result(r, "m", "b", 1), result(r, "m", "c", 2));
    const done = await succeeds("fx-map", r.id);
    expect(done.result).toEqual({ m: ["a", "b", "c", "d", "e"], after: { m: ["a", "b", "c", "d", "e"] } });
    await tenantSettles(w.client("fx-map"), "fx-map", { active_runs: 0, active_descendants: 0 });
  });

  it("a run stored by v1 while one branch of a parallel was done loads and finishes when the other branch's step reports", async () => {
    await store(w.nc, "parallel");
    const r = record("parallel", "run");
    expect(stored(r, "left").status).toBe("succeeded");
    await apply(r.id, result(r, "right", "right"));
    const done = await succeeds("fx-parallel", r.id);
    expect(done.result).toMatchObject({ left: "left", right: "right", after: { left: "left", right: "right" } });
    await tenantSettles(w.client("fx-parallel"), "fx-parallel", { active_runs: 0 });
  });

  it("a run stored by v1 while it slept loads and wakes when the sleep's timer fires", async () => {
    await store(w.nc, "sleep");
    const r = record("sleep", "run");
    expect(r.state).toBe("waiting (on delay)");
    const parked = (await w.client("fx-sleep").getRun(r.id)).run as RunAnswer & { waiting: { on: string } | null };
    expect(parked.waiting?.on).toBe("delay");
    await apply(r.id, { type: "timer.fired", kind: "sleep", node: "nap" });
    const done = await succeeds("fx-sleep", r.id);
    expect(done.result).toMatchObject({ a: "before", b: "after" });
    await tenantSettles(w.client("fx-sleep"), "fx-sleep", { active_runs: 0 });
  });

  it("a parent and its child stored by v1 while the parent waited on the child load, and the child's result finishes both", async () => {
    await store(w.nc, "child");
    const parent = record("child", "parent");
    const child = record("child", "child");
    expect(child.run!.parent).toBe(parent.id);
    await apply(child.id, result(child, "c", "from-child"));
    const childDone = await succeeds("fx-child", child.id);
    expect(childDone.result).toEqual({ c: "from-child" });
    const done = await succeeds("fx-child", parent.id);
    expect(done.result).toEqual({ sub: { c: "from-child" }, after: { sub: { c: "from-child" } } });
    await tenantSettles(w.client("fx-child"), "fx-child", { active_runs: 0 });
  });

  it("a parent stored by v1 while it waited on its child is cancelled, and its child with it", async () => {
    await store(w.nc, "cancel");
    const parent = record("cancel", "parent");
    const child = record("cancel", "child");
    const client = w.client("fx-cancel");
    const cancelled = await client.cancelRun(parent.id, "fixture");
    expect(cancelled.outcome, JSON.stringify(cancelled)).toBe("cancelled");
    expect((await settled(client, child.id)).status).toBe("cancelled");
    expect((await settled(client, parent.id)).status).toBe("cancelled");
    // The child's stored attempt reports after all: refused, nothing moves.
    const late = await deliver(child.id, result(child, "c", "too late"));
    expect(late, JSON.stringify(late)).toMatchObject({ outcome: "applied", value: { outcome: "stale_lease" } });
    expect(((await client.getRun(child.id)).run as RunAnswer).status).toBe("cancelled");
    await tenantSettles(client, "fx-cancel", { active_runs: 0 });
  });

  it("a tenant stored by v1 at its cap, with a run running, one queued and an expansion reserved, admits the queued run when the running one ends", async () => {
    await store(w.nc, "cap");
    const holder = record("cap", "holder");
    const queued = record("cap", "queued");
    const client = w.client("fx-cap");
    expect(await tenantOf(client)).toMatchObject({ active_runs: 1, queued_runs: 1, active_descendants: 1, settings: { max_concurrency: 1 } });
    expect(queued.state).toBe("queued");
    await apply(holder.id, result(holder, "m", "a", 0));
    expect((await succeeds("fx-cap", holder.id)).result).toEqual({ m: ["a"], after: { m: ["a"] } });
    expect((await succeeds("fx-cap", queued.id)).result).toEqual({ m: ["x", "y"], after: { m: ["x", "y"] } });
    await tenantSettles(client, "fx-cap", { state: "active", active_runs: 0, queued_runs: 0, active_descendants: 0 });
  });

  it("a draining tenant stored by v1 refuses new runs, lets its running run end, and admits again once resumed", async () => {
    await store(w.nc, "draining");
    const r = record("draining", "run");
    const client = w.client("fx-draining");
    expect(await tenantOf(client)).toMatchObject({ state: "draining", active_runs: 1 });
    expect((await client.startRun({ definition: "fx-hold", input: { value: "no", hold: null } })).outcome).toBe("tenant_draining");
    await apply(r.id, result(r, "a", "drained"));
    expect((await client.setTenantState("fx-draining", "resume", "fixture")).outcome).toBe("active");
    expect((await succeeds("fx-draining", r.id)).result).toEqual({ a: "drained", b: { a: "drained" } });
    const next = await client.startRun({ definition: "fx-hold", input: { value: "after", hold: null } });
    expect(next.outcome, JSON.stringify(next)).toBe("started");
    await succeeds("fx-draining", (next.run as RunAnswer).id);
    await tenantSettles(client, "fx-draining", { state: "active", active_runs: 0, queued_runs: 0 });
  });

  it("a killed tenant stored by v1 refuses new runs and keeps its queued run until resumed, then runs it", async () => {
    await store(w.nc, "killed");
    const running = record("killed", "running");
    const queued = record("killed", "queued");
    const client = w.client("fx-killed");
    expect(await tenantOf(client)).toMatchObject({ state: "killed", active_runs: 1, queued_runs: 1 });
    expect((await client.startRun({ definition: "fx-hold", input: { value: "no", hold: null } })).outcome).toBe("tenant_killed");
    await apply(running.id, result(running, "a", "killed-running"));
    const answer: ApiAnswer = await client.setTenantState("fx-killed", "resume", "fixture");
    expect(answer.outcome).toBe("active");
    expect((await succeeds("fx-killed", running.id)).result).toEqual({ a: "killed-running", b: { a: "killed-running" } });
    expect((await succeeds("fx-killed", queued.id)).result).toEqual({ a: "killed-queued", b: { a: "killed-queued" } });
    await tenantSettles(client, "fx-killed", { state: "active", active_runs: 0, queued_runs: 0 });
  });
});

describe("v1 stored records already in the store when a node of today's code starts (a deploy)", () => {
  // The sleeping run is left out: its wake-up lives in the command stream's schedule, not in
  // its record, and a fresh stream has none (its stored outbox re-arms both the sleep and the
  // wait deadline, long past, so which fires first is a race no deploy has).
  const names = index.scenarios.map((s) => s.name).filter((n) => n !== "sleep");
  // The wall clock, not a week ahead: two paths may retry a leased step the old node lost, and
  // the test must not depend on which wins. Recovery retries it at once; its lease's stored timer,
  // past due when the record is loaded, expires it and retries it after its backoff, which a
  // week-ahead clock schedules a week out (a rare failure under load: the recovery's command met
  // a store fault and was tried again after the timer's). The fixtures are days old, so every
  // instant they stored is past here too; right after a regeneration a lease is not, and
  // recovery alone retries its step.
  const w = world({
    clock: systemClock,
    before: async (nc) => {
      await ensureTopology(nc, DEFAULT_TOPOLOGY);
      await ensureDomainTopology(nc, 1);
      for (const name of names) await store(nc, name);
    },
  });

  it("a node started on a store of v1 records recovers every run in flight and takes it to its end", async () => {
    // Draining and killed tenants hold their runs' next attempts until an operator resumes them.
    for (const t of ["fx-draining", "fx-killed"]) expect((await w.client(t).setTenantState(t, "resume", "fixture")).outcome).toBe("active");
    for (const name of names) {
      const s = scenario(name);
      for (const key of s.records) {
        const r = index.records.find((x) => x.key === key)!;
        if (r.kind !== "run") continue;
        const ended = ["succeeded", "failed", "cancelled"].includes(r.state);
        const done = await settled(w.client(s.tenant), r.id).catch(async (err: unknown) => {
          // What every run of the scenario and the node's step machinery show, to tell a stuck run from a slow one.
          const runs = await Promise.all(
            s.records
              .map((k) => index.records.find((x) => x.key === k)!)
              .filter((x) => x.kind === "run")
              .map(async (x) => ({ role: x.role, id: x.id, now: ((await w.client(s.tenant).getRun(x.id)) as { run?: unknown }).run })),
          );
          const node = { executor: w.node.executor.stats, pool: w.node.pool.stats(), held: runs.map((x) => w.node.dispatcher?.held(x.id)) };
          // What recovery said of each partition (runs recovered, tries again), and the rest of the node's last words.
          const log = w.log.slice(-60);
          throw new Error(`${String(err)}\n${JSON.stringify({ scenario: name, runs, node }, null, 1).slice(0, 6_000)}\n${log.join("\n")}`);
        });
        expect(done.status, `${name}/${r.role} ${r.id}: ${JSON.stringify(done)}`).toBe(ended ? r.state : "succeeded");
        if (ended) expect(done.result, `${name}/${r.role}`).toEqual(r.run!.result);
      }
      await tenantSettles(w.client(s.tenant), s.tenant, { state: "active", active_runs: 0, queued_runs: 0, active_descendants: 0 });
    }
  });
});
