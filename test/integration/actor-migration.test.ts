// The migration hook on a real server (issue 9, item 5): a host running a kind's version 2
// loads a record its version 1 stored, migrates it before deciding, and writes it back as
// version 2; a host still on version 1 never decides on a version-2 record.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { ActorHost, partitionOf, PartitionLog } from "../../runtime/index.js";
import { DEFAULT_TOPOLOGY, ensureTopology } from "../../runtime/topology.js";
import { silentLogger } from "../../runtime/log.js";
import type { ActorDefinition } from "../../runtime/actor/define.js";
import { startServer, type NatsServerHandle } from "../harness/index.js";
import { readActor } from "../fixtures/read-actor.js";
import { tallyV1, tallyV2 } from "../fixtures/tally-actor.js";

const P = DEFAULT_TOPOLOGY.partitions;
let server: NatsServerHandle;
const connections: NatsConnection[] = [];

/** A host of `actors` that claims `partition` (a new epoch: whoever served it before is fenced). */
async function hostFor(partition: number, actors: ActorDefinition[], node: string) {
  const nc = await connect(server.connectOptions());
  connections.push(nc);
  const claimed = await PartitionLog.claim(nc, partition, { node, incarnation: node }, () => true, Date.now());
  if (claimed.outcome !== "claimed") throw new Error(`claim failed: ${claimed.outcome}`);
  const host = new ActorHost({ nc, partitions: P, actors, logger: silentLogger });
  await host.serve(claimed.log, { mailbox: false });
  return { nc, host };
}

beforeAll(async () => {
  server = await startServer();
  const nc = await connect(server.connectOptions());
  connections.push(nc);
  await ensureTopology(nc, DEFAULT_TOPOLOGY);
});

afterAll(async () => {
  for (const nc of connections) await nc.close().catch(() => undefined);
  await server?.dispose();
});

describe("actor snapshot migrations in the host", () => {
  const id = "tally-1";
  const address = { kind: "tally", id };
  const p = partitionOf(id, P);

  it("a host of version 2 loads a record version 1 stored, migrates it before deciding, and stores it as version 2", async () => {
    const v1 = await hostFor(p, [tallyV1], "v1");
    expect(await v1.host.dispatch(address, { type: "add", by: 2 }, "c1")).toMatchObject({ outcome: "applied", value: { count: 2 } });
    expect(await v1.host.dispatch(address, { type: "add", by: 3 }, "c2")).toMatchObject({ outcome: "applied", value: { count: 5 } });
    const before = await readActor(v1.nc, "tally", id);
    expect(before).toMatchObject({ version: 1, transitions: 2, context: { count: 5 } });

    const v2 = await hostFor(p, [tallyV2], "v2");
    expect(await v2.host.dispatch(address, { type: "add", by: 4 }, "c3")).toMatchObject({ outcome: "applied", value: { total: 9 } });
    const after = await readActor(v2.nc, "tally", id);
    expect(after).toMatchObject({ version: 2, transitions: 3, context: { total: 9, added: [4] } });
    expect((after as { applied: string[] }).applied).toHaveLength(3);
    // What the record remembered of version 1 still holds: a redelivered command is not applied twice.
    expect(await v2.host.dispatch(address, { type: "add", by: 2 }, "c1")).toEqual({ outcome: "duplicate" });
  });

  it("the host's read decodes a record an older version stored and migrates it, as the lane's load does, without waking the actor", async () => {
    const other = "tally-read";
    const q = partitionOf(other, P);
    const v1 = await hostFor(q, [tallyV1], "read-v1");
    expect(await v1.host.dispatch({ kind: "tally", id: other }, { type: "add", by: 6 }, "r1")).toMatchObject({ outcome: "applied" });
    const v2 = await hostFor(q, [tallyV2], "read-v2");
    const read = await v2.host.read(tallyV2, other);
    expect(read).toMatchObject({ outcome: "found", snapshot: { value: "open", context: { total: 6, added: [] } }, record: { transitions: 1, version: 1 } });
    expect(await v2.host.read(tallyV2, "tally-never")).toEqual({ outcome: "missing" });
    expect(v2.host.actorsInMemory()).toBe(0);
  });

  it("a host still on version 1 does not decide on a record version 2 stored: the command is kept for a newer node, the record untouched", async () => {
    const stored = await readActor(connections[0]!, "tally", id);
    expect(stored?.version).toBe(2);
    const old = await hostFor(p, [tallyV1], "rollback");
    expect(await old.host.dispatch(address, { type: "add", by: 1 }, "c4")).toEqual({ outcome: "kept", reason: "fault" });
    expect(await readActor(old.nc, "tally", id)).toMatchObject({ revision: stored!.revision, version: 2, context: { total: 9 } });
  });
});
