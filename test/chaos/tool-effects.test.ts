import { afterAll, beforeAll, expect, it } from "vitest";
import { RunwayClient } from "../../cluster/client.js";
import { waitFor, type ChildHandle } from "../harness/index.js";
import { startEffectsServer, startModernServer, type EffectsServerHandle } from "../fixtures/mcp/start.js";
import { finished, singleServerWorld, startWorkflowNode } from "./node-process.js";
import type { RunAnswer } from "../integration/workflow-support.js";

/**
 * SIGKILL of the node between a tool call's intent and its receipt. The tool server is its own
 * process (Streamable HTTP) and applies each effect before it answers (after `delay_ms`), so the
 * kill lands after the effect happened and before the node learnt it: the outcome is unknown.
 */
const world = singleServerWorld();
let tools: EffectsServerHandle;

beforeAll(async () => {
  tools = await startEffectsServer({ http: true });
}, 30_000);
afterAll(async () => {
  await tools?.stop();
});

function startNode(): Promise<ChildHandle> {
  return startWorkflowNode(world, "tool-node");
}

async function startOneToolRun(client: RunwayClient, name: string, tool: string, args: Record<string, unknown>): Promise<string> {
  const def = { name, nodes: [{ id: "call", kind: "tool", server: "fx", tool, arguments: args }] };
  expect((await client.putDefinition(def)).outcome).toBe("published");
  const started = await client.startRun({ definition: name });
  expect(started.outcome).toBe("started");
  return (started.run as RunAnswer).id;
}

it("G6 SIGKILL between intent and receipt on an idempotent tool: the retry reconciles by calling again with the same key; the server's counter shows one effect", async () => {
  let node = await startNode();
  const client = new RunwayClient(world.nc, "e1");
  await client.createTenant("e1");
  // Trusted: set_value's idempotentHint counts.
  expect((await client.putToolServer({ name: "fx", transport: { type: "http", url: tools.url }, trusted: true })).outcome).toBe("saved");
  const run = await startOneToolRun(client, "set-once", "set_value", { key: "colour", value: "teal", delay_ms: 4_000 });
  await waitFor(() => (tools.counts().effects.set_value ?? 0) >= 1 || undefined, { timeoutMs: 30_000, describe: "the effect to be applied" });
  await node.kill("SIGKILL");
  node = await startNode();
  const done = await finished(client, run);
  expect(done.status).toBe("succeeded");
  expect(done.result).toMatchObject({ call: { key: "colour", value: "teal" } });
  const counts = tools.counts();
  expect(counts.calls.set_value).toBe(2);
  expect(counts.effects.set_value).toBe(1);
  expect(counts.keys.filter((k) => k.startsWith(`${run}:`))).toHaveLength(1);
  const events = ((await client.runEvents(run)).events as { type: string }[]).map((e) => e.type);
  expect(events).toContain("effect_reconciling");
  await node.kill("SIGTERM");
});

it("G6 SIGKILL between intent and receipt on a non-idempotent tool with no lookup: the step parks in needs_reconciliation, nothing is called again, the item is listed, and settling it done continues the run with the given result", async () => {
  let node = await startNode();
  const client = new RunwayClient(world.nc, "e2");
  await client.createTenant("e2");
  expect((await client.putToolServer({ name: "fx", transport: { type: "http", url: tools.url } })).outcome).toBe("saved");
  const before = tools.counts().calls.charge ?? 0;
  const run = await startOneToolRun(client, "charge-once", "charge", { account: "acme", amount: 42, delay_ms: 4_000 });
  await waitFor(() => (tools.counts().effects.charge ?? 0) > before || undefined, { timeoutMs: 30_000, describe: "the charge to be applied" });
  await node.kill("SIGKILL");
  node = await startNode();
  const items = await waitFor(
    async () => {
      const listed = (await client.reconciliations()).items as { run: string; key: string; node: string; tool: string }[];
      return listed.length > 0 ? listed : undefined;
    },
    { timeoutMs: 60_000, describe: "the step to be held for reconciliation" },
  );
  expect(items).toHaveLength(1);
  expect(items[0]).toMatchObject({ run, node: "call", server: "fx", tool: "charge" });
  const held = (await client.getRun(run)).run as RunAnswer & { nodes: Record<string, { reconcile?: { key: string } }> };
  expect(held.status).toBe("running");
  expect(held.nodes.call!.reconcile?.key).toBe(items[0]!.key);
  // Nothing was called again.
  expect(tools.counts().calls.charge).toBe(before + 1);
  // The operator looked at the payment system: the charge went through.
  const settled = await client.reconcile(run, items[0]!.key, "done", { result: { account: "acme", amount: 42, charge_no: "found-by-hand" }, by: "ops@acme" });
  expect(settled).toMatchObject({ outcome: "settled", decision: "done", node: "call" });
  expect((await client.reconcile(run, items[0]!.key, "done")).outcome).toBe("not_reconciling");
  const done = await finished(client, run);
  expect(done.status).toBe("succeeded");
  expect(done.result).toMatchObject({ call: { charge_no: "found-by-hand" } });
  expect(tools.counts().calls.charge).toBe(before + 1);
  expect((await client.reconciliations()).items).toEqual([]);
  await node.kill("SIGTERM");
});

