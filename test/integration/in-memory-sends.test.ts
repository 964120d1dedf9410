import { afterAll, beforeAll, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { ActorHost, createLogger, MailboxClient, partitionOf, PartitionLog, startNode, type HostDecorators, type RunwayNode } from "../../runtime/index.js";
import { CMD_STREAM, DEFAULT_TOPOLOGY, ensureTopology, mailboxSubject } from "../../runtime/topology.js";
import { silentLogger } from "../../runtime/log.js";
import { startServer, waitFor, type NatsServerHandle } from "../harness/index.js";
import { testActors } from "../fixtures/counter-actor.js";
import { readActor } from "../fixtures/read-actor.js";
import { decorateLog } from "../fixtures/faults.js";

// Issue 9, item 3: commands to actors this node serves are delivered in memory, still recorded in the outbox.
const P = DEFAULT_TOPOLOGY.partitions;
let server: NatsServerHandle;
let nc: NatsConnection;
let node: RunwayNode;
let mailbox: MailboxClient;

beforeAll(async () => {
  server = await startServer();
  node = await startNode({ connection: server.connectOptions(), name: "inbox-node", actors: testActors, logger: createLogger("inbox-node", "warn") });
  await waitFor(() => node.host.ownedPartitions().length === P, { timeoutMs: 30_000, describe: "the node to serve every partition" });
  nc = await connect(server.connectOptions());
  mailbox = new MailboxClient(nc, P);
});

afterAll(async () => {
  await node?.stop();
  await nc?.close();
  await server?.dispose();
});

/** Commands the mailbox stream has taken so far (its last sequence: acknowledged ones are deleted, not forgotten). */
async function commandsStored(): Promise<number> {
  return (await (await jetstreamManager(nc)).streams.info(CMD_STREAM)).state.last_seq;
}

it("a send to a kind that takes sends in memory is applied in the sender's lane, never through the mailbox, and stays in the sender's stored outbox", async () => {
  const before = await commandsStored();
  const delivered = node.host.stats.deliveredInMemory;
  const asked = node.host.stats.asked;
  for (let i = 0; i < 5; i++) {
    const answer = await mailbox.request(
      { kind: "counter", id: "mem-sender" },
      { type: "ping", to: { kind: "inbox", id: "mem-receiver" }, by: 2 },
      `mem-ping-${i}`,
    );
    expect(answer.outcome).toBe("applied");
  }
  // A ping asked of the owner directly is answered as an in-process caller is, once the sender's
  // durable entries are out: the receiver stores the last send right after (the mailbox path,
  // answered only after it, is the last test's).
  const receiver = await waitFor(
    async () => {
      const read = await readActor(nc, "inbox", "mem-receiver");
      return read?.context.count === 10 ? read : undefined;
    },
    { timeoutMs: 10_000, describe: "the receiver to store the five sends" },
  );
  expect(receiver?.transitions).toBe(5);
  // The pings were asked of the owner directly (or, while its partitions were still being
  // served, went through the mailbox); the five sends were applied in memory, never in the mailbox.
  expect((await commandsStored()) - before).toBe(5 - (node.host.stats.asked - asked));
  expect(node.host.stats.deliveredInMemory - delivered).toBe(5);
  // Crash safety: the send is in the sender's stored outbox, to be delivered again (deduped by id) by the next loader.
  const sender = await readActor(nc, "counter", "mem-sender");
  expect(sender?.outbox).toEqual([
    { id: "mem-ping-4/0", effect: { type: "runway.send", to: { kind: "inbox", id: "mem-receiver" }, event: { type: "inc", by: 2 } } },
  ]);
});

it("a kind that takes sends in memory sends through the mailbox itself, and so does any sender to a mailbox kind", async () => {
  const before = await commandsStored();
  const delivered = node.host.stats.deliveredInMemory;
  const asked = node.host.stats.asked;
  const back = await mailbox.request({ kind: "inbox", id: "mem-back" }, { type: "ping", to: { kind: "counter", id: "mem-back-target" } }, "mem-back-1");
  expect(back.outcome).toBe("applied");
  const plain = await mailbox.request({ kind: "counter", id: "mem-plain" }, { type: "ping", to: { kind: "sink", id: "mem-plain-target" } }, "mem-plain-1");
  expect(plain.outcome).toBe("applied");
  await waitFor(async () => (await readActor(nc, "counter", "mem-back-target"))?.context.count === 1, { timeoutMs: 10_000, describe: "the inbox's send" });
  await waitFor(async () => (await readActor(nc, "sink", "mem-plain-target"))?.context.count === 1, { timeoutMs: 10_000, describe: "the counter's send" });
  // The two sends went through the mailbox (and so did any command not asked of the owner directly).
  expect((await commandsStored()) - before).toBe(4 - (node.host.stats.asked - asked));
  expect(node.host.stats.deliveredInMemory - delivered).toBe(0);
});

it("a send to a receiver whose partition is not served here is published to its mailbox", async () => {
  // A server of its own, where one host serves only the sender's partition.
  const alone = await startServer();
  const hostNc = await connect(alone.connectOptions());
  try {
    const sender = "far-sender";
    const receiver = Array.from({ length: 100 }, (_, i) => `far-receiver-${i}`).find((id) => partitionOf(id, P) !== partitionOf(sender, P))!;
    await ensureTopology(hostNc, DEFAULT_TOPOLOGY);
    const claimed = await PartitionLog.claim(hostNc, partitionOf(sender, P), { node: "far-host", incarnation: "far-host" }, () => true, Date.now());
    if (claimed.outcome !== "claimed") throw new Error(`claim: ${claimed.outcome}`);
    const host = new ActorHost({ nc: hostNc, partitions: P, actors: testActors, logger: silentLogger });
    await host.serve(claimed.log, { mailbox: false });
    const answer = await host.dispatch({ kind: "counter", id: sender }, { type: "ping", to: { kind: "inbox", id: receiver } }, "far-ping-1");
    expect(answer.outcome).toBe("applied");
    expect(host.stats.deliveredInMemory).toBe(0);
    // Published with the entry's id, waiting in the receiver's mailbox for whoever serves it.
    const msg = await (
      await jetstreamManager(hostNc)
    ).streams.getMessage(CMD_STREAM, { last_by_subj: mailboxSubject(partitionOf(receiver, P), "inbox", receiver) });
    expect(msg?.header?.get("Rw-Id")).toBe("far-ping-1/0");
    await host.stop();
  } finally {
    await hostNc.close();
    await alone.dispose();
  }
});

it("a caller in this process is answered once the sender's durable entries are out, not held by the receiver's queue; a mailbox command is acknowledged after the receiver stored it", async () => {
  const alone = await startServer();
  const hostNc = await connect(alone.connectOptions());
  try {
    await ensureTopology(hostNc, DEFAULT_TOPOLOGY);
    const sender = "gate-sender";
    const receiver = "gate-receiver";
    // The receiver's writes wait at a gate this test opens.
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const decorate: HostDecorators = {
      log: (log) => decorateLog(log, async (key, _value, next) => (key === `inbox.${receiver}` && (await gate), next())),
    };
    const host = new ActorHost({ nc: hostNc, partitions: P, actors: testActors, logger: silentLogger, decorate });
    for (const p of new Set([partitionOf(sender, P), partitionOf(receiver, P)])) {
      const claimed = await PartitionLog.claim(hostNc, p, { node: "gate-host", incarnation: "gate-host" }, () => true, Date.now());
      if (claimed.outcome !== "claimed") throw new Error(`claim: ${claimed.outcome}`);
      await host.serve(claimed.log, { mailbox: true });
    }
    const local = await host.dispatch({ kind: "counter", id: sender }, { type: "ping", to: { kind: "inbox", id: receiver } }, "gate-1");
    expect(local.outcome).toBe("applied");
    expect(await readActor(hostNc, "inbox", receiver)).toBeUndefined();
    // Through the mailbox, the next command waits for the sender's lane, which waits for the
    // receiver; it is answered only once the receiver stored it (read at once, not waited for).
    // (A direct request is answered as an in-process caller is: `through` keeps it in the mailbox.)
    const viaMailbox = new MailboxClient(hostNc, P).request(
      { kind: "counter", id: sender },
      { type: "ping", to: { kind: "inbox", id: receiver } },
      "gate-2",
      20_000,
      { through: "mailbox" },
    );
    open();
    expect((await viaMailbox).outcome).toBe("applied");
    expect((await readActor(hostNc, "inbox", receiver))?.context.count).toBe(2);
    expect(host.stats.deliveredInMemory).toBe(2);
    await host.stop();
  } finally {
    await hostNc.close();
    await alone.dispose();
  }
});
