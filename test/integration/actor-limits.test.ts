import { afterAll, beforeAll, expect, it } from "vitest";
import { assign, emit, setup } from "xstate";
import { z } from "zod";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import {
  ActorHost,
  defineActor,
  listDeadLetters,
  MailboxClient,
  partitionBucket,
  partitionOf,
  PartitionLog,
  type HostDecorators,
} from "../../runtime/index.js";
import { CMD_STREAM, DEFAULT_TOPOLOGY, ensureTopology, partitionConsumer } from "../../runtime/topology.js";
import { silentLogger } from "../../runtime/log.js";
import type { DeadLetterView } from "../../runtime/actor/dead-letters.js";
import { startServer, waitFor, type NatsServerHandle } from "../harness/index.js";
import { readActor } from "../fixtures/read-actor.js";
import { decorateLog } from "../fixtures/faults.js";

/**
 * Issue 9, item 2: fail, never wedge. A command whose state would exceed the server's max
 * payload is answered `state_too_large` and the actor serves the next one; a poison command and
 * a corrupt record are dead-lettered after N deliveries and counted; nothing is redelivered for
 * ever. The server runs with a 64 KiB max payload, so the limits are reached with small values.
 */
const LoadEvent = z.discriminatedUnion("type", [
  z.object({ type: z.literal("inc") }),
  /** Stores a string of `bytes` characters. */
  z.object({ type: z.literal("grow"), bytes: z.number().int().min(0).max(10_000_000) }),
  /** Publishes (durably, `runway.publish`) a JSON string of `chars` control characters: six bytes each as JSON, one in the record. */
  z.object({ type: z.literal("shout"), chars: z.number().int().min(0).max(1_000_000) }),
  /** Publishes a progress event (best effort, `runway.event`): a JSON string of `chars` control characters. */
  z.object({ type: z.literal("loud"), chars: z.number().int().min(0).max(1_000_000) }),
  /** Stores `text`. */
  z.object({ type: z.literal("mark"), text: z.string() }),
  /** Its guard throws. */
  z.object({ type: z.literal("boom") }),
]);
type LoadEvent = z.infer<typeof LoadEvent> & { now: number };

const loadMachine = setup({
  types: { context: {} as { count: number; blob: string; mark: string }, events: {} as LoadEvent },
  guards: {
    explodes: () => {
      throw new Error("the guard exploded");
    },
  },
}).createMachine({
  id: "load",
  context: { count: 0, blob: "", mark: "" },
  on: {
    inc: {
      actions: [
        assign({ count: ({ context }) => context.count + 1 }),
        emit(({ context }) => ({ type: "runway.answer" as const, value: { count: context.count } })),
      ],
    },
    grow: { actions: assign({ blob: ({ event }) => "x".repeat(event.bytes) }) },
    shout: {
      actions: [
        assign({ count: ({ context }) => context.count + 1 }),
        emit(({ event }) => ({ type: "runway.publish" as const, subject: "rw.test.shout", data: "\u0001".repeat(event.chars) })),
      ],
    },
    loud: {
      actions: [
        assign({ count: ({ context }) => context.count + 1 }),
        emit(({ event }) => ({ type: "runway.event" as const, subject: "rw.test.event", data: "\u0001".repeat(event.chars) })),
      ],
    },
    mark: { actions: assign({ mark: ({ event }) => event.text }) },
    boom: { guard: "explodes", actions: assign({ count: ({ context }) => context.count + 1000 }) },
  },
});
const loadActor = defineActor({ kind: "load", machine: loadMachine, events: LoadEvent });

const P = DEFAULT_TOPOLOGY.partitions;
const MAX_PAYLOAD = 64 * 1024;
const N = 3;
let server: NatsServerHandle;
let nc: NatsConnection;
const hosts: ActorHost[] = [];

