import { expect, it } from "vitest";
import { jetstreamManager } from "@nats-io/jetstream";
import { CMD_STREAM, DEFAULT_TOPOLOGY, MailboxClient } from "../../runtime/index.js";
import { waitFor } from "../harness/index.js";
import { readActor } from "../fixtures/read-actor.js";
import { singleServerWorld, startNodeProcess } from "./node-process.js";

const world = singleServerWorld();


it("crash between write and outbox: the outbox message reaches its receiver exactly once in effect", async () => {
  const node = await startNodeProcess([world.server.url], { name: "crashy", crashAfterWrite: "counter.sender" });
  const mailbox = new MailboxClient(world.nc, DEFAULT_TOPOLOGY.partitions);
  expect((await mailbox.send({ kind: "counter", id: "sender" }, { type: "ping", to: { kind: "sink", id: "receiver" } }, "ping-1")).outcome).toBe("stored");
  const exit = await node.exited;
  expect(exit.signal).toBe("SIGKILL");

  // The crash point is real: the sender's transition is stored with its outbox, the receiver has nothing.
  const stored = await readActor(world.nc, "counter", "sender");
  expect(stored?.context.sent).toBe(1);
  expect(stored?.outbox).toHaveLength(1);
  expect(await readActor(world.nc, "sink", "receiver")).toBeUndefined();

  const restarted = await startNodeProcess([world.server.url], { name: "crashy" });
  try {
    await waitFor(async () => (await readActor(world.nc, "sink", "receiver"))?.context.count === 1, { timeoutMs: 20_000, describe: "receiver to get the outbox message" });
    // Nothing is left to deliver, and the receiver applied the message once.
    const jsm = await jetstreamManager(world.nc);
    await waitFor(async () => (await jsm.streams.info(CMD_STREAM)).state.messages === 0, { timeoutMs: 20_000, describe: "all mailbox messages acknowledged" });
    const receiver = await readActor(world.nc, "sink", "receiver");
    expect(receiver?.context.count).toBe(1);
    expect(receiver?.transitions).toBe(1);
    expect((await readActor(world.nc, "counter", "sender"))?.context.sent).toBe(1);
  } finally {
    await restarted.kill("SIGTERM");
  }
});
