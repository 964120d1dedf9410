/**
 * Direct requests (runtime/actor/asks.ts): `MailboxClient.request` asks the partition's owner
 * over core NATS first and uses the durable mailbox only when no owner answers or the owner
 * cannot settle the command at once. What each test shows is read from the server (the
 * mailbox stream's sequence, the actor's stored record) and the host's counters. The last tests
 * are of `askActor` (gateways/api/ask.ts), which tries this process's own lane before any of that.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { connect, headers, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { ActorHost, MailboxClient, partitionOf, PartitionLog, rawRequest, type HostDecorators } from "../../runtime/index.js";
import { ASK_MAILBOX, HEADER_ASK } from "../../runtime/actor/asks.js";
import { askSubject, CMD_STREAM, DEFAULT_TOPOLOGY, ensureTopology } from "../../runtime/topology.js";
import { answerCodec, commandCodec, HEADER_ID } from "../../runtime/actor/wire.js";
import { packMsgpack } from "../../runtime/codec.js";
import { silentLogger } from "../../runtime/log.js";
import type { ActorLog } from "../../runtime/store/partition-log.js";
import { startServer, waitFor, type NatsServerHandle } from "../harness/index.js";
import { testActors } from "../fixtures/counter-actor.js";
import { readActor } from "../fixtures/read-actor.js";
import { decorateLog } from "../fixtures/faults.js";
import { askActor } from "../../gateways/api/ask.js";

const P = DEFAULT_TOPOLOGY.partitions;
let server: NatsServerHandle;
const connections: NatsConnection[] = [];
const hosts: ActorHost[] = [];

async function conn(): Promise<NatsConnection> {
  const nc = await connect(server.connectOptions());
  connections.push(nc);
  return nc;
}

/** A host serving `partition` with its mailbox (and so its direct requests). */
async function serve(partition: number, decorate?: HostDecorators, maxBatch?: number): Promise<ActorHost> {
  const nc = await conn();
  const authority = { node: `asks-${connections.length}`, incarnation: `asks-${connections.length}` };
  const claimed = await PartitionLog.claim(nc, partition, authority, () => true, Date.now());
  if (claimed.outcome !== "claimed") throw new Error(`claim failed: ${claimed.outcome}`);
  const host = new ActorHost({
    nc,
    partitions: P,
    actors: testActors,
    logger: silentLogger,
    redeliveryBaseMs: 50,
    ...(decorate ? { decorate } : {}),
    ...(maxBatch ? { maxBatch } : {}),
  });
  await host.serve(claimed.log, { mailbox: true });
  hosts.push(host);
  return host;
}

async function mailboxLastSeq(nc: NatsConnection): Promise<number> {
  return (await (await jetstreamManager(nc)).streams.info(CMD_STREAM)).state.last_seq;
}

/** An id whose actor lives in a partition no other test of this file uses. */
function idIn(used: Set<number>, prefix: string): { id: string; partition: number } {
  for (let i = 0; ; i++) {
    const id = `${prefix}${i}`;
    const partition = partitionOf(id, P);
    if (!used.has(partition)) {
      used.add(partition);
      return { id, partition };
    }
  }
}
const used = new Set<number>();

beforeAll(async () => {
  server = await startServer();
  await ensureTopology(await conn(), DEFAULT_TOPOLOGY);
});

afterAll(async () => {
  for (const host of hosts) await host.stop().catch(() => undefined);
  for (const nc of connections) await nc.close().catch(() => undefined);
  await server?.dispose();
});

it("a request is answered by the partition's owner directly: applied and stored, no mailbox message; the same id again is a duplicate", async () => {
  const { id, partition } = idIn(used, "direct");
  const host = await serve(partition);
  const nc = await conn();
  const client = new MailboxClient(nc, P);
  const before = await mailboxLastSeq(nc);

  const first = await client.request({ kind: "counter", id }, { type: "inc", by: 3 }, "d-1");
  expect(first).toMatchObject({ outcome: "applied", value: { count: 3 } });
  const again = await client.request({ kind: "counter", id }, { type: "inc", by: 3 }, "d-1");
  expect(again).toEqual({ outcome: "duplicate" });

  expect(host.stats.asked).toBe(2);
  expect(await mailboxLastSeq(nc)).toBe(before);
  expect((await readActor(nc, "counter", id))?.context.count).toBe(3);
});