/** A host serving `id`'s partition; the previous test's host stops first, so no two live hosts share a mailbox. */
async function hostFor(id: string, decorate?: HostDecorators): Promise<{ host: ActorHost; mailbox: MailboxClient; partition: number }> {
  for (const h of hosts.splice(0)) await h.stop();
  const partition = partitionOf(id, P);
  const authority = { node: `limits-${id}`, incarnation: `limits-${id}` };
  const claimed = await PartitionLog.claim(nc, partition, authority, () => true, Date.now());
  if (claimed.outcome !== "claimed") throw new Error(`claim failed: ${claimed.outcome}`);
  const host = new ActorHost({
    nc,
    partitions: P,
    actors: [loadActor],
    logger: silentLogger,
    node: `limits-${id}`,
    maxDeliveries: N,
    redeliveryBaseMs: 50,
    ...(decorate ? { decorate } : {}),
  });
  await host.serve(claimed.log, { mailbox: true });
  hosts.push(host);
  return { host, mailbox: new MailboxClient(nc, P), partition };
}

/** Every command of the partition's mailbox settled: nothing pending, nothing waiting for an ack. */
async function drained(partition: number): Promise<void> {
  const jsm = await jetstreamManager(nc);
  await waitFor(
    async () => {
      const info = await jsm.consumers.info(CMD_STREAM, partitionConsumer(partition));
      return info.num_ack_pending === 0 && info.num_pending === 0;
    },
    { timeoutMs: 10_000, describe: `partition ${partition}'s mailbox to hold nothing unacknowledged` },
  );
}

/** The dead letters filed for actor `load.<id>`, newest first, once there are `count`. */
async function lettersOf(id: string, count: number): Promise<DeadLetterView[]> {
  return waitFor(
    async () => {
      const listed = await listDeadLetters(nc, { limit: 100 });
      if (listed.outcome !== "ok") return undefined;
      const mine = listed.letters.filter((l) => l.kind === "load" && l.id === id);
      return mine.length >= count ? mine : undefined;
    },
    { timeoutMs: 10_000, describe: `${count} dead letters for load.${id}` },
  );
}

const counted = (host: ActorHost, reason: string) => host.deadLetters.stats().find((s) => s.kind === "load" && s.reason === reason)?.count ?? 0;

beforeAll(async () => {
  server = await startServer({ extraConfig: `max_payload: ${MAX_PAYLOAD}` });
  nc = await connect(server.connectOptions());
  await ensureTopology(nc, DEFAULT_TOPOLOGY);
  // Captures what the test actors publish, so a publish that fits is stored.
  await (await jetstreamManager(nc)).streams.add({ name: "LIMITS_TEST", subjects: ["rw.test.>"] });
});

afterAll(async () => {
  for (const h of hosts) await h.stop();
  await nc?.close();
  await server?.dispose();
});

it("a command whose state would exceed the server's max payload is answered state_too_large, dead-lettered, and the actor serves the next command", async () => {
  expect(nc.info?.max_payload).toBe(MAX_PAYLOAD);
  const id = "big";
  const { host, mailbox, partition } = await hostFor(id);
  const target = { kind: "load", id };
  expect(await mailbox.request(target, { type: "inc" }, "big-1", 5_000)).toMatchObject({ outcome: "applied", value: { count: 1 } });
  // Within the request's deadline: a closed answer, not a retry loop (before: "closed connection", unavailable, for ever).
  expect(await mailbox.request(target, { type: "grow", bytes: 2 * MAX_PAYLOAD }, "big-2", 5_000)).toEqual({
    outcome: "invalid_input",
    reason: "state_too_large",
  });
  expect(await mailbox.request(target, { type: "inc" }, "big-3", 5_000)).toMatchObject({ outcome: "applied", value: { count: 2 } });
  await drained(partition);
  const record = await readActor(nc, "load", id);
  expect(record?.transitions).toBe(2);
  expect((record?.context as unknown as { blob: string }).blob).toBe("");
  const [letter] = await lettersOf(id, 1);
  expect(letter).toMatchObject({ reason: "state_too_large", node: "limits-big", command: "big-2", event: { type: "grow", bytes: 2 * MAX_PAYLOAD } });
  expect(letter!.detail).toContain(String(MAX_PAYLOAD));
  expect(counted(host, "state_too_large")).toBe(1);
});

