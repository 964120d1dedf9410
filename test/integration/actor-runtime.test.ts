import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, headers, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { ActorHost, defineActor, MailboxClient, partitionOf, PartitionLog, type HostDecorators } from "../../runtime/index.js";
import { CMD_STREAM, DEFAULT_TOPOLOGY, ensureTopology, mailboxSubject, partitionConsumer } from "../../runtime/topology.js";
import { commandCodec } from "../../runtime/actor/wire.js";
import { packMsgpack } from "../../runtime/codec.js";
import { silentLogger } from "../../runtime/log.js";
import { startServer, waitFor, type NatsServerHandle } from "../harness/index.js";
import { counterMachine, CounterEvent, testActors } from "../fixtures/counter-actor.js";
import { readActor } from "../fixtures/read-actor.js";
import { decorateLog } from "../fixtures/faults.js";

const P = DEFAULT_TOPOLOGY.partitions;
let server: NatsServerHandle;
const connections: NatsConnection[] = [];

async function conn(): Promise<NatsConnection> {
  const nc = await connect(server.connectOptions());
  connections.push(nc);
  return nc;
}

async function hostFor(partition: number, opts: { attach?: boolean; decorate?: HostDecorators; mailbox?: boolean; node?: string } = {}) {
  const nc = await conn();
  const node = opts.node ?? `host-${connections.length}`;
  const authority = { node, incarnation: node };
  let log: PartitionLog;
  if (opts.attach) log = await PartitionLog.attach(nc, partition, authority);
  else {
    const claimed = await PartitionLog.claim(nc, partition, authority, () => true, Date.now());
    if (claimed.outcome !== "claimed") throw new Error(`claim failed: ${claimed.outcome}`);
    log = claimed.log;
  }
  const host = new ActorHost({ nc, partitions: P, actors: testActors, logger: silentLogger, ...(opts.decorate ? { decorate: opts.decorate } : {}) });
  await host.serve(log, { mailbox: opts.mailbox ?? false });
  return { nc, host, log, mailbox: new MailboxClient(nc, P) };
}

beforeAll(async () => {
  server = await startServer();
  const nc = await conn();
  await ensureTopology(nc, DEFAULT_TOPOLOGY);
});

afterAll(async () => {
  for (const nc of connections) await nc.close().catch(() => undefined);
  await server?.dispose();
});