it("with no owner serving the partition, a request goes through the mailbox and is answered once a host serves it", async () => {
  const { id, partition } = idIn(used, "orphan");
  const nc = await conn();
  const client = new MailboxClient(nc, P);
  const before = await mailboxLastSeq(nc);

  const pending = client.request({ kind: "counter", id }, { type: "inc", by: 2 }, "o-1", 20_000);
  await waitFor(async () => (await mailboxLastSeq(nc)) > before || undefined, { timeoutMs: 10_000, describe: "the command to reach the mailbox" });
  const host = await serve(partition);

  expect(await pending).toMatchObject({ outcome: "applied", value: { count: 2 } });
  expect(host.stats.asked).toBe(0);
  expect((await readActor(nc, "counter", id))?.context.count).toBe(2);
});

it("a command its owner cannot settle at once (the write faults) is sent through the mailbox and applied once from there", async () => {
  const { id, partition } = idIn(used, "faulty");
  let failures = 1;
  const host = await serve(partition, {
    log: (log) =>
      decorateLog(log, async (key, _value, next) => {
        if (key.endsWith(id) && failures > 0) {
          failures--;
          throw new Error("injected write fault");
        }
        return next();
      }),
  });
  const nc = await conn();
  const client = new MailboxClient(nc, P);
  const before = await mailboxLastSeq(nc);

  const answer = await client.request({ kind: "counter", id }, { type: "inc", by: 5 }, "f-1", 20_000);
  expect(answer).toMatchObject({ outcome: "applied", value: { count: 5 } });
  expect(host.stats.asked).toBe(1);
  expect(await mailboxLastSeq(nc)).toBe(before + 1);
  expect((await readActor(nc, "counter", id))?.context.count).toBe(5);
});

it("bad direct requests get closed answers and store nothing; the owner goes on serving", async () => {
  const { id, partition } = idIn(used, "bad");
  const host = await serve(partition);
  const nc = await conn();
  const ask = async (subject: string, data: Uint8Array, commandId?: string) => {
    const h = headers();
    if (commandId) h.set(HEADER_ID, commandId);
    const reply = await nc.request(subject, data, { timeout: 5_000, headers: h });
    const decoded = answerCodec.decode(reply.data);
    if (!decoded.ok) throw new Error(`unreadable answer: ${decoded.detail}`);
    return decoded.value;
  };
  const inc = commandCodec.encode({ event: { type: "inc" } });
  const other = idIn(new Set([partition]), "x").id;

  expect(await ask(askSubject(partition, "nothing", id), inc, "b-1")).toEqual({ outcome: "unknown_kind", kind: "nothing" });
  expect(await ask(askSubject(partition, "counter", other), inc, "b-2")).toEqual({ outcome: "invalid_input", reason: "wrong_partition" });
  expect(await ask(`${askSubject(partition, "counter", id)}.extra`, inc, "b-3")).toEqual({ outcome: "invalid_input", reason: "bad_subject" });
  expect(await ask(askSubject(partition, "counter", id), inc)).toEqual({ outcome: "invalid_input", reason: "missing_id" });
  expect(await ask(askSubject(partition, "counter", id), new TextEncoder().encode("not msgpack"), "b-4")).toMatchObject({ outcome: "invalid_input" });
  expect(await ask(askSubject(partition, "counter", id), packMsgpack({ s: "rw.cmd", v: 99, b: { event: { type: "inc" } } }), "b-5")).toMatchObject({
    outcome: "invalid_input",
  });
  expect(await ask(askSubject(partition, "counter", id), commandCodec.encode({ event: { type: "inc", by: "many" } }), "b-6")).toMatchObject({
    outcome: "invalid_input",
  });
  expect(host.stats.transitions).toBe(0);

  expect(await ask(askSubject(partition, "counter", id), inc, "b-7")).toMatchObject({ outcome: "applied", value: { count: 1 } });
  expect((await readActor(nc, "counter", id))?.context.count).toBe(1);
});

it("a released partition stops answering directly: its requests go through the mailbox to the next owner", async () => {
  const { id, partition } = idIn(used, "moved");
  const first = await serve(partition);
  const nc = await conn();
  const client = new MailboxClient(nc, P);
  expect(await client.request({ kind: "counter", id }, { type: "inc" }, "m-1")).toMatchObject({ outcome: "applied" });
  await first.release(partition);
  const before = await mailboxLastSeq(nc);

  const pending = client.request({ kind: "counter", id }, { type: "inc" }, "m-2", 20_000);
  await waitFor(async () => (await mailboxLastSeq(nc)) > before || undefined, { timeoutMs: 10_000, describe: "the command to reach the mailbox" });
  const next = await serve(partition);
  expect(await pending).toMatchObject({ outcome: "applied", value: { count: 2 } });
  expect(first.stats.asked).toBe(1);
  expect(next.stats.asked).toBe(0);
});

