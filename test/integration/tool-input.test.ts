import { afterAll, beforeAll, expect, it } from "vitest";
import { waitFor } from "../harness/index.js";
import { startModernServer, type EffectsServerHandle } from "../fixtures/mcp/start.js";
import { workflowWorld, type RunAnswer } from "./workflow-support.js";

/**
 * A tool server asks a person for input during a call (MCP 2026-07-28 MRTR, the successor of
 * `elicitation/create`): the form goes to the run's inbox with the server's schema, the step
 * waits holding no worker, and the call is made again with the person's answer (accept, or
 * decline on reject).
 */
const world = workflowWorld({ name: "tool-input-node" });
let modern: EffectsServerHandle;

type View = RunAnswer & { waiting: { on: string; ref: string } | null };
type Item = {
  id: string;
  kind: string;
  prompt: string;
  group: string | null;
  payload: { server: string; tool: string; requests: { key: string; message: string; schema: Record<string, unknown> }[] };
};
const inbox = async (run: string) => ((await world.client.approvals({ run_id: run })).approvals as Item[]) ?? [];
const confirmed = () => modern.counts().effects.confirm_charge ?? 0;

beforeAll(async () => {
  modern = await startModernServer();
  const put = await world.client.putToolServer({ name: "bank", protocol: "2026-07-28", transport: { type: "http", url: modern.url } });
  expect(put.outcome).toBe("saved");
  const def = {
    name: "confirmed-charge",
    nodes: [{ id: "pay", kind: "tool", server: "bank", tool: "confirm_charge", arguments: { account: "${input.account}", amount: 5 } }],
  };
  const published = await world.client.putDefinition(def);
  expect(published.outcome).toMatch(/published|unchanged/);
  expect(
    (
      await world.client.putDefinition({
        name: "asks-in-handler",
        nodes: [
          {
            id: "h",
            kind: "code",
            handler: "calls_in_order",
            input: { server: "bank", calls: [{ tool: "confirm_charge", args: { account: "h", amount: 1 } }] },
          },
        ],
      })
    ).outcome,
  ).toMatch(/published|unchanged/);
}, 30_000);
afterAll(async () => {
  await modern?.stop();
});

async function waitingOnInput(account: string): Promise<{ id: string; item: Item }> {
  const started = await world.client.startRun({ definition: "confirmed-charge", input: { account } });
  expect(started.outcome).toBe("started");
  const id = (started.run as RunAnswer).id;
  const item = await waitFor(async () => (await inbox(id))[0], { timeoutMs: 15_000, describe: "the server's form in the inbox" });
  return { id, item };
}

it("the server's form waits in the inbox holding no worker; approved with content that fits its schema, the call is made again with the answer and completes once", async () => {
  const before = confirmed();
  const { id, item } = await waitingOnInput("alice");
  expect(item).toMatchObject({ kind: "input", prompt: "Charge alice 5?", payload: { server: "bank", tool: "confirm_charge" } });
  expect(item.payload.requests).toEqual([{ key: "confirm", message: "Charge alice 5?", schema: expect.objectContaining({ required: ["ok"] }) }]);
  const run = (await world.client.getRun(id)).run as View;
  expect(run.status).toBe("waiting");
  expect(run.waiting).toMatchObject({ on: "approval", ref: item.id });
  await waitFor(() => world.node.executor.inFlight === 0 || undefined, { timeoutMs: 10_000, describe: "no worker held while a person answers" });
  expect(confirmed()).toBe(before);
  // Content that does not fit the server's schema is refused before anything is stored.
  const bad = await world.client.decide(item.id, "approve", { payload: { ok: "yes" }, by: "bob" });
  expect(bad.outcome).toBe("invalid_input");
  expect((await world.client.decide(item.id, "edit", { payload: { ok: true }, by: "bob" })).outcome).toBe("invalid_input");
  expect((await inbox(id)).map((i) => i.id)).toEqual([item.id]);
  expect((await world.client.decide(item.id, "approve", { payload: { ok: true, note: "checked" }, by: "bob" })).outcome).toBe("decided");
  const ended = await world.settled(id);
  expect(ended.status).toBe("succeeded");
  expect(ended.result).toMatchObject({ pay: { account: "alice", amount: 5, note: "checked" } });
  expect(confirmed()).toBe(before + 1);
  expect(await inbox(id)).toEqual([]);
});

it("rejected, the form is declined: the server is told so and the node fails with the tool's own error; nothing is charged", async () => {
  const before = confirmed();
  const { id, item } = await waitingOnInput("carol");
  expect((await world.client.decide(item.id, "reject", { reason: "not today", by: "bob" })).outcome).toBe("decided");
  const ended = await world.settled(id);
  expect(ended.status).toBe("failed");
  expect(JSON.stringify(ended.nodes.pay!.error)).toContain("not confirmed (decline)");
  expect(confirmed()).toBe(before);
});

it("a handler's call cannot wait on a person: it fails tool_requires_input", async () => {
  const started = await world.client.startRun({ definition: "asks-in-handler" });
  const ended = await world.settled((started.run as RunAnswer).id);
  expect(ended.status).toBe("failed");
  expect(JSON.stringify(ended.nodes.h!.error)).toContain("tool_requires_input");
});
