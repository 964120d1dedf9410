// The MCP fixture servers work as the gateway tests need them: the effects server over stdio and
// Streamable HTTP (tools, annotations, the effect counter file, crash, big replies, Tasks), and
// the reference server-everything over both transports.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, CreateTaskResultSchema, ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { waitFor } from "../harness/index.js";
import { EFFECT_KEY_META, everythingServer, startEffectsServer, startEverythingHttp } from "../fixtures/mcp/start.js";
import type { EffectsServerHandle, StdioCommand } from "../fixtures/mcp/start.js";

const CALL_TIMEOUT = 15_000;
const clients = new Set<Client>();
const servers = new Set<{ stop(): Promise<void> }>();

interface Target {
  url?: string;
  command?: StdioCommand;
}

async function connect(target: Target): Promise<Client> {
  const client = new Client({ name: "mcp-fixtures-test", version: "1.0.0" }, { capabilities: {} });
  client.onerror = () => {}; // transport noise (e.g. a crashed server) is asserted on via the calls
  let transport: StdioClientTransport | StreamableHTTPClientTransport;
  if (target.url) {
    transport = new StreamableHTTPClientTransport(new URL(target.url));
  } else if (target.command) {
    const stdio = new StdioClientTransport({ ...target.command, stderr: "pipe" });
    transport = stdio;
  } else {
    throw new Error("target has neither url nor command");
  }
  await client.connect(transport, { timeout: 20_000 });
  if (transport instanceof StdioClientTransport) transport.stderr?.on("data", () => {}); // drain it
  clients.add(client);
  return client;
}

async function close(client: Client): Promise<void> {
  clients.delete(client);
  await client.close().catch(() => {});
}

async function effects(opts: { http?: boolean }): Promise<EffectsServerHandle> {
  const handle = await startEffectsServer(opts);
  servers.add(handle);
  return handle;
}

function textOf(result: CallToolResult): string {
  const first = result.content[0];
  return first?.type === "text" ? first.text : "";
}

const withKey = (key: string) => ({ [EFFECT_KEY_META]: key });

afterAll(async () => {
  await Promise.all([...clients].map(close));
  await Promise.all([...servers].map((s) => s.stop()));
});

const TOOL_NAMES = [
  "answer",
  "ask_user",
  "big",
  "charge",
  "crash",
  "fail",
  "find_charge",
  "get_value",
  "hang",
  "lying_reader",
  "sample",
  "set_value",
  "slow_task",
];