it("a request on its way when its owner lets the partition go is still answered (`mailbox`), never dropped", async () => {
  const { id, partition } = idIn(used, "inflight");
  const host = await serve(partition);
  const ownerNc = connections[connections.length - 1]!;
  await ownerNc.flush();
  // Sent on the owner's own connection and the partition released in the same tick: one
  // connection keeps its order, so the server routes the request to the owner's subscription
  // before it hears that subscription go. A subscription closed at once would drop it, and the
  // requester would wait out its timeout (a hand-over lost a request that way under load).
  const h = headers();
  h.set(HEADER_ID, "inflight-1");
  const asked = rawRequest(ownerNc, askSubject(partition, "counter", id), commandCodec.encode({ event: { type: "inc" } }), { headers: h, timeoutMs: 5_000 });
  const released = host.release(partition);
  const reply = await asked;
  await released;
  expect(reply.ok).toBe(true);
  expect(reply.ok ? reply.msg.headers?.get(HEADER_ASK) : undefined).toBe(ASK_MAILBOX);
});

it("an id this client stored in a mailbox goes through the mailbox again: never applied directly while its stored copy may be on its way", async () => {
  const { id, partition } = idIn(used, "stored");
  const nc = await conn();
  const client = new MailboxClient(nc, P);
  // No owner yet: the request is stored in the mailbox and times out waiting there.
  expect(await client.request({ kind: "counter", id }, { type: "inc" }, "st-1", 300)).toEqual({ outcome: "timeout" });
  const host = await serve(partition);
  // Asked again with its id: the stream drops the second copy; the owner is not asked directly
  // (applied at once, it would leave the stored copy to be applied again once the actor's
  // applied window moved on — the leader-kill chaos test caught one such increment).
  expect(await client.request({ kind: "counter", id }, { type: "inc" }, "st-1")).toEqual({ outcome: "duplicate" });
  expect(host.stats.asked).toBe(0);
  await waitFor(async () => (await readActor(nc, "counter", id))?.context.count === 1 || undefined, {
    timeoutMs: 10_000,
    describe: "the stored copy to be applied",
  });
  // A new id is asked directly as ever.
  expect(await client.request({ kind: "counter", id }, { type: "inc" }, "st-2")).toMatchObject({ outcome: "applied", value: { count: 2 } });
  expect(host.stats.asked).toBe(1);
});

it('`through: "mailbox"` skips the direct ask: the request queues behind the commands the caller sent before it', async () => {
  const { id, partition } = idIn(used, "ordered");
  const host = await serve(partition);
  const nc = await conn();
  const client = new MailboxClient(nc, P);
  for (let i = 0; i < 3; i++) expect((await client.send({ kind: "counter", id }, { type: "inc", by: 1 }, `s-${i}`)).outcome).toBe("stored");
  const answer = await client.request({ kind: "counter", id }, { type: "inc", by: 10 }, "s-last", 10_000, { through: "mailbox" });
  expect(answer).toMatchObject({ outcome: "applied", value: { count: 13 } });
  expect(host.stats.asked).toBe(0);
});

it("a direct ask that times out is answered timeout and not stored in the mailbox: applied once when its held write lands, and the same id again is a duplicate", async () => {
  const { id, partition } = idIn(used, "slow");
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const host = await serve(partition, {
    log: (log) => decorateLog(log, async (key, _value, next) => (key === `counter.${id}` && (await gate), next())),
  });
  const nc = await conn();
  const client = new MailboxClient(nc, P);
  const before = await mailboxLastSeq(nc);

  // Its write waits (as on a stream whose leader is being elected): the caller gives up first.
  expect(await client.request({ kind: "counter", id }, { type: "inc", by: 1 }, "slow-1", 300)).toEqual({ outcome: "timeout" });
  // A stored copy could be delivered after the applied window moved on and be applied twice: none is stored.
  expect(await mailboxLastSeq(nc)).toBe(before);
  open();
  await waitFor(async () => (await readActor(nc, "counter", id))?.context.count === 1 || undefined, { timeoutMs: 10_000, describe: "the held write" });
  expect(await client.request({ kind: "counter", id }, { type: "inc", by: 1 }, "slow-1")).toEqual({ outcome: "duplicate" });
  expect((await readActor(nc, "counter", id))?.context.count).toBe(1);
  expect(host.stats.asked).toBe(2);
  expect(await mailboxLastSeq(nc)).toBe(before);
});

/** A gate the actor's writes wait at while it is closed. */
function gate() {
  let open: () => void = () => undefined;
  let opened = new Promise<void>((r) => (open = r));
  let closed = false;
  return {
    close() {
      closed = true;
      opened = new Promise<void>((r) => (open = r));
    },
    open() {
      closed = false;
      open();
    },
    async pass(): Promise<void> {
      if (!closed) return;
      this.held++;
      await opened;
    },
    /** Writes that reached the gate while it was closed. */
    held: 0,
  };
}

