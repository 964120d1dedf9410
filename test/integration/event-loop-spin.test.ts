/**
 * The event loop's spin (runtime/event-loop-spin.ts) as a connection's requests drive it: a
 * request whose answer came soon last time has the loop poll for the next; one that came late
 * (a write the server syncs to disk, say) has it wait parked.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { eventLoopSpin, rawRequest, SPIN_OFF } from "../../runtime/index.js";
import { startServer, waitFor, type NatsServerHandle } from "../harness/index.js";

let server: NatsServerHandle;
let responder: NatsConnection;

beforeAll(async () => {
  server = await startServer();
  responder = await connect(server.connectOptions());
  responder.subscribe("spin.soon", { callback: (_err, msg) => void msg.respond("ok") });
  responder.subscribe("spin.late", { callback: (_err, msg) => void setTimeout(() => msg.respond("ok"), 40) });
  await responder.flush();
});

afterAll(async () => {
  eventLoopSpin.configure(SPIN_OFF);
  await responder?.close();
  await server?.stop();
});

it("a connection has the loop poll for answers that came soon, wait parked for those that came late, and stops counting once closed", async () => {
  const before = eventLoopSpin.sources;
  const nc = await connect(server.connectOptions());
  // A window wide enough that a busy machine still answers the soon subject within it.
  eventLoopSpin.configure({ windowMs: 50, soonMs: 20, maxOutstanding: 4 });
  const ask = async (subject: string) => {
    const turns = eventLoopSpin.turns;
    const reply = await rawRequest(nc, subject, "?");
    expect(reply.ok).toBe(true);
    return eventLoopSpin.turns - turns;
  };
  await ask("spin.soon");
  expect(eventLoopSpin.sources).toBe(before + 1);
  expect(await ask("spin.soon")).toBeGreaterThan(0);
  await ask("spin.late");
  expect(await ask("spin.late")).toBe(0);
  // The first after a late answer is still expected late; the next polls again.
  expect(await ask("spin.soon")).toBe(0);
  expect(await ask("spin.soon")).toBeGreaterThan(0);
  await nc.close();
  await waitFor(() => eventLoopSpin.sources === before, { timeoutMs: 5_000, describe: "the closed connection's count removed" });
});
