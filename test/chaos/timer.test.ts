import { expect, it } from "vitest";
import { jetstreamManager } from "@nats-io/jetstream";
import { MailboxClient, partitionOf } from "../../runtime/index.js";
import { CMD_STREAM, DEFAULT_TOPOLOGY, partitionConsumer } from "../../runtime/topology.js";
import { waitFor } from "../harness/index.js";
import { readActor } from "../fixtures/read-actor.js";
import { singleServerWorld, startNodeProcess } from "./node-process.js";

const P = DEFAULT_TOPOLOGY.partitions;
/** A request lost in a hand-over still times out (and fails the test); a slow one under load does not. */
const REQUEST_MS = 20_000;
const world = singleServerWorld();

it("timer survives: a timer set before a SIGKILL fires once after restart, even when it came due while no node was up", async () => {
  const node = await startNodeProcess([world.server.url], { name: "timer-node" });
  world.children.push(node);
  const mailbox = new MailboxClient(world.nc, P);
  const actor = { kind: "counter", id: "sleeper" };
  // The answer comes after the transition and its schedule are stored. A request's own deadline
  // is generous: on a machine running the whole suite a partition may be changing hands just then.
  expect((await mailbox.request(actor, { type: "timer.set", name: "wake", inMs: 1_500 }, "set-wake", REQUEST_MS)).outcome).toBe("applied");
  await node.kill("SIGKILL");

  // With no node alive the server fires the schedule into the actor's mailbox, where it waits.
  const jsm = await jetstreamManager(world.nc);
  const consumer = partitionConsumer(partitionOf(actor.id, P));
  await waitFor(async () => (await jsm.consumers.info(CMD_STREAM, consumer)).num_pending >= 1, {
    timeoutMs: 15_000,
    describe: "the due timer to land in the mailbox",
  });
  expect((await readActor(world.nc, actor.kind, actor.id))?.context.fired.wake).toBeUndefined();

  const restarted = await startNodeProcess([world.server.url], { name: "timer-node" });
  world.children.push(restarted);
  await waitFor(async () => (await readActor(world.nc, actor.kind, actor.id))?.context.fired.wake === 1, {
    timeoutMs: 15_000,
    describe: "the timer to fire after restart",
  });
  // Once: nothing scheduled or undelivered is left that could fire it again.
  await waitFor(async () => (await jsm.streams.info(CMD_STREAM)).state.messages === 0, { timeoutMs: 15_000, describe: "mailbox and schedules empty" });
  expect((await readActor(world.nc, actor.kind, actor.id))?.context.fired.wake).toBe(1);
});

it("timer survives a takeover: a timer set on a node that dies fires once on the node that takes its partition", async () => {
  const a = await startNodeProcess([world.server.url], { name: "timer-a", leaseTtlMs: 2_000 });
  world.children.push(a);
  const mailbox = new MailboxClient(world.nc, P);
  const actor = { kind: "counter", id: "sleeper2" };
  // timer-node (the first test's, still up) and timer-a may be handing this partition over now.
  expect((await mailbox.request(actor, { type: "timer.set", name: "wake", inMs: 2_500 }, "set-wake-2", REQUEST_MS)).outcome).toBe("applied");
  const b = await startNodeProcess([world.server.url], { name: "timer-b", leaseTtlMs: 2_000 });
  world.children.push(b);
  await a.kill("SIGKILL");
  await waitFor(async () => (await readActor(world.nc, actor.kind, actor.id))?.context.fired.wake === 1, {
    timeoutMs: 20_000,
    describe: "the timer to fire on the survivor",
  });
  const jsm = await jetstreamManager(world.nc);
  await waitFor(async () => (await jsm.streams.info(CMD_STREAM)).state.messages === 0, { timeoutMs: 15_000, describe: "mailbox and schedules empty" });
  expect((await readActor(world.nc, actor.kind, actor.id))?.context.fired.wake).toBe(1);
});
