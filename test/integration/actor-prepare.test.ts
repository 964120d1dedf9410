/**
 * An actor's `prepare` (runtime/actor/define.ts) may answer at once or through a promise: a
 * command is decided on what it gave either way. A retryable fault, thrown or rejected, is tried
 * again; any other refuses the command as `invalid_input` with its message, and the lane goes on.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type { EventObject } from "xstate";
import { ActorHost, defineActor, partitionOf, PartitionLog, RunwayFault } from "../../runtime/index.js";
import { DEFAULT_TOPOLOGY, ensureTopology } from "../../runtime/topology.js";
import { silentLogger } from "../../runtime/log.js";
import { startServer, type NatsServerHandle } from "../harness/index.js";
import { CounterEvent, counterMachine } from "../fixtures/counter-actor.js";
import { readActor } from "../fixtures/read-actor.js";

const P = DEFAULT_TOPOLOGY.partitions;
let server: NatsServerHandle;
let nc: NatsConnection;
let host: ActorHost;

const retryable = () => new RunwayFault("store_unavailable", "not now", { kind: "retryable" });
/** Prepares seen, by command: a fault is raised on the first only. */
const calls = new Map<string, number>();

/** What `prepare` does follows `by`: the event it answers counts ten times as much, so the count shows which answer was decided on. */
const prepActor = defineActor({
  kind: "prep",
  machine: counterMachine,
  events: CounterEvent,
  prepare: (event: EventObject) => {
    const e = event as EventObject & { by: number; id?: string };
    const key = `${e.by}`;
    const n = (calls.get(key) ?? 0) + 1;
    calls.set(key, n);
    const answer = { ...e, by: e.by * 10 };
    switch (e.by) {
      case 1:
        return answer;
      case 2:
        return Promise.resolve(answer);
      case 3:
        if (n === 1) throw retryable();
        return answer;
      case 4:
        return n === 1 ? Promise.reject(retryable()) : Promise.resolve(answer);
      case 5:
        throw new Error("five is refused at once");
      default:
        return Promise.reject(new Error("six is refused later"));
    }
  },
});

beforeAll(async () => {
  server = await startServer();
  nc = await connect(server.connectOptions());
  await ensureTopology(nc, DEFAULT_TOPOLOGY);
  const claimed = await PartitionLog.claim(nc, partitionOf("prepared", P), { node: "prep", incarnation: "prep-1" }, () => true, Date.now());
  if (claimed.outcome !== "claimed") throw new Error(`claim failed: ${claimed.outcome}`);
  host = new ActorHost({ nc, partitions: P, actors: [prepActor], logger: silentLogger });
  await host.serve(claimed.log, { mailbox: false });
});

afterAll(async () => {
  await host?.stop().catch(() => undefined);
  await nc?.close().catch(() => undefined);
  await server?.dispose();
});

it("decides a command on what prepare answered at once or later, tries a retryable fault again whether thrown or rejected, and refuses any other fault as invalid_input without stopping the lane", async () => {
  const address = { kind: "prep", id: "prepared" };
  const send = (by: number) => host.dispatch(address, { type: "inc", by }, `inc-${by}`);
  expect(await send(1)).toMatchObject({ outcome: "applied", value: { count: 10 } });
  expect(await send(2)).toMatchObject({ outcome: "applied", value: { count: 30 } });
  expect(await send(3)).toMatchObject({ outcome: "applied", value: { count: 60 } });
  expect(await send(4)).toMatchObject({ outcome: "applied", value: { count: 100 } });
  expect(await send(5)).toEqual({ outcome: "invalid_input", reason: "five is refused at once" });
  expect(await send(6)).toEqual({ outcome: "invalid_input", reason: "six is refused later" });
  expect(Object.fromEntries(calls)).toEqual({ 1: 1, 2: 1, 3: 2, 4: 2, 5: 1, 6: 1 });
  expect(await send(1)).toEqual({ outcome: "duplicate" });
  expect((await readActor(nc, "prep", "prepared"))?.context.count).toBe(100);
});