it("in a batch, only the command whose state is too large is refused; the others are stored and answered", async () => {
  const id = "big-batch";
  const { host } = await hostFor(id);
  const target = { kind: "load", id };
  const first = host.dispatch(target, { type: "inc" }, "bb0");
  const queued = [
    host.dispatch(target, { type: "inc" }, "bb1"),
    host.dispatch(target, { type: "grow", bytes: 1_000 }, "bb2"),
    host.dispatch(target, { type: "grow", bytes: 2 * MAX_PAYLOAD }, "bb3"),
    host.dispatch(target, { type: "inc" }, "bb4"),
  ];
  expect(await first).toMatchObject({ outcome: "applied" });
  const answers = await Promise.all(queued);
  expect(answers.map((a) => (a.outcome === "invalid_input" ? a.reason : a.outcome))).toEqual(["applied", "applied", "state_too_large", "applied"]);
  const record = await readActor(nc, "load", id);
  expect(record?.context.count).toBe(3);
  expect((record?.context as unknown as { blob: string }).blob).toHaveLength(1_000);
  // An in-process command has no mailbox message: its letter is the command as the mailbox would carry it.
  const [letter] = await lettersOf(id, 1);
  expect(letter).toMatchObject({ reason: "state_too_large", command: "bb3", deliveries: 0, event: { type: "grow" } });
});

it("a durable effect larger than the max payload is dead-lettered (effect_too_large) instead of holding its command for ever", async () => {
  const id = "shouter";
  const { host, mailbox, partition } = await hostFor(id);
  const target = { kind: "load", id };
  // 20,000 control characters: 20 KB in the record, 120 KB as JSON.
  expect(await mailbox.request(target, { type: "shout", chars: 20_000 }, "sh-1", 5_000)).toMatchObject({ outcome: "applied" });
  expect(await mailbox.request(target, { type: "inc" }, "sh-2", 5_000)).toMatchObject({ outcome: "applied", value: { count: 2 } });
  await drained(partition);
  const [letter] = await lettersOf(id, 1);
  expect(letter).toMatchObject({ reason: "effect_too_large", subject: "rw.test.shout", command: "sh-1/0" });
  expect(counted(host, "effect_too_large")).toBe(1);
});

// C129 in Runway's terms: the live events path failing (here the server refuses the event) leaves the durable record as it was written.
it("C129 a progress event larger than the max payload is not published live and is counted; the next ones are (no outage), and the actor's record holds both commands", async () => {
  const id = "loudmouth";
  const { host, mailbox, partition } = await hostFor(id);
  const target = { kind: "load", id };
  // 20 KB in the record, 120 KB as JSON.
  expect(await mailbox.request(target, { type: "loud", chars: 20_000 }, "l-1", 5_000)).toMatchObject({ outcome: "applied" });
  expect(await mailbox.request(target, { type: "loud", chars: 10 }, "l-2", 5_000)).toMatchObject({ outcome: "applied" });
  await waitFor(() => host.events.stats.published === 1, { timeoutMs: 10_000, describe: "the small event to be published" });
  expect(host.events.stats.dropped).toBe(1);
  await drained(partition);
  const stored = await readActor(nc, "load", id);
  expect(stored?.context.count).toBe(2);
  expect(stored?.transitions).toBe(2);
  const listed = await listDeadLetters(nc, { limit: 100 });
  expect(listed.outcome === "ok" && listed.letters.filter((l) => l.kind === "load" && l.id === id)).toEqual([]);
});

