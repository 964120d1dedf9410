import { afterAll, beforeAll, expect, it } from "vitest";
import { actorRecordCodec, createLogger, partitionBucket, partitionOf, startNode, type RunwayNode } from "../../runtime/index.js";
import { natsCli, startServer, waitFor, type NatsServerHandle } from "../harness/index.js";
import { testActors } from "../fixtures/counter-actor.js";

let server: NatsServerHandle;
let node: RunwayNode;

beforeAll(async () => {
  server = await startServer();
  node = await startNode({ connection: server.connectOptions(), name: "cli-node", actors: testActors, logger: createLogger("cli-node", "warn") });
  await waitFor(() => node.host.ownedPartitions().length === 32, { timeoutMs: 20_000, describe: "node to own all partitions" });
});
afterAll(async () => {
  await node?.stop();
  await server?.dispose();
});

it("nats cli sees it: buckets, keys, values, streams and consumers are readable with the real CLI", async () => {
  const id = "visible";
  for (let i = 0; i < 3; i++) expect((await node.mailbox.request({ kind: "counter", id }, { type: "inc", by: 2 }, `cli-${i}`)).outcome).toBe("applied");
  const bucket = partitionBucket(partitionOf(id, 32));

  const ls = await natsCli(server, ["kv", "ls"]);
  expect(ls.code, ls.stderr).toBe(0);
  expect(ls.stdout).toContain(bucket);
  expect(ls.stdout).toContain("rw_nodes");

  // Actor state under a dotted key, in plain msgpack that our codec (or any msgpack tool) decodes.
  const raw = await natsCli(server, ["kv", "get", bucket, `counter.${id}`, "--raw"], { raw: true });
  expect(raw.code, raw.stderr).toBe(0);
  const decoded = actorRecordCodec.decode(new Uint8Array(raw.raw!));
  expect(decoded.ok).toBe(true);
  if (decoded.ok) expect((decoded.value.snapshot as { context: { count: number } }).context.count).toBe(6);

  // Ownership and liveness records are JSON, readable as they are.
  const fence = await natsCli(server, ["kv", "get", bucket, "fence", "--raw"]);
  expect(JSON.parse(fence.stdout)).toMatchObject({ owner: "cli-node" });
  const member = await natsCli(server, ["kv", "get", "rw_nodes", "node.cli-node", "--raw"]);
  expect(JSON.parse(member.stdout)).toMatchObject({ node: "cli-node" });

  // History shows the transitions.
  const history = await natsCli(server, ["kv", "history", bucket, `counter.${id}`]);
  expect(history.code, history.stderr).toBe(0);
  expect(history.stdout).toContain(`counter.${id}`);

  const streamInfo = await natsCli(server, ["stream", "info", "RUNWAY_CMD"]);
  expect(streamInfo.code, streamInfo.stderr).toBe(0);
  expect(streamInfo.stdout).toContain("rw.cmd.>");
  expect(streamInfo.stdout).toMatch(/Work ?Queue/i);

  const report = await natsCli(server, ["consumer", "report", "RUNWAY_CMD"]);
  expect(report.code, report.stderr).toBe(0);
  for (const p of [0, 7, 31]) expect(report.stdout).toContain(`rw-mailbox-p${p}`);

  const consumerInfo = await natsCli(server, ["consumer", "info", "RUNWAY_CMD", "rw-mailbox-p7"]);
  expect(consumerInfo.stdout).toContain("rw.cmd.7.>");
  expect(consumerInfo.stdout).toMatch(/pinned/i);

  const jsReport = await natsCli(server, ["server", "report", "jetstream"], { sys: true });
  expect(jsReport.code, jsReport.stderr).toBe(0);
});