it.each([
  ["2025-11-25 (core tasks)", "2025-11-25"],
  ["2026-07-28 (tasks extension)", "2026-07-28"],
] as const)(
  "%s: SIGKILL of the node while the task works; after the restart the run resumes polling the same task id and completes; tools/call was sent once",
  async (_label, protocol) => {
    const server = protocol === "2026-07-28" ? await startModernServer() : tools;
    try {
      let node = await startNode();
      const tenant = protocol === "2026-07-28" ? "e4" : "e3";
      const client = new RunwayClient(world.nc, tenant);
      await client.createTenant(tenant);
      expect((await client.putToolServer({ name: "fx", protocol, transport: { type: "http", url: server.url } })).outcome).toBe("saved");
      const before = server.counts().calls.slow_task ?? 0;
      const run = await startOneToolRun(client, "long-task", "slow_task", { ms: 5_000 });
      const started = await waitFor(
        async () => ((await client.runEvents(run)).events as { type: string; task?: string }[]).find((e) => e.type === "tool_task_started"),
        { timeoutMs: 30_000, describe: "the task id to be journaled" },
      );
      await node.kill("SIGKILL");
      node = await startNode();
      const done = await finished(client, run);
      expect(done.status).toBe("succeeded");
      expect(done.result).toMatchObject({ call: { done: true, ms: 5_000 } });
      expect(server.counts().calls.slow_task).toBe(before + 1);
      const lines = (await client.trajectory(run)).lines as { kind: string; state?: string }[];
      expect(lines.filter((l) => l.kind === "tool_call")).toEqual([expect.objectContaining({ state: "observed" })]);
      const events = ((await client.runEvents(run)).events as { type: string; task?: string }[]).filter((e) => e.type === "tool_task_started");
      expect(events.map((e) => e.task)).toEqual([started.task]);
      await node.kill("SIGTERM");
    } finally {
      if (server !== tools) await server.stop();
    }
  },
);

it("C094 SIGKILL in the middle of a handler's calls: after the restart the completed call is answered from the journal, the interrupted one is reconciled under the new lease, the next one is claimed fresh", async () => {
  let node = await startNode();
  const client = new RunwayClient(world.nc, "e5");
  await client.createTenant("e5");
  expect((await client.putToolServer({ name: "fx", transport: { type: "http", url: tools.url }, trusted: true })).outcome).toBe("saved");
  const before = tools.counts();
  const def = {
    name: "three-calls",
    nodes: [
      {
        id: "work",
        kind: "code",
        handler: "calls_in_order",
        input: {
          server: "fx",
          calls: [
            { tool: "set_value", args: { key: "c094-a", value: "1" } },
            { tool: "set_value", args: { key: "c094-b", value: "2", delay_ms: 4_000 } },
            { tool: "get_value", args: { key: "c094-a" } },
          ],
        },
      },
    ],
  };
  expect((await client.putDefinition(def)).outcome).toBe("published");
  const run = ((await client.startRun({ definition: "three-calls" })).run as RunAnswer).id;
  await waitFor(() => tools.counts().values["c094-b"] === "2" || undefined, { timeoutMs: 30_000, describe: "the second call's effect" });
  await node.kill("SIGKILL");
  node = await startNode();
  const done = await finished(client, run);
  expect(done.status).toBe("succeeded");
  expect(done.result).toMatchObject({
    work: [
      { key: "c094-a", value: "1" },
      { key: "c094-b", value: "2" },
      { key: "c094-a", value: "1" },
    ],
  });
  const after = tools.counts();
  // a: called once (the retry got the stored answer); b: called twice with one key, one effect; get_value: once.
  expect(after.calls.set_value! - (before.calls.set_value ?? 0)).toBe(3);
  expect(after.effects.set_value! - (before.effects.set_value ?? 0)).toBe(2);
  expect(after.calls.get_value! - (before.calls.get_value ?? 0)).toBe(1);
  const events = ((await client.runEvents(run)).events as { type: string }[]).map((e) => e.type);
  expect(events.filter((t) => t === "effect_reconciling")).toHaveLength(1);
  await node.kill("SIGTERM");
});

it("G6 SIGKILL between intent and receipt on a non-idempotent tool whose server offers a lookup: the retry asks it, finds the charge, and the run completes with its result; nothing is charged twice", async () => {
  let node = await startNode();
  const client = new RunwayClient(world.nc, "e6");
  await client.createTenant("e6");
  expect((await client.putToolServer({ name: "fx", transport: { type: "http", url: tools.url }, lookups: { charge: "find_charge" } })).outcome).toBe("saved");
  const before = tools.counts();
  const run = await startOneToolRun(client, "charge-looked-up", "charge", { account: "lookup", amount: 11, delay_ms: 4_000 });
  await waitFor(() => (tools.counts().effects.charge ?? 0) > (before.effects.charge ?? 0) || undefined, {
    timeoutMs: 30_000,
    describe: "the charge to be applied",
  });
  await node.kill("SIGKILL");
  node = await startNode();
  const done = await finished(client, run);
  expect(done.status).toBe("succeeded");
  expect(done.result).toMatchObject({ call: { account: "lookup", amount: 11, charge_no: (before.effects.charge ?? 0) + 1 } });
  const after = tools.counts();
  expect(after.calls.charge).toBe((before.calls.charge ?? 0) + 1);
  expect(after.calls.find_charge).toBe((before.calls.find_charge ?? 0) + 1);
  expect((await client.reconciliations()).items).toEqual([]);
  await node.kill("SIGTERM");
});
