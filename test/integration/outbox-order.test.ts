/**
 * The order a stored transition's outbox goes out in (runtime/actor/outbox.ts): a send marked
 * `last` is published only once the transition's other durable entries are out. A run's word
 * to its tenant is one: once the tenant hears it, the run leaves what recovery reads (its
 * member key), so whatever else the run's end published must be out by then.
 */
import { beforeAll, expect, it } from "vitest";
import type { NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { createLogger, partitionOf } from "../../runtime/index.js";
import { CMD_STREAM, DEFAULT_TOPOLOGY, mailboxSubject } from "../../runtime/topology.js";
import { LiveEvents } from "../../runtime/actor/live-events.js";
import { publishOutbox, type OutboxContext } from "../../runtime/actor/outbox.js";
import { topologyWorld } from "./topology-world.js";

const P = DEFAULT_TOPOLOGY.partitions;
const world = topologyWorld();
let nc: NatsConnection;

beforeAll(async () => {
  nc = world.nc;
  // A stream that refuses every message but the smallest: a durable publish that fails for good.
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: "TINY", subjects: ["tiny.>"], max_msg_size: 1 });
  await jsm.streams.add({ name: "ORDER", subjects: ["order.>"] });
});

function context(): OutboxContext {
  return {
    nc,
    partitions: P,
    keyOf: (address) => address.id,
    now: () => Date.now(),
    events: new LiveEvents(nc, createLogger("outbox-order", "error")),
    store: () => Promise.resolve({ outcome: "stored", seq: 0, duplicate: false }),
  };
}

async function commandsFor(id: string): Promise<number> {
  const subject = mailboxSubject(partitionOf(id, P), "counter", id);
  const info = await (await jetstreamManager(nc)).streams.info(CMD_STREAM, { subjects_filter: subject });
  return info.state.subjects?.[subject] ?? 0;
}

it("a send marked last goes out only once the other durable entries did: when one of them cannot be stored, it is not sent, while a plain send is", async () => {
  const published = publishOutbox(
    context(),
    { kind: "counter", id: "sender" },
    [
      { id: "order-1", effect: { type: "runway.publish", subject: "tiny.summary", data: { too: "large" } } },
      { id: "order-2", effect: { type: "runway.send", to: { kind: "counter", id: "told-last" }, event: { type: "inc" }, last: true } },
      { id: "order-3", effect: { type: "runway.send", to: { kind: "counter", id: "told-at-once" }, event: { type: "inc" } } },
    ],
    1,
  );
  expect(await published.durable).toBe(false);
  expect(await published.all).toBe(false);
  expect(await commandsFor("told-at-once")).toBe(1);
  expect(await commandsFor("told-last")).toBe(0);
});

it("with every other entry out, the send marked last goes out too", async () => {
  const published = publishOutbox(
    context(),
    { kind: "counter", id: "sender-2" },
    [
      { id: "order-4", effect: { type: "runway.send", to: { kind: "counter", id: "told-last-2" }, event: { type: "inc" }, last: true } },
      { id: "order-5", effect: { type: "runway.publish", subject: "order.summary", data: {} } },
    ],
    1,
  );
  expect(await published.durable).toBe(true);
  expect(await published.all).toBe(true);
  expect(await commandsFor("told-last-2")).toBe(1);
});
