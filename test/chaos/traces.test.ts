import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { headers as natsHeaders } from "@nats-io/transport-node";
import { RunwayClient } from "../../cluster/client.js";
import { waitFor, type ChildHandle } from "../harness/index.js";
import { startEffectsServer, type EffectsServerHandle } from "../fixtures/mcp/start.js";
import { startModelFake } from "../fixtures/models/start.js";
import { SPAN_KIND_SERVER, startOtlpReceiver, STATUS_ERROR, type OtlpReceiver, type ReceivedSpan } from "../fixtures/otlp.js";
import { finished, singleServerWorld, spawnWorkflowNode } from "./node-process.js";
import type { RunAnswer } from "../integration/workflow-support.js";

/**
 * Issue 40 §2, acceptance 5: a node exports its runs' spans over OTLP/HTTP to a receiver started
 * as its own process (test/fixtures/otlp-receiver.ts, which writes each span it is sent to a file);
 * the spans of a run form one tree, across a child run, a retry and a SIGKILL of the node.
 */

type Span = ReceivedSpan;

const world = singleServerWorld();
let receiver: OtlpReceiver;
let endpoint: string;
let fx: EffectsServerHandle;
let client: RunwayClient;
let node: ChildHandle | undefined;
/** The node's HTTP server (A2A), e.g. `http://127.0.0.1:41234`. */
let httpBase: string;
const traceOf = (run: string, more?: (all: Span[]) => boolean) => receiver.traceOf(run, more);

/** `runway node` with tracing on (the OpenTelemetry variables only), in its own process. */
async function startTracedNode(name: string): Promise<ChildHandle> {
  const child = spawnWorkflowNode(world.server.url, world.children, name, {
    extra: ["--http-port", "0"],
    env: { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_BSP_SCHEDULE_DELAY: "100", OTEL_SERVICE_NAME: "runway-test" },
  });
  await child.waitForLine(/^READY /, { timeoutMs: 30_000 });
  httpBase = (await child.waitForLine(/^A2A agents at /, { timeoutMs: 30_000 })).replace(/^A2A agents at /, "").replace(/\/a2a\/.*$/, "");
  return child;
}

/** runs.start over NATS with these headers (the client has no headers: this is what any NATS client sends). */
async function startWith(definition: string, traceparent: string | undefined, input: unknown = {}): Promise<string> {
  const h = natsHeaders();
  if (traceparent !== undefined) h.set("traceparent", traceparent);
  const reply = await world.nc.request(`runway.v1.t1.runs.start`, JSON.stringify({ definition, input }), { timeout: 15_000, headers: h });
  const answer = JSON.parse(reply.string()) as { outcome: string; run?: { id: string } };
  expect(answer.outcome, JSON.stringify(answer)).toBe("started");
  return answer.run!.id;
}

const byName = (all: Span[], name: string) => all.filter((s) => s.name === name);
const one = (all: Span[], name: string) => {
  const found = byName(all, name);
  expect(found, `${name} in ${all.map((s) => s.name).join(", ")}`).toHaveLength(1);
  return found[0]!;
};

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  world.children.push(receiver.process);
  endpoint = receiver.endpoint;
  fx = await startEffectsServer({ http: true });
  node = await startTracedNode("traced-node");
  client = new RunwayClient(world.nc, "t1");
  await client.createTenant("t1");
  expect((await client.putToolServer({ name: "fx", transport: { type: "http", url: fx.url } })).outcome).toBe("saved");
  const defs = [
    { name: "traced-child", nodes: [{ id: "leaf", kind: "code", handler: "echo", input: "hi" }] },
    {
      name: "traced",
      nodes: [
        { id: "call", kind: "tool", server: "fx", tool: "set_value", arguments: { key: "k", value: "v" } },
        { id: "flaky", kind: "code", handler: "fail_until", input: { until: 2 }, retry: { max_attempts: 3, backoff_ms: 10, max_backoff_ms: 10 } },
        { id: "child", kind: "subworkflow", workflow: "traced-child" },
      ],
    },
    {
      name: "retried",
      nodes: [{ id: "flaky", kind: "code", handler: "fail_until", input: { until: 2 }, retry: { max_attempts: 3, backoff_ms: 10, max_backoff_ms: 10 } }],
    },
    { name: "one-tool", nodes: [{ id: "call", kind: "tool", server: "fx", tool: "set_value", arguments: { key: "one", value: "1" } }] },
    { name: "stuck", nodes: [{ id: "work", kind: "code", handler: "spin_first", input: { ms: 60_000 } }] },
  ];
  for (const d of defs) expect((await client.putDefinition(d)).outcome).toBe("published");
  expect((await client.exposeAgent({ definition: "traced-child", public: true })).outcome).toBe("exposed");
}, 90_000);

