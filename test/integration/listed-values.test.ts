import { afterAll, beforeAll, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { Kvm, type KV } from "@nats-io/kv";
import { listedValues } from "../../actors/index.js";
import { startServer, type NatsServerHandle } from "../harness/index.js";

// listedValues: a listing's last values by one batched direct get (no consumer made), the same
// answer as the consumer's, and past the server's 1,024 keys for one batch, the consumer's.

let server: NatsServerHandle;
let nc: NatsConnection;
let kv: KV;

beforeAll(async () => {
  server = await startServer();
  nc = await connect(server.connectOptions());
  kv = await new Kvm(nc).create("listed", { history: 1 });
}, 30_000);
afterAll(async () => {
  await nc?.close();
  await server?.dispose();
});

const keysOf = async (filter: string) => (await listedValues(nc, "listed", filter)).map((v) => v.key).sort();

it("answers the last value of each matching key, deleted and purged ones left out; none matching is an empty list", async () => {
  expect(await keysOf("a.*")).toEqual([]);
  await kv.put("a.1", "one");
  await kv.put("a.2", "two");
  await kv.put("a.2", "two again");
  await kv.put("a.3", "three");
  await kv.put("b.1", "other");
  await kv.delete("a.3");
  await kv.put("a.4", "four");
  await kv.purge("a.4");
  expect(await keysOf("a.*")).toEqual(["a.1", "a.2"]);
  const two = (await listedValues(nc, "listed", "a.*")).find((v) => v.key === "a.2")!;
  expect(new TextDecoder().decode(two.data)).toBe("two again");
  expect(two.revision).toBe((await kv.get("a.2"))!.revision);
});

it("past the server's 1,024 keys for one batch, lists through a consumer: every key", async () => {
  const n = 1_100;
  await Promise.all(Array.from({ length: n }, (_, i) => kv.put(`many.${i}`, String(i))));
  const listed = await keysOf("many.*");
  expect(listed).toHaveLength(n);
  expect(new Set(listed).size).toBe(n);
}, 60_000);

it("a bucket whose stream allows no direct get lists through a consumer", async () => {
  const closed = await new Kvm(nc).create("listed-nodirect", { history: 1, allow_direct: false });
  await closed.put("k.1", "one");
  await closed.put("k.2", "two");
  expect((await listedValues(nc, "listed-nodirect", "k.*")).map((v) => v.key).sort()).toEqual(["k.1", "k.2"]);
});