/**
 * An ask's clock (`askActor`'s `elapsed`): half its time is gone when the test calls `halfGone`;
 * any later wait is a real timer. `asked`: how many waits the ask has started.
 */
function halfClock() {
  let halfGone!: () => void;
  const half = new Promise<void>((resolve) => (halfGone = resolve));
  const clock = {
    asked: 0,
    halfGone: () => halfGone(),
    elapsed: (ms: number) => (++clock.asked === 1 ? half : new Promise<void>((resolve) => setTimeout(resolve, ms))),
  };
  return clock;
}

/**
 * `askActor` (gateways/api/ask.ts) when its local attempt is slow: one id must never travel both paths
 * at once, or a busy actor applies it twice (its applied window holds 32 ids). The actor's writes
 * wait at a gate; the host applies one command a write, so each command is its own transition.
 */
async function serveGated(id: string, g: ReturnType<typeof gate>): Promise<{ host: ActorHost; client: MailboxClient; nc: NatsConnection }> {
  const gated = (log: ActorLog) =>
    decorateLog(log, async (key, _value, next) => {
      if (key.endsWith(id)) await g.pass();
      return next();
    });
  const host = await serve(partitionOf(id, P), { log: gated }, 1);
  const nc = await conn();
  return { host, client: new MailboxClient(nc, P), nc };
}

it("a local attempt still being stored when half its time is gone is waited for, never sent again: a busy actor applies it once", async () => {
  const { id } = idIn(used, "ask-inflight");
  const g = gate();
  const { host, client, nc } = await serveGated(id, g);
  expect(await askActor({ host, mailbox: client }, { kind: "counter", id }, { type: "inc" }, "warm", 5_000)).toMatchObject({ outcome: "applied" });
  const before = await mailboxLastSeq(nc);
  const asked = host.stats.asked;

  g.close();
  const clock = halfClock();
  const slow = askActor({ host, mailbox: client, elapsed: clock.elapsed }, { kind: "counter", id }, { type: "inc" }, "slow-1", 4_000);
  await waitFor(() => g.held >= 1 || undefined, { timeoutMs: 5_000, describe: "the command's write to reach the gate" });
  // 40 other commands wait behind it: once they are applied its id has left the applied window.
  const others = Array.from({ length: 40 }, (_, i) => host.dispatch({ kind: "counter", id }, { type: "inc" }, `other-${i}`));
  // Past half its budget: sent again now, its copy would queue behind the 40 and be applied a second time.
  clock.halfGone();
  await waitFor(() => clock.asked >= 2 || undefined, { timeoutMs: 5_000, describe: "the ask to decide at half its time" });
  g.open();

  expect(await slow).toMatchObject({ outcome: "applied", value: { count: 2 } });
  for (const o of others) expect(await o).toMatchObject({ outcome: "applied" });
  expect(host.stats.asked).toBe(asked);
  expect(await mailboxLastSeq(nc)).toBe(before);
  expect((await readActor(nc, "counter", id))?.context.count).toBe(42);
});

it("a local attempt still waiting in its lane when half its time is gone is taken back and sent through the mailbox: applied once, and answered", async () => {
  const { id } = idIn(used, "ask-queued");
  const g = gate();
  const { host, client, nc } = await serveGated(id, g);
  expect(await askActor({ host, mailbox: client }, { kind: "counter", id }, { type: "inc" }, "warm", 5_000)).toMatchObject({ outcome: "applied" });

  g.close();
  // Another command's write holds the lane; the asked one waits behind it.
  const blocking = host.dispatch({ kind: "counter", id }, { type: "inc" }, "blocking");
  await waitFor(() => g.held >= 1 || undefined, { timeoutMs: 5_000, describe: "the blocking write to reach the gate" });
  const asked = host.stats.asked;
  const clock = halfClock();
  const queued = askActor({ host, mailbox: client, elapsed: clock.elapsed }, { kind: "counter", id }, { type: "inc", by: 10 }, "queued-1", 4_000);
  // Taken back at half its budget and asked again of the partition's owner (here), which queues it anew.
  clock.halfGone();
  await waitFor(() => host.stats.asked > asked || undefined, { timeoutMs: 5_000, describe: "the command to be asked again directly" });
  g.open();

  expect(await blocking).toMatchObject({ outcome: "applied" });
  expect(await queued).toMatchObject({ outcome: "applied", value: { count: 12 } });
  expect((await readActor(nc, "counter", id))?.context.count).toBe(12);
});
