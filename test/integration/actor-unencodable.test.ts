import { afterAll, beforeAll, expect, it } from "vitest";
import { assign, emit, setup } from "xstate";
import { z } from "zod";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { ActorHost, defineActor, MailboxClient, partitionOf, PartitionLog } from "../../runtime/index.js";
import { CMD_STREAM, DEFAULT_TOPOLOGY, ensureTopology, partitionConsumer } from "../../runtime/topology.js";
import { silentLogger } from "../../runtime/log.js";
import { startServer, waitFor, type NatsServerHandle } from "../harness/index.js";
import { readActor } from "../fixtures/read-actor.js";

/**
 * Issue 8: a batch whose resulting record cannot be encoded (msgpack's recursion overflows on a
 * deeply nested value) must neither wedge the actor nor come back for ever. A tiny actor whose
 * `nest` event makes it store a value nested `depth` levels deep: the event itself is small and
 * encodes fine, only the state it produces does not.
 */
const NestEvent = z.discriminatedUnion("type", [
  z.object({ type: z.literal("inc") }),
  z.object({ type: z.literal("nest"), depth: z.number().int().min(0).max(100_000) }),
]);
type NestEvent = z.infer<typeof NestEvent> & { now: number };

function nested(depth: number): unknown {
  let value: unknown = 0;
  for (let i = 0; i < depth; i++) value = { v: value };
  return value;
}

const nestMachine = setup({ types: { context: {} as { count: number; value: unknown }, events: {} as NestEvent } }).createMachine({
  id: "nest",
  context: { count: 0, value: null },
  on: {
    inc: {
      actions: [
        assign({ count: ({ context }) => context.count + 1 }),
        emit(({ context }) => ({ type: "runway.answer" as const, value: { count: context.count } })),
      ],
    },
    nest: { actions: assign({ value: ({ event }) => nested(event.depth) }) },
  },
});
const nestActor = defineActor({ kind: "nest", machine: nestMachine, events: NestEvent });

const P = DEFAULT_TOPOLOGY.partitions;
/** Far beyond what msgpackr's recursive packer survives (about 1,350 levels). */
const TOO_DEEP = 20_000;
let server: NatsServerHandle;
let nc: NatsConnection;
const hosts: ActorHost[] = [];

async function hostFor(id: string): Promise<{ host: ActorHost; mailbox: MailboxClient; partition: number }> {
  const partition = partitionOf(id, P);
  const authority = { node: `host-${id}`, incarnation: `host-${id}` };
  const claimed = await PartitionLog.claim(nc, partition, authority, () => true, Date.now());
  if (claimed.outcome !== "claimed") throw new Error(`claim failed: ${claimed.outcome}`);
  const host = new ActorHost({ nc, partitions: P, actors: [nestActor], logger: silentLogger });
  await host.serve(claimed.log, { mailbox: true });
  hosts.push(host);
  return { host, mailbox: new MailboxClient(nc, P), partition };
}

beforeAll(async () => {
  server = await startServer();
  nc = await connect(server.connectOptions());
  await ensureTopology(nc, DEFAULT_TOPOLOGY);
});

afterAll(async () => {
  for (const h of hosts) await h.stop();
  await nc?.close();
  await server?.dispose();
});

it("a command whose state cannot be encoded is refused state_unencodable and terminated, never redelivered; the actor keeps serving", async () => {
  const id = "deep-mailbox";
  const { host, mailbox, partition } = await hostFor(id);
  const target = { kind: "nest", id };
  expect(await mailbox.request(target, { type: "inc" }, "m1", 10_000)).toMatchObject({ outcome: "applied", value: { count: 1 } });
  expect(await mailbox.request(target, { type: "nest", depth: TOO_DEEP }, "m2", 10_000)).toEqual({ outcome: "invalid_input", reason: "state_unencodable" });
  expect(await mailbox.request(target, { type: "inc" }, "m3", 10_000)).toMatchObject({ outcome: "applied", value: { count: 2 } });
  const jsm = await jetstreamManager(nc);
  await waitFor(
    async () => {
      const info = await jsm.consumers.info(CMD_STREAM, partitionConsumer(partition));
      return info.num_ack_pending === 0 && info.num_pending === 0;
    },
    { timeoutMs: 10_000, describe: `partition ${partition}'s mailbox to hold nothing unacknowledged` },
  );
  expect(host.stats.terminated).toBe(1);
  const record = await readActor(nc, "nest", id);
  expect(record?.transitions).toBe(2);
  expect((record?.context as unknown as { value: unknown }).value).toBeNull();
});

it("in a batch, only the command whose state cannot be stored is refused; the others are stored and answered", async () => {
  const id = "deep-batch";
  const { host } = await hostFor(id);
  const target = { kind: "nest", id };
  // The first command is written alone; the ones queued behind its write are applied as one
  // batch (group commit), so the unencodable state fails that whole batch first.
  const first = host.dispatch(target, { type: "inc" }, "b0");
  const queued = [
    host.dispatch(target, { type: "inc" }, "b1"),
    host.dispatch(target, { type: "nest", depth: 3 }, "b2"),
    host.dispatch(target, { type: "nest", depth: TOO_DEEP }, "b3"),
    host.dispatch(target, { type: "inc" }, "b4"),
    host.dispatch(target, { type: "inc" }, "b5"),
  ];
  expect(await first).toMatchObject({ outcome: "applied" });
  const answers = await Promise.all(queued);
  expect(answers.map((a) => (a.outcome === "invalid_input" ? a.reason : a.outcome))).toEqual(["applied", "applied", "state_unencodable", "applied", "applied"]);
  const record = await readActor(nc, "nest", id);
  expect(record?.context.count).toBe(4);
  expect((record?.context as unknown as { value: unknown }).value).toEqual(nested(3));
  expect(record?.transitions).toBe(5);
  // Still serving, in batches as before.
  expect(await host.dispatch(target, { type: "inc" }, "b6")).toMatchObject({ outcome: "applied", value: { count: 5 } });
});