it("a poison command (its write faults on every delivery) is dead-lettered after N deliveries and counted; the actor's other commands are served meanwhile", async () => {
  const id = "poisoned";
  // The store refuses any record holding the marker, as a store with a bug or a limit we do not classify would.
  const refusing: HostDecorators = {
    log: (log) =>
      decorateLog(log, (_key, value, next) => {
        if (Buffer.from(value).includes("POISON")) return Promise.reject(new Error("injected: the store refuses this record"));
        return next();
      }),
  };
  const { host, mailbox, partition } = await hostFor(id, refusing);
  const target = { kind: "load", id };
  const poison = mailbox.request(target, { type: "mark", text: "POISON" }, "p-1", 15_000);
  const others = [1, 2, 3].map((i) => mailbox.request(target, { type: "inc" }, `p-inc-${i}`, 15_000));
  for (const answer of await Promise.all(others)) expect(answer).toMatchObject({ outcome: "applied" });
  expect(await poison).toEqual({ outcome: "invalid_input", reason: "poison" });
  await drained(partition);
  const record = await readActor(nc, "load", id);
  expect(record?.context.count).toBe(3);
  expect((record?.context as unknown as { mark: string }).mark).toBe("");
  const [letter] = await lettersOf(id, 1);
  expect(letter).toMatchObject({ reason: "poison", deliveries: N, command: "p-1", event: { type: "mark", text: "POISON" } });
  expect(letter!.detail).toContain("injected");
  expect(counted(host, "poison")).toBe(1);
  expect(await mailbox.request(target, { type: "inc" }, "p-after", 5_000)).toMatchObject({ outcome: "applied", value: { count: 4 } });
});

it("a corrupt record: the first command is dead-lettered after N deliveries, later ones at once, all answered corrupt_record; a repaired record serves again", async () => {
  const id = "broken";
  const { host, mailbox, partition } = await hostFor(id);
  const target = { kind: "load", id };
  expect(await mailbox.request(target, { type: "inc" }, "c-1", 5_000)).toMatchObject({ outcome: "applied" });
  const kv = await new Kvm(nc).open(partitionBucket(partition));
  await kv.put(`load.${id}`, new Uint8Array([0xc1, 0xff, 0x00]));
  expect(await mailbox.request(target, { type: "inc" }, "c-2", 10_000)).toEqual({ outcome: "invalid_input", reason: "corrupt_record" });
  expect(await mailbox.request(target, { type: "inc" }, "c-3", 5_000)).toEqual({ outcome: "invalid_input", reason: "corrupt_record" });
  await drained(partition);
  const letters = await lettersOf(id, 2);
  // c-2 went through the mailbox (the owner could not settle it at once) and was delivered N
  // times; c-3 was asked of the owner directly and dead-lettered there, never delivered.
  expect(letters.map((l) => [l.command, l.reason, l.deliveries])).toEqual([
    ["c-3", "corrupt_record", 0],
    ["c-2", "corrupt_record", N],
  ]);
  // Newest first.
  expect(letters[0]!.seq).toBeGreaterThan(letters[1]!.seq);
  expect(counted(host, "corrupt_record")).toBe(2);
  // The operator removes the record: the actor starts afresh.
  await kv.delete(`load.${id}`);
  expect(await mailbox.request(target, { type: "inc" }, "c-4", 5_000)).toMatchObject({ outcome: "applied", value: { count: 1 } });
});

it("a command the machine throws on is answered machine_fault and dead-lettered at once; undecodable mailbox messages are dead-lettered too", async () => {
  const id = "fragile";
  const { host, mailbox, partition } = await hostFor(id);
  const target = { kind: "load", id };
  expect(await mailbox.request(target, { type: "boom" }, "f-1", 5_000)).toEqual({ outcome: "invalid_input", reason: "machine_fault" });
  await nc.request(mailbox.subjectOf(target), new Uint8Array([0xc1, 0x01]), { timeout: 5_000 });
  expect(await mailbox.request(target, { type: "inc" }, "f-2", 5_000)).toMatchObject({ outcome: "applied", value: { count: 1 } });
  await drained(partition);
  const letters = await lettersOf(id, 2);
  // The undecodable message came through the mailbox; f-1 was asked of the owner directly (no delivery).
  expect(letters.map((l) => [l.reason, l.deliveries])).toEqual([
    ["undecodable", 1],
    ["machine_fault", 0],
  ]);
  expect(letters[0]!.data_base64).toBe(Buffer.from([0xc1, 0x01]).toString("base64"));
  expect(letters[1]!.detail).toContain("the guard exploded");
  expect(counted(host, "machine_fault")).toBe(1);
  expect(counted(host, "undecodable")).toBe(1);
});
