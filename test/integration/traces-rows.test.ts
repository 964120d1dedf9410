import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { RunwayClient } from "../../cluster/client.js";
import { startRunwayNode, type RunwayWorkflowNode } from "../../cluster/runway-node.js";
import { RUN_KIND } from "../../actors/index.js";
import { STEP_READY } from "../../machines/index.js";
import { createLogger } from "../../runtime/index.js";
import { startServer, waitFor, type NatsServerHandle } from "../harness/index.js";
import { losingLocal } from "../fixtures/faults.js";
import { startEffectsServer, type EffectsServerHandle } from "../fixtures/mcp/start.js";
import { startOtlpReceiver, STATUS_ERROR, type OtlpReceiver, type ReceivedSpan } from "../fixtures/otlp.js";
import { settled, HANDLERS, type RunAnswer } from "./workflow-support.js";

/**
 * Issue 40 acceptance 6, the span rows C069, C070 and C085, on a real node exporting to the
 * receiver process (test/fixtures/otlp-receiver.ts). The sweep runs only when a test asks.
 */
const drops = new Set<string>();
let server: NatsServerHandle;
let receiver: OtlpReceiver;
let node: RunwayWorkflowNode;
let nc: NatsConnection;
let client: RunwayClient;
let fx: EffectsServerHandle;

beforeAll(async () => {
  // The exporter's batch goes out every 100 ms (the SDK's variable, read when the node starts).
  process.env.OTEL_BSP_SCHEDULE_DELAY = "100";
  server = await startServer();
  receiver = await startOtlpReceiver();
  fx = await startEffectsServer({ http: true });
  node = await startRunwayNode({
    connection: server.connectOptions(),
    name: "rows-traced",
    handlers: [HANDLERS],
    logger: createLogger("rows-traced", "error"),
    sweepIntervalMs: false,
    stepLeaseTtlMs: 20_000,
    decorate: { local: losingLocal((channel) => drops.delete(channel)) },
    traces: { url: `${receiver.endpoint}/v1/traces` },
  });
  await waitFor(() => node.node.host.ownedPartitions().length === 32, { timeoutMs: 20_000, describe: "node to own all partitions" });
  nc = await connect(server.connectOptions());
  client = new RunwayClient(nc, "t1");
  expect((await client.createTenant("t1")).outcome).toMatch(/created|exists/);
  expect((await client.putToolServer({ name: "fx", transport: { type: "http", url: fx.url } })).outcome).toBe("saved");
}, 60_000);

afterAll(async () => {
  await nc?.close();
  await node?.stop();
  await fx?.stop();
  await receiver?.process.kill("SIGTERM").catch(() => undefined);
  await server?.dispose();
});

async function publish(def: object): Promise<void> {
  expect((await client.putDefinition(def)).outcome).toMatch(/published|unchanged/);
}

async function start(definition: string, input: unknown = {}): Promise<string> {
  return ((await client.startRun({ definition, input })).run as RunAnswer).id;
}

const named = (all: ReceivedSpan[], name: string) => all.filter((s) => s.name === name);

it("C069 a map item stopped by the call ceiling before its call writes no execute_tool span; every started call writes one", async () => {
  const dir = mkdtempSync(join(tmpdir(), "c069-"));
  const items = Array.from({ length: 4 }, (_, i) => ({
    server: "fx",
    tool: "set_value",
    args: { key: `c069-${i}`, value: `v${i}` },
    go: join(dir, `go-${i}`),
    done: join(dir, `done-${i}`),
  }));
  await publish({
    name: "c069",
    limits: { max_tool_calls: 2 },
    nodes: [{ id: "m", kind: "map", items: "${input.items}", handler: "gated_call", concurrency: 2, max_fanout: 10 }],
  });
  const calls0 = fx.counts().calls.set_value ?? 0;
  const calls = () => (fx.counts().calls.set_value ?? 0) - calls0;
  const id = await start("c069", { items });
  for (let i = 0; i < 4; i++) writeFileSync(items[i]!.go, "");
  await waitFor(() => calls() === 2 || undefined, { timeoutMs: 10_000, describe: "items 0 and 1 to call" });
  // Item 1 ends; item 2 starts, and its call is refused by the ceiling before the tool gateway. Item 0 still holds its call's answer.
  writeFileSync(items[1]!.done, "");
  await waitFor(
    () => named(receiver.spans(), "step m").filter((s) => s.attributes["runway.run.id"] === id && s.attributes["runway.item"] === 2).length === 1 || undefined,
    {
      timeoutMs: 30_000,
      describe: "item 2's attempt span (its call refused)",
    },
  );
  writeFileSync(items[0]!.done, "");
  const done = await settled(client, id);
  expect(done.status).toBe("succeeded");
  expect(calls()).toBe(2);

  const all = await receiver.traceOf(id, (a) => named(a, "step m").length === 3 && named(a, "execute_tool set_value").length >= 2);
  const steps = named(all, "step m");
  // Items 0, 1 and 2 started (item 3 never did); only items 0 and 1 made their call.
  expect(steps.map((s) => s.attributes["runway.item"]).sort()).toEqual([0, 1, 2]);
  const tools = named(all, "execute_tool set_value");
  expect(tools).toHaveLength(calls());
  const parentItem = (t: ReceivedSpan) => steps.find((s) => s.spanId === t.parentSpanId)?.attributes["runway.item"];
  expect(tools.map(parentItem).sort()).toEqual([0, 1]);
  expect(tools.every((t) => t.status !== STATUS_ERROR)).toBe(true);
}, 90_000);