describe.each([
  { transport: "stdio", http: false },
  { transport: "http", http: true },
])("effects server over $transport", ({ http }) => {
  let server: EffectsServerHandle;
  let client: Client;

  beforeAll(async () => {
    server = await effects({ http });
    client = await connect(server);
  });

  it("lists all tools with their annotations", async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(TOOL_NAMES);
    const byName = new Map(tools.map((t) => [t.name, t]));
    expect(byName.get("charge")?.annotations).toBeUndefined();
    expect(byName.get("set_value")?.annotations).toEqual({ idempotentHint: true, readOnlyHint: false, destructiveHint: false });
    expect(byName.get("get_value")?.annotations).toEqual({ readOnlyHint: true });
    expect(byName.get("lying_reader")?.annotations).toEqual({ readOnlyHint: true });
    expect(byName.get("slow_task")?.execution?.taskSupport).toBe("required");
    expect(byName.get("charge")?.inputSchema.required).toEqual(["account", "amount"]);
  });

  it("charge applies one effect per call, before replying", async () => {
    const first = (await client.callTool({ name: "charge", arguments: { account: "acct", amount: 5 }, _meta: withKey("charge-1") }, undefined, {
      timeout: CALL_TIMEOUT,
    })) as CallToolResult;
    expect(textOf(first)).toBe("charged acct 5");
    expect(first.structuredContent).toEqual({ account: "acct", amount: 5, charge_no: 1 });
    const second = (await client.callTool({ name: "charge", arguments: { account: "acct", amount: 7, delay_ms: 50 }, _meta: withKey("charge-2") }, undefined, {
      timeout: CALL_TIMEOUT,
    })) as CallToolResult;
    expect(second.structuredContent).toEqual({ account: "acct", amount: 7, charge_no: 2 });
    const counts = server.counts();
    expect(counts.calls.charge).toBe(2);
    expect(counts.effects.charge).toBe(2);
    expect(counts.keys).toEqual(expect.arrayContaining(["charge-1", "charge-2"]));
  });

  it("set_value applies once per effect key; get_value reads it", async () => {
    const call = (value: string, key: string) =>
      client.callTool({ name: "set_value", arguments: { key: "color", value }, _meta: withKey(key) }, undefined, { timeout: CALL_TIMEOUT });
    expect((await call("red", "set-1")).structuredContent).toEqual({ key: "color", value: "red" });
    await call("blue", "set-1"); // a retry under the same effect key: no second effect
    let counts = server.counts();
    expect(counts.calls.set_value).toBe(2);
    expect(counts.effects.set_value).toBe(1);
    expect(counts.values.color).toBe("red");
    const read = await client.callTool({ name: "get_value", arguments: { key: "color" } }, undefined, { timeout: CALL_TIMEOUT });
    expect(read.structuredContent).toEqual({ key: "color", value: "red" });
    const missing = await client.callTool({ name: "get_value", arguments: { key: "nope" } }, undefined, { timeout: CALL_TIMEOUT });
    expect(missing.structuredContent).toEqual({ key: "nope", value: null });
    await call("green", "set-2");
    counts = server.counts();
    expect(counts.effects.set_value).toBe(2);
    expect(counts.values.color).toBe("green");
    expect(counts.calls.get_value).toBe(2);
    expect(counts.effects.get_value).toBeUndefined();
  });

  it("lying_reader applies an effect despite readOnlyHint; fail returns isError", async () => {
    await client.callTool({ name: "lying_reader", arguments: {} }, undefined, { timeout: CALL_TIMEOUT });
    expect(server.counts().effects.lying_reader).toBe(1);
    const failed = (await client.callTool({ name: "fail", arguments: {} }, undefined, { timeout: CALL_TIMEOUT })) as CallToolResult;
    expect(failed.isError).toBe(true);
    expect(textOf(failed)).toBe("boom");
  });

  it("hang never answers (the client's timeout ends the call)", async () => {
    const started = Date.now();
    const err = await client.callTool({ name: "hang", arguments: {} }, undefined, { timeout: 300 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(McpError);
    expect((err as McpError).code).toBe(ErrorCode.RequestTimeout);
    expect(Date.now() - started).toBeLessThan(5000);
    // the server is still fine afterwards
    expect((await client.callTool({ name: "get_value", arguments: { key: "x" } }, undefined, { timeout: CALL_TIMEOUT })).structuredContent).toEqual({
      key: "x",
      value: null,
    });
  });

  it("big returns at least 5 MiB of text", async () => {
    const result = (await client.callTool({ name: "big", arguments: {} }, undefined, { timeout: CALL_TIMEOUT })) as CallToolResult;
    expect(textOf(result).length).toBeGreaterThanOrEqual(5 * 1024 * 1024);
  });

  it("slow_task runs as a task (callToolStream)", async () => {
    const kinds: string[] = [];
    let result: CallToolResult | undefined;
    for await (const message of client.experimental.tasks.callToolStream({ name: "slow_task", arguments: { ms: 200 } }, CallToolResultSchema, {
      timeout: CALL_TIMEOUT,
    })) {
      kinds.push(message.type);
      if (message.type === "result") result = message.result as CallToolResult;
      if (message.type === "error") throw message.error;
    }
    expect(kinds[0]).toBe("taskCreated");
    expect(kinds.at(-1)).toBe("result");
    expect(result?.structuredContent).toEqual({ done: true, ms: 200 });
    expect(server.counts().effects.slow_task).toBe(1);
  });

  it("crash fails the call (the process exits) and the call is counted", async () => {
    const crashing = await effects({ http });
    const crashClient = await connect(crashing);
    const started = Date.now();
    const err = await crashClient.callTool({ name: "crash", arguments: {} }, undefined, { timeout: 10_000 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(Error); // stdio: McpError ConnectionClosed; HTTP: TypeError "fetch failed"
    expect((err as { code?: unknown }).code).not.toBe(ErrorCode.RequestTimeout);
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(crashing.counts().calls.crash).toBe(1);
    if (crashing.process) expect((await crashing.process.exited).code).toBe(1);
    await close(crashClient);
  });
});

describe("concurrent clients", () => {
  const charge = (client: Client, i: number) =>
    client.callTool({ name: "charge", arguments: { account: `c${i}`, amount: i } }, undefined, { timeout: CALL_TIMEOUT }) as Promise<CallToolResult>;
  const chargeNos = (results: CallToolResult[]) => results.map((r) => (r.structuredContent as { charge_no: number }).charge_no).sort((a, b) => a - b);
  const oneTo = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

  it("HTTP serves many concurrent clients", async () => {
    const server = await effects({ http: true });
    const connected = await Promise.all(oneTo(8).map(() => connect(server)));
    const results = await Promise.all(connected.flatMap((c, i) => [charge(c, i), charge(c, i + 100)]));
    expect(chargeNos(results)).toEqual(oneTo(16));
    expect(server.counts().effects.charge).toBe(16);
    expect(server.counts().calls.charge).toBe(16);
    await Promise.all(connected.map(close));
  });

  it("several stdio server processes share one counter file", async () => {
    const server = await effects({ http: false });
    const connected = await Promise.all(oneTo(3).map(() => connect(server)));
    const results = await Promise.all(connected.flatMap((c, i) => oneTo(4).map((j) => charge(c, i * 10 + j))));
    expect(chargeNos(results)).toEqual(oneTo(12));
    expect(server.counts().effects.charge).toBe(12);
    expect(server.counts().calls.charge).toBe(12);
    await Promise.all(connected.map(close));
  });
});

describe("slow_task over HTTP: a task outlives its client", () => {
  let server: EffectsServerHandle;

  beforeAll(async () => {
    server = await effects({ http: true });
  });

  it("a second client gets the result by task id", async () => {
    const first = await connect(server);
    const created = await first.request({ method: "tools/call", params: { name: "slow_task", arguments: { ms: 800 } } }, CreateTaskResultSchema, {
      task: { ttl: 60_000 },
      timeout: CALL_TIMEOUT,
    });
    const taskId = created.task.taskId;
    expect(created.task.status).toBe("working");
    expect(created.task.pollInterval).toBe(100);
    await close(first); // the creating client goes away

    const second = await connect(server);
    const status = await second.experimental.tasks.getTask(taskId, { timeout: CALL_TIMEOUT });
    expect(status.taskId).toBe(taskId);
    expect(["working", "completed"]).toContain(status.status);
    // tasks/result blocks until the task is terminal
    const result = (await second.experimental.tasks.getTaskResult(taskId, CallToolResultSchema, { timeout: CALL_TIMEOUT })) as CallToolResult;
    expect(result.structuredContent).toEqual({ done: true, ms: 800 });
    expect((await second.experimental.tasks.getTask(taskId, { timeout: CALL_TIMEOUT })).status).toBe("completed");
    const counts = server.counts();
    expect(counts.calls.slow_task).toBe(1);
    expect(counts.effects.slow_task).toBe(1);
    await close(second);
  });

  it("tasks/cancel ends the task cancelled and is recorded", async () => {
    const first = await connect(server);
    const created = await first.request({ method: "tools/call", params: { name: "slow_task", arguments: { ms: 60_000 } } }, CreateTaskResultSchema, {
      task: { ttl: 60_000 },
      timeout: CALL_TIMEOUT,
    });
    const taskId = created.task.taskId;
    await close(first);

    const second = await connect(server);
    const cancelled = await second.experimental.tasks.cancelTask(taskId, { timeout: CALL_TIMEOUT });
    expect(cancelled.status).toBe("cancelled");
    expect(server.counts().cancelled).toContain(taskId);
    const after = await waitFor(
      async () => {
        const t = await second.experimental.tasks.getTask(taskId, { timeout: CALL_TIMEOUT });
        return t.status === "cancelled" ? t : undefined;
      },
      { timeoutMs: 5000, describe: "task to read back as cancelled" },
    );
    expect(after.status).toBe("cancelled");
    const listed = await second.experimental.tasks.listTasks(undefined, { timeout: CALL_TIMEOUT });
    expect(listed.tasks.map((t) => t.taskId)).toContain(taskId);
    await close(second);
  });
});

describe("server-everything", () => {
  async function exercise(client: Client): Promise<void> {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toContain("echo");
    const result = (await client.callTool({ name: "echo", arguments: { message: "hi" } }, undefined, { timeout: CALL_TIMEOUT })) as CallToolResult;
    expect(textOf(result)).toBe("Echo: hi");
  }

  it("over stdio: lists tools and echoes", async () => {
    const client = await connect({ command: everythingServer() });
    await exercise(client);
    await close(client);
  });

  it("over Streamable HTTP: lists tools and echoes", async () => {
    const everything = await startEverythingHttp();
    servers.add(everything);
    const client = await connect({ url: everything.url });
    await exercise(client);
    await close(client);
    await everything.stop();
  });
});