describe("actor runtime on a real server", () => {
  it("fenced write race: two hosts apply 1,000 increments to one actor; exactly 1,000 land", async () => {
    const id = "race";
    const p = partitionOf(id, P);
    const a = await hostFor(p, { node: "race-a" });
    const b = await hostFor(p, { attach: true, node: "race-b" });
    const target = { kind: "counter", id };
    // Each host keeps several commands in flight; the two hosts' writes interleave at the server.
    const drive = async (h: typeof a, prefix: string) => {
      let next = 0;
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          while (next < 500) {
            const i = next++;
            const answer = await h.host.dispatch(target, { type: "inc", by: 1 }, `${prefix}-${i}`);
            expect(answer.outcome).toBe("applied");
          }
        }),
      );
    };
    await Promise.all([drive(a, "a"), drive(b, "b")]);
    const record = await readActor(a.nc, "counter", id);
    const conflicts = a.host.stats.stale + b.host.stats.stale;
    console.log(
      `fenced write race: 1000 increments, ${conflicts} revision conflicts (host a ${a.host.stats.stale}, host b ${b.host.stats.stale}), ${a.host.stats.writes + b.host.stats.writes} writes`,
    );
    expect(record?.context.count).toBe(1000);
    expect(record?.transitions).toBe(1000);
    expect(conflicts).toBeGreaterThan(0);
    await a.host.stop();
    await b.host.stop();
  });

  it("redelivery is idempotent: a command delivered twice is applied once", async () => {
    const id = "redelivered";
    const p = partitionOf(id, P);
    let failNext = true;
    const h = await hostFor(p, {
      mailbox: true,
      decorate: {
        log: (log) =>
          decorateLog(log, async (_key, _value, next) => {
            const written = await next();
            // The write landed; losing the process here leaves the command unacknowledged.
            if (failNext) {
              failNext = false;
              throw new Error("injected fault after write");
            }
            return written;
          }),
      },
    });
    const target = { kind: "counter", id };
    const sent = await h.mailbox.send(target, { type: "inc" }, "cmd-once");
    expect(sent.outcome).toBe("stored");
    await waitFor(async () => (await readActor(h.nc, "counter", id))?.context.count === 1, { timeoutMs: 10_000, describe: "first application" });
    // Serving the partition again resets its consumer: the unacknowledged command comes back now.
    const log = await h.host.release(p);
    await h.host.serve(log!, { mailbox: true });
    await waitFor(() => h.host.stats.duplicates >= 1, { timeoutMs: 10_000, describe: "redelivered command seen as duplicate" });
    // The same command id published again under another stream message id: still once.
    const hdr = headers();
    hdr.set("Rw-Id", "cmd-once");
    hdr.set("Nats-Msg-Id", "another-publish-of-cmd-once");
    await h.nc.request(mailboxSubject(p, "counter", id), commandCodec.encode({ event: { type: "inc" } }), { headers: hdr, timeout: 5_000 });
    await waitFor(() => h.host.stats.duplicates >= 2, { timeoutMs: 10_000, describe: "second duplicate" });
    const jsm = await jetstreamManager(h.nc);
    await waitFor(async () => (await jsm.consumers.info(CMD_STREAM, partitionConsumer(p))).num_ack_pending === 0, {
      timeoutMs: 10_000,
      describe: "all acknowledged",
    });
    const record = await readActor(h.nc, "counter", id);
    expect(record?.context.count).toBe(1);
    expect(record?.transitions).toBe(1);
    await h.host.stop();
  });

  it("an outbox the servers refused past its retries goes out again from the stored record with no further command: the send it held reaches its actor (soak: a map's expansion request lost to a server kill held its run 107 s)", async () => {
    const id = "republish-a";
    const p = partitionOf(id, P);
    const to = Array.from({ length: 2_000 }, (_, i) => `republish-b${i}`).find((b) => partitionOf(b, P) === p)!;
    const h = await hostFor(p, { mailbox: true });
    const jsm = await jetstreamManager(h.nc);
    const config = (await jsm.streams.info(CMD_STREAM)).config;
    // The mailboxes unrouted: every send is refused (no responders), past the outbox's own retries.
    await jsm.streams.update(CMD_STREAM, { ...config, subjects: config.subjects!.filter((s) => !s.startsWith("rw.cmd.")) });
    let answer;
    try {
      answer = await h.host.dispatch({ kind: "counter", id }, { type: "ping", to: { kind: "counter", id: to }, by: 1 }, "republish-1");
    } finally {
      await jsm.streams.update(CMD_STREAM, config);
    }
    // Stored; its send not out.
    expect(answer.outcome).toBe("applied");
    expect((await readActor(h.nc, "counter", id))?.context.sent).toBe(1);
    await waitFor(async () => ((await readActor(h.nc, "counter", to))?.context.count === 1 ? true : undefined), {
      timeoutMs: 30_000,
      describe: "the held send applied",
    });
    await h.host.stop();
  }, 60_000);

  it("a claim is a hand-over only from a release whose owner had settled what it took over; from one that had not (a restarted node taking its partition back mid-recovery), it is a takeover", async () => {
    const p = partitionOf("handover", P);
    const nc = await conn();
    const claim = async (node: string) => {
      const claimed = await PartitionLog.claim(nc, p, { node, incarnation: node }, () => true, Date.now());
      if (claimed.outcome !== "claimed") throw new Error(`claim failed: ${claimed.outcome}`);
      return claimed.log;
    };
    const first = await claim("ho-a");
    await first.release(Date.now());
    const second = await claim("ho-b");
    expect(second.fromRelease).toBe(false);
    second.settled = true;
    await second.release(Date.now());
    const third = await claim("ho-c");
    expect(third.fromRelease).toBe(true);
    // Taken from a live owner without a release: a takeover too.
    expect((await claim("ho-d")).fromRelease).toBe(false);
  });

  it("a refused event gets a closed answer and changes nothing; a terminal actor never moves", async () => {
    const id = "stopper";
    const h = await hostFor(partitionOf(id, P));
    const target = { kind: "counter", id };
    expect((await h.host.dispatch(target, { type: "inc", by: 5 }, "s1")).outcome).toBe("applied");
    expect((await h.host.dispatch(target, { type: "stop" }, "s2")).outcome).toBe("applied");
    const refused = await h.host.dispatch(target, { type: "inc", by: 1 }, "s3");
    expect(refused).toEqual({ outcome: "refused", state: "stopped" });
    const invalid = await h.host.dispatch(target, { type: "inc", by: "lots" }, "s4");
    expect(invalid.outcome).toBe("invalid_input");
    const record = await readActor(h.nc, "counter", id);
    expect(record?.context.count).toBe(5);
    expect(record?.transitions).toBe(2);
    await h.host.stop();
  });

  it("1,000 malformed mailbox messages are terminated with a reason and never crash the host", async () => {
    const id = "survivor";
    const p = partitionOf(id, P);
    const h = await hostFor(p, { mailbox: true });
    const js = await jetstreamManager(h.nc);
    const other = (p + 1) % P;
    const kinds = [
      // not msgpack at all
      (i: number) => ({ subject: mailboxSubject(p, "counter", `m${i}`), data: new Uint8Array([0xc1, 0xff, i & 0xff, 0x00]) }),
      // msgpack, but the wrong schema version
      (i: number) => ({ subject: mailboxSubject(p, "counter", `m${i}`), data: packMsgpack({ s: "rw.cmd", v: 99, b: { event: { type: "inc" } } }) }),
      // a kind no actor definition has
      (i: number) => ({ subject: mailboxSubject(p, "nosuchkind", `m${i}`), data: commandCodec.encode({ event: { type: "inc" } }) }),
      // a well-formed envelope whose event the machine's schema refuses
      (i: number) => ({ subject: mailboxSubject(p, "counter", `m${i}`), data: commandCodec.encode({ event: { type: "inc", by: "x" } }) }),
      // an envelope with no event
      (i: number) => ({ subject: mailboxSubject(p, "counter", `m${i}`), data: packMsgpack({ s: "rw.cmd", v: 1, b: { nothing: true } }) }),
      // an id that belongs to another partition
      (i: number) => ({ subject: mailboxSubject(p, "counter", `wrong-partition-${i}`), data: commandCodec.encode({ event: { type: "inc" } }) }),
      // too many subject tokens
      (i: number) => ({ subject: `${mailboxSubject(p, "counter", `m${i}`)}.extra`, data: commandCodec.encode({ event: { type: "inc" } }) }),
    ];
    let published = 0;
    for (let i = 0; i < 1000; i++) {
      const m = kinds[i % kinds.length]!(i);
      // Keep the wrong-partition ids honest: they must really hash elsewhere.
      if (m.subject.includes("wrong-partition") && partitionOf(m.subject.split(".")[4]!, P) === p) {
        m.subject = mailboxSubject(p, "nosuchkind", `m${i}`);
      }
      await h.nc.request(m.subject, m.data, { timeout: 5_000 });
      published++;
    }
    expect(published).toBe(1000);
    void other;
    await waitFor(() => h.host.stats.terminated >= 1000, { timeoutMs: 30_000, describe: `1000 terminations (have ${h.host.stats.terminated})` });
    // The host is still serving: a good command right after is applied.
    const ok = await h.mailbox.request({ kind: "counter", id }, { type: "inc", by: 3 }, "after-garbage");
    expect(ok.outcome).toBe("applied");
    const info = await js.consumers.info(CMD_STREAM, partitionConsumer(p));
    expect(info.num_ack_pending).toBe(0);
    expect(info.num_pending).toBe(0);
    expect(h.host.stats.terminated).toBe(1000);
    await h.host.stop();
  });

  it("a command marked fresh is decided without reading the actor; if it has a record after all, the store refuses the write and the command is decided on the record", async () => {
    const id = "fresh-x";
    const partition = partitionOf(id, P);
    const first = await hostFor(partition);
    for (let i = 0; i < 3; i++) expect((await first.host.dispatch({ kind: "counter", id }, { type: "inc" }, `fresh-x-${i}`)).outcome).toBe("applied");
    await first.host.stop();
    // A new owner that has never seen the actor, reading through a log that counts its reads.
    const reads: string[] = [];
    const counting: HostDecorators = {
      log: (log) =>
        Object.create(
          decorateLog(log, (_key, _value, next) => next()),
          { read: { value: (key: string) => (reads.push(key), log.read(key)) } },
        ),
    };
    const second = await hostFor(partition, { node: "fresh-second", decorate: counting });
    const wrong = await second.host.dispatch({ kind: "counter", id }, { type: "inc" }, "fresh-x-3", { fresh: true });
    expect(wrong).toMatchObject({ outcome: "applied", value: { count: 4 } });
    const stored = await readActor(second.nc, "counter", id);
    expect(stored?.context.count).toBe(4);
    expect(stored?.transitions).toBe(4);
    expect(reads).toContain(`counter.${id}`);
    // An actor that has no record: created without a read.
    const other = Array.from({ length: 500 }, (_, i) => `fresh-new-${i}`).find((k) => partitionOf(k, P) === partition)!;
    reads.length = 0;
    expect(await second.host.dispatch({ kind: "counter", id: other }, { type: "inc" }, "fresh-new-0", { fresh: true })).toMatchObject({
      outcome: "applied",
      value: { count: 1 },
    });
    expect(reads).not.toContain(`counter.${other}`);
    expect((await readActor(second.nc, "counter", other))?.context.count).toBe(1);
    await second.host.stop();
  });

  it("an actor its kind keeps no more in memory leaves once idle after its write, and a later command loads it from the store; what the LRU bound and a released partition drop is reported too", async () => {
    // Kept in memory below 3, as a run is until it ends.
    const dropped: string[] = [];
    const ending = defineActor({
      kind: "ending",
      machine: counterMachine,
      events: CounterEvent,
      keepInMemory: (snapshot) => (snapshot.context as { count: number }).count < 3,
      onDropped: (address) => dropped.push(address.id),
    });
    const p = partitionOf("ends", P);
    const nc = await conn();
    const claimed = await PartitionLog.claim(nc, p, { node: "ending", incarnation: "ending" }, () => true, Date.now());
    if (claimed.outcome !== "claimed") throw new Error(`claim failed: ${claimed.outcome}`);
    const host = new ActorHost({ nc, partitions: P, actors: [ending], logger: silentLogger, cacheLimit: 2 });
    await host.serve(claimed.log, { mailbox: false });
    const target = { kind: "ending", id: "ends" };
    for (let i = 1; i <= 2; i++) expect((await host.dispatch(target, { type: "inc", by: 1 }, `e-${i}`)).outcome).toBe("applied");
    expect(host.actorsInMemory()).toBe(1);
    expect((await host.dispatch(target, { type: "inc", by: 1 }, "e-3")).outcome).toBe("applied");
    await waitFor(() => host.actorsInMemory() === 0 || undefined, { timeoutMs: 5_000, describe: "the actor to leave memory" });
    expect(dropped).toEqual(["ends"]);
    // Loaded again: the count goes on from the stored 3, and a redelivered command is still a duplicate.
    expect((await host.dispatch(target, { type: "inc", by: 1 }, "e-4")).outcome).toBe("applied");
    expect((await readActor(nc, "ending", "ends"))?.context.count).toBe(4);
    expect((await host.dispatch(target, { type: "inc", by: 1 }, "e-4")).outcome).toBe("duplicate");
    await waitFor(() => host.actorsInMemory() === 0 || undefined, { timeoutMs: 5_000, describe: "the actor to leave memory again" });
    expect(dropped).toEqual(["ends", "ends", "ends"]);
    dropped.length = 0;
    // Past the LRU bound (2 here) the least recently used idle actor goes, reported the same way.
    const onPartition = Array.from({ length: 2_000 }, (_, i) => `lru-${i}`).filter((id) => partitionOf(id, P) === p);
    const [a, b, c] = onPartition as [string, string, string];
    for (const id of [a, b, c]) expect((await host.dispatch({ kind: "ending", id }, { type: "inc", by: 1 }, `${id}-1`)).outcome).toBe("applied");
    expect(dropped).toEqual([a]);
    expect(host.actorsInMemory()).toBe(2);
    // A released partition drops what it held.
    await host.release(p);
    expect(dropped.slice(1).sort()).toEqual([b, c].sort());
    expect(host.actorsInMemory()).toBe(0);
  });

  it("an onDropped that throws is logged, and the host goes on serving the actor", async () => {
    const faulty = defineActor({
      kind: "faulty",
      machine: counterMachine,
      events: CounterEvent,
      keepInMemory: () => false,
      onDropped: () => {
        throw new Error("bookkeeping bug");
      },
    });
    const p = partitionOf("drops", P);
    const nc = await conn();
    const claimed = await PartitionLog.claim(nc, p, { node: "faulty", incarnation: "faulty" }, () => true, Date.now());
    if (claimed.outcome !== "claimed") throw new Error(`claim failed: ${claimed.outcome}`);
    const logged: string[] = [];
    const logger = { ...silentLogger, error: (msg: string) => void logged.push(msg) };
    const host = new ActorHost({ nc, partitions: P, actors: [faulty], logger });
    await host.serve(claimed.log, { mailbox: false });
    for (let i = 1; i <= 3; i++) {
      expect((await host.dispatch({ kind: "faulty", id: "drops" }, { type: "inc", by: 1 }, `d-${i}`)).outcome).toBe("applied");
      await waitFor(() => logged.length === i || undefined, { timeoutMs: 5_000, describe: `drop ${i} logged` });
      expect(host.actorsInMemory()).toBe(0);
    }
    expect(logged).toEqual(["onDropped failed", "onDropped failed", "onDropped failed"]);
    expect((await readActor(nc, "faulty", "drops"))?.context.count).toBe(3);
    await host.release(p);
  });
});
