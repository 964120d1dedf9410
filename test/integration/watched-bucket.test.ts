/**
 * The in-memory copy of a small bucket (tool servers, model providers, API keys): served from
 * memory while the server is frozen, kept current by its watch, never holding an older revision
 * over a newer one, and current again after the server restarts (a deletion made after the
 * restart is never answered from the old copy).
 */
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { Kvm, type KV } from "@nats-io/kv";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WatchedBucket } from "../../runtime/index.js";
import { startServer, waitFor, type NatsServerHandle } from "../harness/index.js";

let server: NatsServerHandle;
let reader: NatsConnection;
let writer: NatsConnection;
let writerKv: KV;
let watched: WatchedBucket<{ n: number }>;
const changes: Array<[string, number | null]> = [];

beforeAll(async () => {
  server = await startServer();
  reader = await connect({ ...server.connectOptions(), maxReconnectAttempts: -1, reconnectTimeWait: 100 });
  writer = await connect({ ...server.connectOptions(), maxReconnectAttempts: -1, reconnectTimeWait: 100 });
  writerKv = await new Kvm(writer).create("watched_test", { history: 1, storage: "file" });
  const readerKv = await new Kvm(reader).open("watched_test");
  watched = new WatchedBucket(
    async () => readerKv,
    (e) => e.json<{ n: number }>(),
    100,
  );
  watched.onChange((key, value) => changes.push([key, value?.n ?? null]));
  await watched.start();
});

afterAll(async () => {
  await watched?.close();
  await reader?.close();
  await writer?.close();
  await server?.dispose();
});

describe("WatchedBucket", () => {
  it("learns another connection's writes by its watch, and answers a known key from memory while the server is frozen", async () => {
    await writerKv.put("a", JSON.stringify({ n: 1 }));
    await waitFor(() => changes.some(([k, n]) => k === "a" && n === 1), { timeoutMs: 5_000, describe: "the watch saw a=1" });
    await server.pause();
    try {
      // A store read would wait for the frozen server; the copy answers at once.
      const answer = await Promise.race([watched.get("a"), new Promise((r) => setTimeout(() => r("timed out"), 2_000))]);
      expect(answer).toEqual({ n: 1 });
    } finally {
      server.resume();
    }
  });

  it("never lets an older revision overwrite a newer one", async () => {
    const first = await writerKv.put("b", JSON.stringify({ n: 1 }));
    const second = await writerKv.put("b", JSON.stringify({ n: 2 }));
    watched.remember("b", second, { n: 2 });
    watched.remember("b", first, { n: 1 });
    expect(await watched.get("b")).toEqual({ n: 2 });
  });

  it("a key this process deleted stays absent: its value's late watched put cannot bring it back", async () => {
    const put = await writerKv.put("c", JSON.stringify({ n: 3 }));
    await writerKv.delete("c");
    watched.removed("c", put);
    watched.remember("c", put, { n: 3 });
    expect(await watched.get("c")).toBeNull();
  });

  it("is current again after the server restarts: a value changed and a key deleted after the restart are seen", async () => {
    await writerKv.put("c", JSON.stringify({ n: 1 }));
    await waitFor(async () => (await watched.get("c"))?.n === 1, { timeoutMs: 5_000, describe: "c=1 known" });
    await server.restart();
    // The writer reconnects in its own time: its writes are tried until the server takes them.
    await waitFor(
      () =>
        writerKv.put("c", JSON.stringify({ n: 2 })).then(
          () => true,
          () => false,
        ),
      { timeoutMs: 15_000, describe: "c=2 written" },
    );
    await waitFor(
      () =>
        writerKv.delete("a").then(
          () => true,
          () => false,
        ),
      { timeoutMs: 15_000, describe: "a deleted" },
    );
    await waitFor(async () => (await watched.get("c").catch(() => undefined))?.n === 2, { timeoutMs: 15_000, describe: "c=2 after the restart" });
    await waitFor(async () => (await watched.get("a").catch(() => undefined)) === null, { timeoutMs: 15_000, describe: "a deleted after the restart" });
    expect(changes).toContainEqual(["a", null]);
  });
});