afterAll(async () => {
  await fx?.stop();
});

describe("traces over OTLP/HTTP to a receiver process", () => {
  it("acceptance 5: a run with a tool call, a retry and a child exports one trace whose spans nest as the run did, under the traceparent given at its start", async () => {
    const given = { trace: "4bf92f3577b34da6a3ce929d0e0e4736", span: "00f067aa0ba902b7" };
    const id = await startWith("traced", `00-${given.trace}-${given.span}-01`);
    const done = await finished(client, id);
    expect(done.status, JSON.stringify(done)).toBe("succeeded");
    const all = await traceOf(
      id,
      (a) => a.some((s) => s.name === "step leaf") && byName(a, "step flaky").length === 2 && a.some((s) => s.name.startsWith("execute_tool")),
    );

    // One trace: the traceparent's; the run's span is the root, the traceparent's span its (remote) parent.
    expect(new Set(all.map((s) => s.traceId))).toEqual(new Set([given.trace]));
    const root = one(all, "run traced");
    expect(root.parentSpanId).toBe(given.span);
    expect(root.kind).toBe(SPAN_KIND_SERVER);
    expect(root.status).not.toBe(STATUS_ERROR);
    expect(root.resource["service.name"]).toBe("runway-test");
    expect(root.attributes).toMatchObject({ "runway.run.id": id, "runway.tenant": "t1", "runway.run.status": "succeeded" });

    // The tool node: its attempt under the run, its call (GenAI execute_tool) under the attempt.
    const call = one(all, "step call");
    expect(call.parentSpanId).toBe(root.spanId);
    const tool = one(all, "execute_tool set_value");
    expect(tool.parentSpanId).toBe(call.spanId);
    expect(tool.attributes).toMatchObject({ "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "set_value", "runway.tool.server": "fx" });

    // The retried step: two attempt spans under the run, the first failed, the second not.
    const flaky = byName(all, "step flaky").sort((a, b) => Number(a.attributes["runway.attempt"]) - Number(b.attributes["runway.attempt"]));
    expect(flaky.map((s) => [s.attributes["runway.attempt"], s.parentSpanId, s.status === STATUS_ERROR])).toEqual([
      [1, root.spanId, true],
      [2, root.spanId, false],
    ]);

    // The child run: an invoke_agent span under the run's, its step under it.
    const child = one(all, "invoke_agent traced-child");
    expect(child.parentSpanId).toBe(root.spanId);
    expect(child.attributes).toMatchObject({ "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "traced-child", "runway.parent.run.id": id });
    expect(one(all, "step leaf").parentSpanId).toBe(child.spanId);

    // Nesting in time as well: every span lies within its parent's.
    const byId = new Map(all.map((s) => [s.spanId, s]));
    for (const s of all) {
      const parent = s.parentSpanId ? byId.get(s.parentSpanId) : undefined;
      if (!parent) continue;
      expect(s.start, `${s.name} starts within ${parent.name}`).toBeGreaterThanOrEqual(parent.start);
      expect(s.end, `${s.name} ends within ${parent.name}`).toBeLessThanOrEqual(parent.end);
    }
    // Every span but the root has its parent in the trace.
    expect(all.filter((s) => s !== root && !byId.has(s.parentSpanId ?? ""))).toEqual([]);
  }, 90_000);

  it("C115 a retried step leaves a failed span for the earlier attempt, then the success, under a run that did not fail", async () => {
    const id = await startWith("retried", undefined);
    const done = await finished(client, id);
    expect(done.status).toBe("succeeded");
    const all = await traceOf(id, (a) => byName(a, "step flaky").length === 2);
    const root = one(all, "run retried");
    expect(root.parentSpanId).toBeUndefined();
    expect(root.status).not.toBe(STATUS_ERROR);
    const [first, second] = byName(all, "step flaky").sort((a, b) => a.start - b.start);
    expect(first!.attributes["runway.attempt"]).toBe(1);
    expect(first!.status).toBe(STATUS_ERROR);
    expect(first!.message).toContain("attempt 1 fails");
    expect(second!.attributes["runway.attempt"]).toBe(2);
    expect(second!.status).not.toBe(STATUS_ERROR);
    expect(second!.start).toBeGreaterThanOrEqual(first!.end);
  }, 60_000);

  it("C057 a width-one tool node produces one execute_tool span and no child run's span", async () => {
    const id = await startWith("one-tool", undefined);
    expect((await finished(client, id)).status).toBe("succeeded");
    const all = await traceOf(id, (a) => a.some((s) => s.name.startsWith("execute_tool")));
    expect(all.map((s) => s.name).sort()).toEqual(["execute_tool set_value", "run one-tool", "step call"]);
    expect(all.filter((s) => s.attributes["gen_ai.operation.name"] === "invoke_agent")).toEqual([]);
  }, 60_000);

  it("a malformed traceparent is ignored (W3C): the run starts, and its span is its own trace's root", async () => {
    for (const bad of [
      "00-xyz",
      "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
      "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      "<script>",
    ]) {
      const id = await startWith("one-tool", bad);
      expect((await finished(client, id)).status).toBe("succeeded");
      const root = one(await traceOf(id), "run one-tool");
      expect(root.parentSpanId).toBeUndefined();
      expect(root.traceId).not.toBe("00000000000000000000000000000000");
    }
  }, 90_000);

  it("a traceparent header on the A2A request that starts a task makes the run's span that span's child", async () => {
    const given = { trace: "0af7651916cd43dd8448eb211c80319c", span: "b7ad6b7169203331" };
    const res = await fetch(`${httpBase}/a2a/t1/traced-child`, {
      method: "POST",
      headers: { "content-type": "application/json", "a2a-version": "1.0", traceparent: `00-${given.trace}-${given.span}-01` },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "SendMessage",
        params: { message: { messageId: `m-${Date.now()}`, role: "ROLE_USER", parts: [{ data: { hi: 1 } }] }, configuration: { returnImmediately: true } },
      }),
    });
    const body = (await res.json()) as { result?: { task?: { id: string } } };
    const id = body.result?.task?.id;
    expect(id, JSON.stringify(body)).toBeTruthy();
    expect((await finished(client, id!)).status).toBe("succeeded");
    const all = await traceOf(id!, (a) => a.some((s) => s.name === "step leaf"));
    const root = one(all, "run traced-child");
    expect(root.traceId).toBe(given.trace);
    expect(root.parentSpanId).toBe(given.span);
    expect(one(all, "step leaf").parentSpanId).toBe(root.spanId);
  }, 60_000);

  it("C118 a SIGKILL of the node mid-step leaves an attempt span that recovery closes with an error status (worker_lost)", async () => {
    const id = await startWith("stuck", undefined);
    // Attempt 1 is leased and spinning on the node.
    await waitFor(
      async () => {
        const r = (await client.getRun(id)).run as RunAnswer;
        return (r.nodes.work?.attempt ?? 0) >= 1 || undefined;
      },
      { timeoutMs: 30_000, describe: "attempt 1 to be leased" },
    );
    const killedAt = Date.now();
    await node!.kill("SIGKILL");
    node = await startTracedNode("traced-node");
    const done = await finished(client, id);
    expect(done.status, JSON.stringify(done)).toBe("succeeded");
    const all = await traceOf(id, (a) => byName(a, "step work").length === 2);
    const root = one(all, "run stuck");
    const [lost, retried] = byName(all, "step work").sort((a, b) => Number(a.attributes["runway.attempt"]) - Number(b.attributes["runway.attempt"]));
    // The attempt the killed node was running never reported: recovery on the new node closed its span.
    expect(lost!.attributes["runway.attempt"]).toBe(1);
    expect(lost!.status).toBe(STATUS_ERROR);
    expect(lost!.attributes["error.type"]).toBe("worker_lost");
    expect(lost!.message).toContain("worker_lost");
    expect(lost!.parentSpanId).toBe(root.spanId);
    expect(lost!.start).toBeLessThanOrEqual(killedAt);
    expect(lost!.end).toBeGreaterThanOrEqual(killedAt);
    expect(lost!.resource["service.instance.id"]).toBe("traced-node");
    // The retry on the new node, and the run's root span: one trace across the crash.
    expect(retried!.attributes["runway.attempt"]).toBe(2);
    expect(retried!.status).not.toBe(STATUS_ERROR);
    expect(new Set(all.map((s) => s.traceId)).size).toBe(1);
    expect(all.every((s) => s === root || s.parentSpanId === root.spanId)).toBe(true);
  }, 120_000);

  it("an agent node's model calls are chat spans with the GenAI attributes and its tool calls execute_tool spans, under the attempt's span", async () => {
    const openai = await startModelFake("openai", [
      { reply: { tool_calls: [{ name: "fx__set_value", arguments: { key: "a", value: "1" } }], usage: { input_tokens: 11, output_tokens: 7 } } },
      { reply: { text: "Done.", usage: { input_tokens: 23, output_tokens: 3 } } },
    ]);
    try {
      expect((await client.putModelProvider({ name: "oa", kind: "openai", base_url: openai.baseUrl })).outcome).toBe("created");
      const def = {
        name: "traced-agent",
        nodes: [{ id: "ask", kind: "agent", model: "oa/fake-gpt", instructions: "Set a.", input: "go", tools: ["fx/set_value"] }],
      };
      expect((await client.putDefinition(def)).outcome).toBe("published");
      const id = await startWith("traced-agent", undefined);
      expect((await finished(client, id)).status).toBe("succeeded");
      const all = await traceOf(id, (a) => byName(a, "chat fake-gpt").length === 2);
      const attempt = one(all, "step ask");
      expect(attempt.attributes["runway.agent.model"]).toBe("oa/fake-gpt");
      const chats = byName(all, "chat fake-gpt").sort((a, b) => a.start - b.start);
      expect(chats.map((c) => c.parentSpanId)).toEqual([attempt.spanId, attempt.spanId]);
      expect(chats[0]!.attributes).toMatchObject({
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "fake-gpt",
        "gen_ai.usage.input_tokens": 11,
        "gen_ai.usage.output_tokens": 7,
      });
      expect(chats[1]!.attributes).toMatchObject({ "gen_ai.usage.input_tokens": 23, "gen_ai.usage.output_tokens": 3 });
      const tool = one(all, "execute_tool set_value");
      expect(tool.parentSpanId).toBe(attempt.spanId);
      expect(tool.start).toBeGreaterThanOrEqual(chats[0]!.end);
      expect(tool.end).toBeLessThanOrEqual(chats[1]!.start);
    } finally {
      await openai.stop();
    }
  }, 90_000);
});
