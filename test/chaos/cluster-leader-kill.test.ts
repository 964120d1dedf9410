import { afterAll, beforeAll, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { createLogger, MailboxClient, partitionOf, partitionStream, startNode, type RunwayNode } from "../../runtime/index.js";
import { startCluster, waitFor, type ClusterHandle } from "../harness/index.js";
import { testActors } from "../fixtures/counter-actor.js";
import { readActor } from "../fixtures/read-actor.js";

const P = 32;
let cluster: ClusterHandle;
let nc: NatsConnection;
let node: RunwayNode | undefined;

beforeAll(async () => {
  cluster = await startCluster(3);
  nc = await connect({ ...cluster.connectOptions(), reconnectTimeWait: 250, maxReconnectAttempts: -1 });
});
afterAll(async () => {
  await node?.stop().catch(() => undefined);
  await nc?.close().catch(() => undefined);
  await cluster?.dispose();
});

it("cluster leader kill: with R3 buckets, killing the partition's stream leader loses no acknowledged transition and processing resumes", async () => {
  node = await startNode({
    connection: cluster.connectOptions(),
    name: "r3-node",
    actors: testActors,
    topology: { replicas: 3 },
    leaseTtlMs: 5_000,
    logger: createLogger("r3-node", "warn"),
  });
  await waitFor(() => node!.host.ownedPartitions().length === P, { timeoutMs: 30_000, describe: "node to own all partitions" });
  const actor = { kind: "counter", id: "durable" };
  const stream = partitionStream(partitionOf(actor.id, P));
  const mailbox = new MailboxClient(nc, P);
  const total = 300;
  const acknowledged = new Set<number>();
  let killed: string | undefined;

  // A command is retried with its own id until the actor answers: "applied" is an acknowledged
  // transition; "duplicate" means an earlier copy was stored and will be applied once.
  const sendUntilAnswered = async (i: number) => {
    for (;;) {
      const answer = await mailbox.request(actor, { type: "inc" }, `inc-${i}`, 3_000);
      if (answer.outcome === "applied") {
        acknowledged.add(i);
        return;
      }
      if (answer.outcome === "duplicate") return;
    }
  };
  let next = 0;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (next < total) {
        const i = next++;
        if (i === 100 && !killed) {
          const jsm = await jetstreamManager(nc);
          const leader = (await jsm.streams.info(stream)).cluster?.leader;
          if (!leader) throw new Error(`no leader for ${stream}`);
          killed = leader;
          await cluster.serverByName(leader).kill();
        }
        await sendUntilAnswered(i);
      }
    }),
  );
  expect(killed).toBeDefined();
  console.log(
    `cluster leader kill: killed ${killed}, ${acknowledged.size} of ${total} commands answered "applied" (the rest were answered by a stored duplicate)`,
  );
  // Every command, acknowledged or not, is applied exactly once. One whose delivery the kill cut
  // off comes again after the mailbox's ack wait (30 s): the deadline is past it.
  await waitFor(async () => (await readActor(nc, actor.kind, actor.id))?.context.count === total, { timeoutMs: 60_000, describe: `counter to reach ${total}` });
  const record = await readActor(nc, actor.kind, actor.id);
  expect(record?.transitions).toBe(total);
  expect(acknowledged.size).toBeGreaterThan(0);

  // Processing resumes on the surviving majority, and the killed server rejoins.
  expect((await mailbox.request(actor, { type: "inc" }, "after-kill", 10_000)).outcome).toBe("applied");
  await cluster.serverByName(killed!).restart();
  await cluster.waitHealthy(30_000);
  expect((await mailbox.request(actor, { type: "inc" }, "after-rejoin", 10_000)).outcome).toBe("applied");
  expect((await readActor(nc, actor.kind, actor.id))?.context.count).toBe(total + 2);
});
