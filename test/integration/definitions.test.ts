import { afterAll, beforeAll, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { Kvm, type KV } from "@nats-io/kv";
import { DEFINITIONS_BUCKET, DefinitionStore, ensureDomainTopology } from "../../actors/index.js";
import { startServer, type NatsServerHandle } from "../harness/index.js";

/**
 * The definitions store on a real server (issue 9, item 2): a publish that stored its version
 * record but not the `latest` pointer (the process died in between, or the pointer update
 * failed) must not block the name; the next put finishes what the first one left.
 */
let server: NatsServerHandle;
let nc: NatsConnection;
let kv: KV;
const handlers = new Set(["noop", "echo"]);

beforeAll(async () => {
  // A small max_payload, so a definition within the compiler's limits can still be too large to store.
  server = await startServer({ extraConfig: "max_payload: 65536" });
  nc = await connect(server.connectOptions());
  await ensureDomainTopology(nc, 1);
  kv = await new Kvm(nc).open(DEFINITIONS_BUCKET);
});

afterAll(async () => {
  await nc?.close();
  await server?.dispose();
});

const one = (name: string, handler = "noop") => ({ name, nodes: [{ id: "a", kind: "code", handler }] });
const latestOf = async (tenant: string, name: string) => (await kv.get(`${tenant}.${name}.latest`))?.json<{ version: number; digest: string }>();

/**
 * What a publisher that died between the version record and the pointer leaves behind: the
 * version record and its plan, with `latest` still naming the version before (or nothing).
 */
async function publishWithoutPointer(tenant: string, definition: object, now: number): Promise<{ version: number; digest: string }> {
  // A second store publishes into a scratch tenant to get the exact records a real put writes.
  const scratch = new DefinitionStore(nc, () => handlers);
  const put = await scratch.put(`scratch-${now}`, definition, { publish: true, now });
  if (put.outcome !== "published") throw new Error(`scratch put: ${put.outcome}`);
  const current = await latestOf(tenant, (definition as { name: string }).name);
  const version = (current?.version ?? 0) + 1;
  const name = (definition as { name: string }).name;
  const record = (await kv.get(`scratch-${now}.${name}.v1`))!.json<Record<string, unknown>>();
  await kv.create(`${tenant}.${name}.v${version}`, JSON.stringify({ ...record, version }));
  return { version, digest: put.digest };
}

it("a publish whose latest pointer update was lost: putting the same definition again finishes it (published, latest moves)", async () => {
  const store = new DefinitionStore(nc, () => handlers);
  expect(await store.put("t1", one("wf"), { publish: true, now: 1 })).toMatchObject({ outcome: "published", version: 1 });
  const left = await publishWithoutPointer("t1", one("wf", "echo"), 2);
  expect(left.version).toBe(2);
  expect((await latestOf("t1", "wf"))?.version).toBe(1);
  // Before the fix every later put of this name failed publish_contended: v2 existed, latest said v1.
  const again = await store.put("t1", one("wf", "echo"), { publish: true, now: 3 });
  expect(again).toMatchObject({ outcome: "published", version: 2, digest: left.digest });
  expect(await latestOf("t1", "wf")).toMatchObject({ version: 2, digest: left.digest });
  expect(await store.put("t1", one("wf", "echo"), { publish: true, now: 4 })).toMatchObject({ outcome: "unchanged", version: 2 });
  const resolved = await store.resolve("t1", "wf");
  expect(resolved).toMatchObject({ outcome: "found", ref: { version: 2, digest: left.digest } });
});

it("a publish whose latest pointer update was lost: putting another definition rolls the pointer forward first, then publishes the next version", async () => {
  const store = new DefinitionStore(nc, () => handlers);
  expect(await store.put("t2", one("wf"), { publish: true, now: 1 })).toMatchObject({ outcome: "published", version: 1 });
  await publishWithoutPointer("t2", one("wf", "echo"), 5);
  const next = await store.put("t2", { ...one("wf"), nodes: [{ id: "b", kind: "code", handler: "noop" }] }, { publish: true, now: 6 });
  expect(next).toMatchObject({ outcome: "published", version: 3 });
  expect((await latestOf("t2", "wf"))?.version).toBe(3);
});

it("a first publish whose pointer was never created: the next put creates it", async () => {
  const store = new DefinitionStore(nc, () => handlers);
  const left = await publishWithoutPointer("t3", one("fresh"), 7);
  expect(left.version).toBe(1);
  expect(await latestOf("t3", "fresh")).toBeUndefined();
  expect(await store.put("t3", one("fresh"), { publish: true, now: 8 })).toMatchObject({ outcome: "published", version: 1, digest: left.digest });
  expect((await latestOf("t3", "fresh"))?.version).toBe(1);
});

it("a definition too large to store is refused with a closed code before anything is written", async () => {
  const store = new DefinitionStore(nc, () => handlers);
  const limit = nc.info!.max_payload;
  expect(limit).toBe(65_536);
  // Within the compiler's bounds (a plan of at most 256 KiB), beyond what this server stores in one message.
  const big = { ...one("huge"), result: { pad: "x".repeat(2 * limit) } };
  const put = await store.put("t4", big, { publish: true, now: 9 });
  expect(put).toMatchObject({ outcome: "invalid_definition", errors: [{ code: "definition_too_large" }] });
  expect(await kv.get("t4.huge.v1")).toBeNull();
  expect(await latestOf("t4", "huge")).toBeUndefined();
  const draft = await store.put("t4", big, { publish: false, now: 10 });
  expect(draft).toMatchObject({ outcome: "invalid_definition", errors: [{ code: "definition_too_large" }] });
});

it("a plan asked for by many at once is read once: every caller gets the same plan; a digest with no plan is refused to each, and read again when asked again", async () => {
  const publisher = new DefinitionStore(nc, () => handlers);
  const put = await publisher.put("t5", one("shared"), { publish: true, now: 1 });
  if (put.outcome !== "published") throw new Error(`put: ${put.outcome}`);
  const store = new DefinitionStore(nc, () => handlers);
  const plans = await Promise.all(Array.from({ length: 50 }, () => store.planOf(put.digest)));
  // One read and one parse: the same object for all (each parse would make its own).
  for (const plan of plans) expect(plan).toBe(plans[0]);
  expect(await store.planOf(put.digest)).toBe(plans[0]);
  const missing = await Promise.allSettled(Array.from({ length: 3 }, () => store.planOf("0".repeat(64))));
  for (const m of missing) expect(m).toMatchObject({ status: "rejected", reason: { code: "plan_not_found" } });
  await expect(store.planOf("0".repeat(64))).rejects.toMatchObject({ code: "plan_not_found" });
});