it("C070 a subworkflow node opens no span of its own: the child run's invoke_agent span names the node and is a child of the enclosing run's span", async () => {
  await publish({ name: "c070-child", nodes: [{ id: "leaf", kind: "code", handler: "echo", input: "hi" }] });
  await publish({
    name: "c070",
    nodes: [
      { id: "before", kind: "code", handler: "echo", input: 1 },
      { id: "sub", kind: "subworkflow", workflow: "c070-child", needs: ["before"] },
    ],
  });
  const id = await start("c070");
  expect((await settled(client, id)).status).toBe("succeeded");
  const all = await receiver.traceOf(id, (a) => a.some((s) => s.name === "step leaf") && a.some((s) => s.name === "invoke_agent c070-child"));
  const root = named(all, "run c070");
  expect(root).toHaveLength(1);
  // The node itself: no step span, nor any span of the parent run naming it but the child's.
  expect(all.filter((s) => s.attributes["runway.node"] === "sub")).toEqual([]);
  expect(all.filter((s) => s.name === "step sub")).toEqual([]);
  const child = named(all, "invoke_agent c070-child");
  expect(child).toHaveLength(1);
  expect(child[0]!.parentSpanId).toBe(root[0]!.spanId);
  expect(child[0]!.attributes).toMatchObject({ "runway.parent.run.id": id, "runway.parent.node": "sub", "gen_ai.operation.name": "invoke_agent" });
  expect(named(all, "step leaf")[0]!.parentSpanId).toBe(child[0]!.spanId);
  expect(all.map((s) => s.name).sort()).toEqual(["invoke_agent c070-child", "run c070", "step before", "step leaf"]);
}, 60_000);

it("C085 a run cancelled while its attempt's worker is dead leaves no span open: the cancel closes the attempt's span, the run's span ends", async () => {
  await publish({
    name: "c085-dead",
    nodes: [{ id: "a", kind: "code", handler: "echo", input: 1, retry: { max_attempts: 1, backoff_ms: 0, max_backoff_ms: 0 } }],
  });
  // The offer never reaches this node's executor: a worker elsewhere (here: the test) leases attempt 1 and is gone.
  drops.add(STEP_READY);
  const id = await start("c085-dead");
  await waitFor(() => !drops.has(STEP_READY) || undefined, { timeoutMs: 10_000, describe: "the offer to be dropped" });
  const beat = await node.node.host.dispatch({ kind: RUN_KIND, id }, { type: "step.heartbeat", node: "a", attempt: 1, lease_epoch: 1 }, `hb/${id}`);
  expect(beat.outcome).toBe("applied");
  await waitFor(async () => ((await client.getRun(id)).run as RunAnswer).nodes.a?.attempt === 1 || undefined, {
    timeoutMs: 10_000,
    describe: "attempt 1 leased",
  });

  expect((await client.cancelRun(id, "c085")).outcome).toBe("cancelled");
  expect((await settled(client, id)).status).toBe("cancelled");
  // One sweep pass: nothing of the run is left to close.
  await node.sweeper.pass(Date.now());

  const all = await receiver.traceOf(id, (a) => a.some((s) => s.name === "step a"));
  const root = named(all, "run c085-dead");
  expect(root).toHaveLength(1);
  expect(root[0]!.attributes["runway.run.status"]).toBe("cancelled");
  const step = named(all, "step a");
  expect(step).toHaveLength(1);
  expect(step[0]!.parentSpanId).toBe(root[0]!.spanId);
  expect(step[0]!.status).toBe(STATUS_ERROR);
  expect(step[0]!.attributes).toMatchObject({ "error.type": "cancelled", "runway.attempt": 1 });
  expect(step[0]!.end).toBe(root[0]!.end);
  expect(step[0]!.start).toBeLessThanOrEqual(step[0]!.end);
}, 60_000);

