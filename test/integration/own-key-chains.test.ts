/**
 * Keys an actor keeps beside its record, several at once: a tenant's decision sets a member key
 * for every run it admits or ends, and all of them go out as one chain (publishChain,
 * PartitionLog.writeAll, ActorKeys.storeOwn): one round trip, fenced like one write.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, headers, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { kvSubject, partitionBucket, PartitionLog, partitionStream, readLast, systemClock } from "../../runtime/index.js";
import { DEFAULT_TOPOLOGY, ensureTopology } from "../../runtime/topology.js";
import { LiveEvents } from "../../runtime/actor/live-events.js";
import { publishChain } from "../../runtime/nats/jetstream.js";
import { silentLogger } from "../../runtime/log.js";
import { ActorKeys, OwnKeys, type ServedPartition } from "../../runtime/actor/own-keys.js";
import { publishOutbox, type OutboxContext, type StoreEffect } from "../../runtime/actor/outbox.js";
import { startServer, type NatsServerHandle } from "../harness/index.js";

const P = DEFAULT_TOPOLOGY.partitions;
const encoder = new TextEncoder();
let server: NatsServerHandle;
let nc: NatsConnection;

beforeAll(async () => {
  server = await startServer();
  nc = await connect(server.connectOptions());
  await ensureTopology(nc, DEFAULT_TOPOLOGY);
  await (await jetstreamManager(nc)).streams.add({ name: "CHAIN", subjects: ["chain.>"] });
});

afterAll(async () => {
  await nc?.close();
  await server?.dispose();
});

async function lastSequence(stream: string): Promise<number> {
  return (await (await jetstreamManager(nc)).streams.info(stream)).state.last_seq;
}

async function claim(partition: number, node = "chain-owner"): Promise<PartitionLog> {
  const claimed = await PartitionLog.claim(nc, partition, { node, incarnation: node }, () => true, Date.now());
  if (claimed.outcome !== "claimed") throw new Error(`claim of ${partition}: ${claimed.outcome}`);
  return claimed.log;
}

async function value(partition: number, key: string): Promise<string | null> {
  const read = await readLast(nc, partitionStream(partition), kvSubject(partitionBucket(partition), key));
  if (read.outcome !== "found" || read.message.headers["KV-Operation"]) return null;
  return new TextDecoder().decode(read.message.data);
}

describe("publishChain: every message in flight at once, each stored only right behind the one before", () => {
  it("stores them in order, the first behind the sequence named", async () => {
    const before = await lastSequence("CHAIN");
    const chain = await publishChain(
      nc,
      ["a", "b", "c"].map((k) => ({ subject: `chain.${k}`, data: encoder.encode(k) })),
      { expectLastSequence: before },
    );
    expect(chain).toEqual({ outcome: "stored", seqs: [before + 1, before + 2, before + 3] });
  });

  it("a message refused in the middle stops every one after it: a prefix lands", async () => {
    const before = await lastSequence("CHAIN");
    const refused = headers();
    refused.set("Nats-Expected-Last-Subject-Sequence", "999999");
    const chain = await publishChain(
      nc,
      [
        { subject: "chain.d", data: encoder.encode("d") },
        { subject: "chain.e", data: encoder.encode("e"), headers: refused },
        { subject: "chain.f", data: encoder.encode("f") },
        { subject: "chain.g", data: encoder.encode("g") },
      ],
      { expectLastSequence: before },
    );
    expect(chain).toMatchObject({ outcome: "failed", landed: 1, first: { outcome: "conflict" } });
    expect(await lastSequence("CHAIN")).toBe(before + 1);
  });

  it("a foreign message ahead of the chain stops all of it", async () => {
    const before = await lastSequence("CHAIN");
    await nc.request("chain.foreign", encoder.encode("x"));
    const chain = await publishChain(
      nc,
      ["h", "i"].map((k) => ({ subject: `chain.${k}`, data: encoder.encode(k) })),
      { expectLastSequence: before },
    );
    expect(chain).toMatchObject({ outcome: "failed", landed: 0, first: { outcome: "conflict" } });
    expect(await lastSequence("CHAIN")).toBe(before + 1);
  });

  it("a chain of no messages is refused, sending nothing", async () => {
    expect(await publishChain(nc, [], { expectLastSequence: 0 })).toMatchObject({ outcome: "failed", landed: 0, first: { outcome: "rejected" } });
  });

  it("one message above the server's max payload: nothing is sent", async () => {
    const before = await lastSequence("CHAIN");
    const big = new Uint8Array((nc.info?.max_payload ?? 1024 * 1024) + 1);
    const chain = await publishChain(
      nc,
      [
        { subject: "chain.j", data: encoder.encode("j") },
        { subject: "chain.k", data: big },
      ],
      { expectLastSequence: before },
    );
    expect(chain).toMatchObject({ outcome: "failed", landed: 0, first: { outcome: "too_large" } });
    expect(await lastSequence("CHAIN")).toBe(before);
  });
});

describe("publishChain linked by sequence (a replicated stream): one after another, each behind the sequence the one before got", () => {
  it("stores them in order, no message naming another's id; one refused stops the rest; a foreign message ahead stops all", async () => {
    const before = await lastSequence("CHAIN");
    const chain = await publishChain(
      nc,
      ["sa", "sb", "sc"].map((k) => ({ subject: `chain.${k}`, data: encoder.encode(k) })),
      { expectLastSequence: before, links: "sequence" },
    );
    expect(chain).toEqual({ outcome: "stored", seqs: [before + 1, before + 2, before + 3] });
    const stored = await readLast(nc, "CHAIN", "chain.sb");
    if (stored.outcome !== "found") throw new Error("chain.sb missing");
    expect(stored.message.headers["Nats-Expected-Last-Sequence"]).toBe(String(before + 1));
    expect(stored.message.headers["Nats-Msg-Id"]).toBeUndefined();
    expect(stored.message.headers["Nats-Expected-Last-Msg-Id"]).toBeUndefined();

    const refused = headers();
    refused.set("Nats-Expected-Last-Subject-Sequence", "999999");
    const prefix = await publishChain(
      nc,
      [
        { subject: "chain.sd", data: encoder.encode("d") },
        { subject: "chain.se", data: encoder.encode("e"), headers: refused },
        { subject: "chain.sf", data: encoder.encode("f") },
      ],
      { expectLastSequence: before + 3, links: "sequence" },
    );
    expect(prefix).toMatchObject({ outcome: "failed", landed: 1, first: { outcome: "conflict" } });
    expect(await lastSequence("CHAIN")).toBe(before + 4);

    await nc.request("chain.foreign", encoder.encode("x"));
    const behind = await publishChain(
      nc,
      [
        { subject: "chain.sg", data: encoder.encode("g") },
        { subject: "chain.sh", data: encoder.encode("h") },
      ],
      {
        expectLastSequence: before + 4,
        links: "sequence",
      },
    );
    expect(behind).toMatchObject({ outcome: "failed", landed: 0, first: { outcome: "conflict" } });
    expect(await lastSequence("CHAIN")).toBe(before + 5);
  });
});

describe("PartitionLog.writeAll: several keys, one round trip, fenced like one write", () => {
  it("lands every key in order and answers each one's revision; the next write follows on", async () => {
    const log = await claim(1);
    const written = await log.writeAll(["k1", "k2", "k3"].map((key) => ({ key, value: encoder.encode(key) })));
    expect(written.outcome).toBe("written");
    const revisions = (written as { revisions: number[] }).revisions;
    expect(revisions).toEqual([revisions[0], revisions[0]! + 1, revisions[0]! + 2]);
    expect(await value(1, "k2")).toBe("k2");
    expect(await log.write("k4", encoder.encode("k4"))).toEqual({ outcome: "written", revision: revisions[2]! + 1 });
  });

  it("a log of a replicated partition links its keys by sequence, no message ids", async () => {
    const claimed = await PartitionLog.claim(nc, 6, { node: "r3-owner", incarnation: "r3-owner" }, () => true, Date.now(), { replicated: true });
    if (claimed.outcome !== "claimed") throw new Error(`claim of 6: ${claimed.outcome}`);
    const written = await claimed.log.writeAll(["q1", "q2"].map((key) => ({ key, value: encoder.encode(key) })));
    expect(written.outcome).toBe("written");
    const second = await readLast(nc, partitionStream(6), kvSubject(partitionBucket(6), "q2"));
    if (second.outcome !== "found") throw new Error("q2 missing");
    expect(second.message.headers["Nats-Expected-Last-Sequence"]).toBe(String((written as { revisions: number[] }).revisions[0]));
    expect(second.message.headers["Nats-Expected-Last-Msg-Id"]).toBeUndefined();
  });

  it("no entries: nothing is sent and the next write still names the right sequence", async () => {
    const log = await claim(5);
    expect(await log.writeAll([])).toEqual({ outcome: "written", revisions: [] });
    expect((await log.write("after-none", encoder.encode("x"))).outcome).toBe("written");
  });

  it("a write by another host in between: nothing of the chain lands, the log answers stale, and writes again after", async () => {
    const log = await claim(2);
    const other = await PartitionLog.attach(nc, 2, log.authority);
    expect((await other.write("theirs", encoder.encode("x"))).outcome).toBe("written");
    const before = await lastSequence(partitionStream(2));
    expect(await log.writeAll(["m1", "m2"].map((key) => ({ key, value: encoder.encode(key) })))).toEqual({ outcome: "stale" });
    expect(await lastSequence(partitionStream(2))).toBe(before);
    expect(await value(2, "m1")).toBeNull();
    expect((await log.writeAll(["m1", "m2"].map((key) => ({ key, value: encoder.encode(key) })))).outcome).toBe("written");
    expect(await value(2, "m2")).toBe("m2");
  });

  it("after a new owner's claim the old owner's chain is fenced and nothing lands", async () => {
    const log = await claim(3, "old-owner");
    await claim(3, "new-owner");
    const before = await lastSequence(partitionStream(3));
    expect(await log.writeAll(["n1", "n2"].map((key) => ({ key, value: encoder.encode(key) })))).toMatchObject({ outcome: "fenced" });
    expect(await lastSequence(partitionStream(3))).toBe(before);
  });
});

describe("ActorKeys.storeOwn and the outbox: a decision's keys go out as one chain", () => {
  const self = { kind: "tenant", id: "acme" };
  // Every address lands in partition 4 here, which this test's host serves.
  const served = async (): Promise<{ keys: ActorKeys; part: ServedPartition }> => {
    const part = { log: await claim(4), keys: new OwnKeys() };
    const keys = new ActorKeys({
      nc,
      clock: systemClock,
      logger: silentLogger,
      partitionOf: () => 4,
      served: () => [part],
      servedAt: (p) => (p === 4 ? part : undefined),
    });
    return { keys, part };
  };
  const store = (key: string, value: unknown): StoreEffect => ({ type: "runway.store", key: `tenant.acme.${key}`, value });

  it("stores puts and a removal in order, in one write of the log, and remembers them for the actor's next read", async () => {
    const { keys, part } = await served();
    const before = await lastSequence(partitionStream(4));
    const stored = await keys.storeOwn(self, [store("m.r1", { s: "r" }), store("m.r2", { s: "q" }), store("m.r1", null)]);
    expect(stored).toMatchObject({ outcome: "stored", seq: before + 3 });
    expect(part.log.stats.writes).toBe(3);
    expect(await value(4, "tenant.acme.m.r1")).toBeNull();
    expect(await value(4, "tenant.acme.m.r2")).toBe(JSON.stringify({ s: "q" }));
    expect(await keys.read(self, "tenant.acme.m.r1")).toEqual({ outcome: "missing" });
    expect(await keys.read(self, "tenant.acme.m.r2")).toMatchObject({ outcome: "found", message: { seq: before + 2 } });
    expect(part.keys.stats).toEqual({ hits: 2, misses: 0 });
  });

  it("a key outside the actor's own is refused and none of the others is written", async () => {
    const { keys } = await served();
    const before = await lastSequence(partitionStream(4));
    const stored = await keys.storeOwn(self, [store("m.r3", { s: "r" }), { type: "runway.store", key: "tenant.other.m.r3", value: { s: "r" } }]);
    expect(stored.outcome).toBe("rejected");
    expect(await lastSequence(partitionStream(4))).toBe(before);
  });

  it("the outbox hands an actor's own keys to storeOwn in one call, in entry order; a lone key goes through store", async () => {
    const calls: string[][] = [];
    const ctx: OutboxContext = {
      nc,
      partitions: P,
      keyOf: (address) => address.id,
      now: () => Date.now(),
      events: new LiveEvents(nc, silentLogger),
      store: (_self, effect) => (calls.push([effect.key]), Promise.resolve({ outcome: "stored", seq: 1, duplicate: false })),
      storeOwn: (_self, effects) => (calls.push(effects.map((e) => e.key)), Promise.resolve({ outcome: "stored", seq: 2, duplicate: false })),
    };
    const entries = ["m.a", "m.b", "m.c"].map((key, i) => ({ id: `own-${i}`, effect: store(key, i) }));
    expect(await publishOutbox(ctx, self, entries, 1).durable).toBe(true);
    expect(await publishOutbox(ctx, self, [{ id: "own-9", effect: store("m.z", 9) }], 2).durable).toBe(true);
    expect(calls).toEqual([["tenant.acme.m.a", "tenant.acme.m.b", "tenant.acme.m.c"], ["tenant.acme.m.z"]]);
  });
});
