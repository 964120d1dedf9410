import { expect, it } from "vitest";
import { jetstreamManager } from "@nats-io/jetstream";
import { MailboxClient } from "../../runtime/index.js";
import { CMD_STREAM, DEFAULT_TOPOLOGY } from "../../runtime/topology.js";
import { waitFor } from "../harness/index.js";
import { readActor } from "../fixtures/read-actor.js";
import { singleServerWorld, startNodeProcess } from "./node-process.js";

const world = singleServerWorld();

// The receiver takes its commands through the mailbox (sink), or in memory when its partition is served on the sender's node (inbox).
it.each(["sink", "inbox"])("crash between write and outbox: the outbox message reaches its %s receiver exactly once in effect", async (receiverKind) => {
  const sender = `sender-${receiverKind}`;
  const node = await startNodeProcess([world.server.url], { name: "crashy", crashAfterWrite: `counter.${sender}` });
  const mailbox = new MailboxClient(world.nc, DEFAULT_TOPOLOGY.partitions);
  expect(
    (await mailbox.send({ kind: "counter", id: sender }, { type: "ping", to: { kind: receiverKind, id: "receiver" } }, `ping-${receiverKind}`)).outcome,
  ).toBe("stored");
  const exit = await node.exited;
  expect(exit.signal).toBe("SIGKILL");

  // The crash point is real: the sender's transition is stored with its outbox, the receiver has nothing.
  const stored = await readActor(world.nc, "counter", sender);
  expect(stored?.context.sent).toBe(1);
  expect(stored?.outbox).toHaveLength(1);
  expect(await readActor(world.nc, receiverKind, "receiver")).toBeUndefined();

  const restarted = await startNodeProcess([world.server.url], { name: "crashy" });
  try {
    await waitFor(async () => (await readActor(world.nc, receiverKind, "receiver"))?.context.count === 1, {
      timeoutMs: 20_000,
      describe: "receiver to get the outbox message",
    });
    // Nothing is left to deliver, and the receiver applied the message once.
    const jsm = await jetstreamManager(world.nc);
    await waitFor(async () => (await jsm.streams.info(CMD_STREAM)).state.messages === 0, { timeoutMs: 20_000, describe: "all mailbox messages acknowledged" });
    const receiver = await readActor(world.nc, receiverKind, "receiver");
    expect(receiver?.context.count).toBe(1);
    expect(receiver?.transitions).toBe(1);
    expect((await readActor(world.nc, "counter", sender))?.context.sent).toBe(1);
  } finally {
    await restarted.kill("SIGTERM");
  }
});

it("crash between write and outbox: a progress event kept in the stored outbox is published by the next owner", async () => {
  const jsm = await jetstreamManager(world.nc);
  await jsm.streams.add({ name: "TEST_NOTES", subjects: ["rw.note.>"], duplicate_window: 120_000_000_000 });
  const node = await startNodeProcess([world.server.url], { name: "crashy-notes", crashAfterWrite: "counter.noter" });
  const mailbox = new MailboxClient(world.nc, DEFAULT_TOPOLOGY.partitions);
  expect((await mailbox.send({ kind: "counter", id: "noter" }, { type: "note", subject: "rw.note.noter" }, "note-1")).outcome).toBe("stored");
  expect((await node.exited).signal).toBe("SIGKILL");

  // The event lives only in the stored outbox: nothing was published (a stream on its subject holds nothing yet).
  const stored = await readActor(world.nc, "counter", "noter");
  expect(stored?.outbox).toEqual([{ id: "note-1/0", effect: { type: "runway.event", subject: "rw.note.noter", data: { count: 1 } } }]);
  expect((await jsm.streams.info("TEST_NOTES")).state.messages).toBe(0);

  const restarted = await startNodeProcess([world.server.url], { name: "crashy-notes" });
  try {
    await waitFor(async () => (await jsm.streams.info("TEST_NOTES")).state.messages === 1, {
      timeoutMs: 20_000,
      describe: "the noter's event to be published by the next owner",
    });
    // Published live with its journal id: the stored record's revision, its first event.
    const msg = await jsm.streams.getMessage("TEST_NOTES", { last_by_subj: "rw.note.noter" });
    expect(msg?.json()).toEqual({ id: expect.stringMatching(/^[1-9]\d*\.0$/), count: 1 });
    await waitFor(async () => (await jsm.streams.info(CMD_STREAM)).state.messages === 0, { timeoutMs: 20_000, describe: "all mailbox messages acknowledged" });
    expect((await readActor(world.nc, "counter", "noter"))?.transitions).toBe(1);
  } finally {
    await restarted.kill("SIGTERM");
  }
});