it("C085 a run cancelled while its attempt runs on a live worker has that attempt's span closed once, by the cancel", async () => {
  const release = join(mkdtempSync(join(tmpdir(), "c085-")), "release");
  await publish({ name: "c085-live", nodes: [{ id: "w", kind: "code", handler: "wait_file", input: { path: release } }] });
  const id = await start("c085-live");
  await waitFor(() => node.executor.inFlight === 1 || undefined, { timeoutMs: 10_000, describe: "the attempt to run" });
  await waitFor(async () => ((await client.getRun(id)).run as RunAnswer).nodes.w?.attempt === 1 || undefined, {
    timeoutMs: 10_000,
    describe: "attempt 1 leased",
  });
  expect((await client.cancelRun(id, "c085")).outcome).toBe("cancelled");
  expect((await settled(client, id)).status).toBe("cancelled");
  // The stopped handler frees its slot; its executor emits no second span for it.
  await waitFor(() => node.executor.inFlight === 0 || undefined, { timeoutMs: 10_000, describe: "the stopped attempt to end" });
  await node.sweeper.pass(Date.now());
  // A later run's spans arriving shows the exporter sent what it had of this one.
  await publish({ name: "c085-marker", nodes: [{ id: "x", kind: "code", handler: "echo", input: 1 }] });
  const marker = await start("c085-marker");
  await settled(client, marker);
  await receiver.traceOf(marker, (a) => a.some((s) => s.name === "step x"));

  const all = await receiver.traceOf(id);
  const root = named(all, "run c085-live");
  expect(root).toHaveLength(1);
  const step = named(all, "step w");
  expect(step).toHaveLength(1);
  expect(step[0]!.status).toBe(STATUS_ERROR);
  expect(step[0]!.attributes["error.type"]).toBe("cancelled");
  expect(step[0]!.parentSpanId).toBe(root[0]!.spanId);
}, 60_000);

it("C070 an agent node's subagent opens no span beyond the node's attempts': the child run's invoke_agent span names the node and is a child of the run's span", async () => {
  const boss = {
    turns: [
      { tool_calls: [{ name: "agent__c070-helper", arguments: { task: "add 40 and 2" } }], usage: { input_tokens: 20, output_tokens: 10 } },
      { text: "The helper says 42.", usage: { input_tokens: 40, output_tokens: 10 } },
    ],
  };
  const helper = { turns: [{ text: "42", usage: { input_tokens: 20, output_tokens: 10 } }] };
  expect((await client.putModelProvider({ name: "boss", kind: "scripted", script: boss })).outcome).toBe("created");
  expect((await client.putModelProvider({ name: "helper", kind: "scripted", script: helper })).outcome).toBe("created");
  const agent = (model: string, extra: Record<string, unknown> = {}) => ({
    id: "ask",
    kind: "agent",
    model,
    instructions: "Answer.",
    input: "${input.task}",
    ...extra,
  });
  await publish({ name: "c070-helper", nodes: [agent("helper/m1")] });
  await publish({ name: "c070-boss", nodes: [agent("boss/m1", { agents: ["c070-helper"] })] });
  const id = await start("c070-boss", { task: "add 40 and 2" });
  const done = await settled(client, id);
  expect(done.status, JSON.stringify(done)).toBe("succeeded");
  const all = await receiver.traceOf(id, (a) => a.some((s) => s.name === "invoke_agent c070-helper") && a.filter((s) => s.name === "step ask").length >= 2);
  const root = named(all, "run c070-boss");
  expect(root).toHaveLength(1);
  const child = named(all, "invoke_agent c070-helper");
  expect(child).toHaveLength(1);
  expect(child[0]!.parentSpanId).toBe(root[0]!.spanId);
  expect(child[0]!.attributes).toMatchObject({ "runway.parent.run.id": id, "runway.parent.node": "ask", "gen_ai.agent.name": "c070-helper" });
  // The boss run's spans: its own, and the agent node's attempts (the one that delegated, parked, and the one that answered) with their model calls; nothing else names the node.
  const bossRun = all.filter((s) => s.attributes["runway.run.id"] === id);
  expect(bossRun.map((s) => s.name).sort()).toEqual(["chat m1", "chat m1", "run c070-boss", "step ask", "step ask"]);
  const attempts = named(bossRun, "step ask").sort((x, y) => Number(x.attributes["runway.attempt"]) - Number(y.attributes["runway.attempt"]));
  expect(attempts.map((s) => [s.attributes["runway.attempt"], s.parentSpanId])).toEqual([
    [1, root[0]!.spanId],
    [2, root[0]!.spanId],
  ]);
  // The attempt that answered began once the child had ended; the child's own attempt is under the child's span.
  expect(attempts[1]!.start).toBeGreaterThanOrEqual(child[0]!.end);
  const childStep = all.filter((s) => s.name === "step ask" && s.attributes["runway.run.id"] !== id);
  expect(childStep.map((s) => s.parentSpanId)).toEqual([child[0]!.spanId]);
}, 60_000);
