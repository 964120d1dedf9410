import { afterEach, beforeEach, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { partitionBucket, partitionStream } from "../../runtime/index.js";
import { ensureTopology, JOURNAL_LIMIT } from "../../runtime/topology.js";
import { startServer, type NatsServerHandle } from "../harness/index.js";

/**
 * `ensureTopology`, which every node runs at start: it lists the server's streams once and
 * creates or changes only what is missing or different.
 */
let server: NatsServerHandle;
let nc: NatsConnection;

beforeEach(async () => {
  server = await startServer();
  nc = await connect(server.connectOptions());
});

afterEach(async () => {
  await nc?.close();
  await server?.dispose();
});

/** The JetStream API requests `run` makes, by kind (`STREAM.CREATE`, `STREAM.UPDATE`, `STREAM.INFO`, …) and by kind and stream. */
async function apiCalls(run: () => Promise<void>): Promise<Record<string, number>> {
  const seen: Record<string, number> = {};
  const sub = nc.subscribe("$JS.API.>", {
    callback: (_err, msg) => {
      const [kind, stream] = [msg.subject.split(".").slice(2, 4).join("."), msg.subject.split(".")[4]];
      seen[kind] = (seen[kind] ?? 0) + 1;
      if (stream) seen[`${kind} ${stream}`] = (seen[`${kind} ${stream}`] ?? 0) + 1;
    },
  });
  await nc.flush();
  await run();
  await nc.flush();
  sub.unsubscribe();
  return seen;
}

it("a node restarting against a cluster already set up lists the streams once and creates or changes nothing", async () => {
  const first = await apiCalls(() => ensureTopology(nc, { partitions: 4, replicas: 1 }));
  expect(first["STREAM.CREATE"]).toBeGreaterThanOrEqual(4 + 4);
  const again = await apiCalls(() => ensureTopology(nc, { partitions: 4, replicas: 1 }));
  expect(again["STREAM.CREATE"] ?? 0).toBe(0);
  expect(again["STREAM.UPDATE"] ?? 0).toBe(0);
  expect(again["STREAM.LIST"]).toBe(1);
  // What is left: opening the meta bucket and reading the partition count it records.
  expect(again["STREAM.INFO"] ?? 0).toBeLessThanOrEqual(1);
});

it("turns journals and per-message TTL on in place in a partition bucket made before they existed, and leaves its data", async () => {
  const old = await new Kvm(nc).create(partitionBucket(2), { history: 1 });
  await old.put("run.kept", "still here");
  const jsm = await jetstreamManager(nc);
  const before = (await jsm.streams.info(partitionStream(2))).config as unknown as Record<string, unknown>;
  expect(before.allow_msg_ttl).toBeFalsy();
  expect(before.max_msgs_per_subject).toBe(1);
  const calls = await apiCalls(() => ensureTopology(nc, { partitions: 4, replicas: 1 }));
  // Updated once (both flags in one update), not created again; the partitions made now are created, then given the flags.
  expect(calls[`STREAM.UPDATE ${partitionStream(2)}`]).toBe(1);
  expect(calls[`STREAM.CREATE ${partitionStream(2)}`] ?? 0).toBe(0);
  const after = (await jsm.streams.info(partitionStream(2))).config as unknown as Record<string, unknown>;
  expect(after).toMatchObject({ allow_msg_ttl: true, allow_rollup_hdrs: true, max_msgs_per_subject: JOURNAL_LIMIT });
  expect((await (await new Kvm(nc).open(partitionBucket(2))).get("run.kept"))?.string()).toBe("still here");
});

it("refuses a node configured for another partition count than the cluster was made with", async () => {
  await ensureTopology(nc, { partitions: 4, replicas: 1 });
  await expect(ensureTopology(nc, { partitions: 8, replicas: 1 })).rejects.toMatchObject({ code: "topology_mismatch" });
});

it("nodes starting side by side on an empty server all finish setting it up, whoever creates each stream first", async () => {
  const others = await Promise.all([0, 1, 2].map(() => connect(server.connectOptions())));
  try {
    await Promise.all([nc, ...others].map((c) => ensureTopology(c, { partitions: 4, replicas: 1 })));
    const again = await apiCalls(() => ensureTopology(nc, { partitions: 4, replicas: 1 }));
    expect(again["STREAM.CREATE"] ?? 0).toBe(0);
    expect(again["STREAM.UPDATE"] ?? 0).toBe(0);
  } finally {
    await Promise.all(others.map((c) => c.close()));
  }
});
