// C001: a run started through each front door — the NATS API's runs.start, an A2A SendMessage
// and a schedule's firing — is stored as the same shape of run record; what differs is where it
// came from (source, its start key, ids and clocks), never which fields it has.
import { SendMessageRequest, type Task } from "@a2a-js/sdk";
import { ClientFactory, ClientFactoryOptions } from "@a2a-js/sdk/client";
import { describe, expect, it } from "vitest";
import { runIdFor, startKey } from "../../actors/index.js";
import { RUN_RECORD } from "../../actors/run/actor.js";
import { readActor } from "../../runtime/index.js";
import { waitFor } from "../harness/index.js";
import { workflowWorld, type RunAnswer } from "./workflow-support.js";

const world = workflowWorld({ name: "front-doors-node", http: { port: 0 } });
const DEFINITION = { name: "doors", nodes: [{ id: "e", kind: "code", handler: "echo", input: "${input}" }], result: "${steps.e.output}" };

/** A value's shape: its keys, recursively, with each leaf replaced by its type. */
function shapeOf(value: unknown): unknown {
  if (value === null) return "null";
  if (Array.isArray(value)) return value.map(shapeOf);
  if (typeof value === "object") return Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, shapeOf(v)]));
  return typeof value;
}

async function storedRun(id: string): Promise<Record<string, unknown>> {
  const read = await readActor({ nc: world.nc, partitions: 32 }, RUN_RECORD, id);
  if (read.outcome !== "found" || !read.snapshot.context?.run) throw new Error(`run ${id}: ${read.outcome}`);
  return read.snapshot.context.run as unknown as Record<string, unknown>;
}

describe("front doors", () => {
  it("C001 runs.start, A2A SendMessage and a schedule's firing create the same run shape; only where it came from differs", async () => {
    const c = world.client;
    expect(["published", "unchanged"]).toContain((await c.putDefinition(DEFINITION)).outcome);
    expect((await c.exposeAgent({ definition: "doors", public: true })).outcome).toBe("exposed");
    const input = { x: 1 };

    const started = await c.startRun({ definition: "doors", input, start_key: { source: "webhook", delivery_id: "c001" } });
    expect(started.outcome, JSON.stringify(started)).toBe("started");
    const viaApi = (started.run as RunAnswer).id;

    const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { preferredTransports: ["JSONRPC"] }));
    const agent = await factory.createFromUrl(`${world.node.httpUrl!}/a2a/t1/doors/`);
    const sent = await agent.sendMessage(
      SendMessageRequest.fromJSON({ message: { messageId: `c001-${process.pid}`, role: "ROLE_USER", parts: [{ data: input }] }, configuration: {} }),
    );
    const viaA2a = (sent as Task).id;

    const put = await c.putSchedule({ name: "c001", definition: "doors", input, every: { ms: 1_000 } });
    expect(put.outcome).toBe("saved");
    const due = (put.schedule as { created_at: number }).created_at + 1_000;
    const viaSchedule = runIdFor("t1", startKey("schedule:c001", new Date(due).toISOString()));
    await waitFor(async () => (await c.getRun(viaSchedule)).outcome === "found", { timeoutMs: 15_000, describe: "the schedule's first firing" });
    expect((await c.deleteSchedule("c001")).outcome).toBe("deleted");

    for (const id of [viaApi, viaA2a, viaSchedule]) expect((await world.settled(id)).status).toBe("succeeded");
    const runs = await Promise.all([viaApi, viaA2a, viaSchedule].map(storedRun));
    expect(runs.map((r) => r.source)).toEqual(["webhook", "a2a", "schedule"]);
    const [api, ...others] = runs.map(shapeOf);
    for (const other of others) expect(other).toEqual(api);
    // Beyond the shape, the runs agree on what they run.
    for (const run of runs)
      expect({ tenant: run.tenant, definition: run.definition, depth: run.depth }).toEqual({ tenant: "t1", definition: runs[0]!.definition, depth: 0 });
  });
});
