// The hand-rolled MCP 2026-07-28 client (gateways/tools/mcp-2026.ts) against the 2026-07-28
// fixture server (test/fixtures/mcp/modern-server.ts): discovery, tools, the effect counter,
// tasks of the io.modelcontextprotocol/tasks extension (created by one client instance, read by
// another), protocol errors, timeouts; and, against scripted in-test HTTP servers, the wire form
// of requests (headers, _meta) and of answers (SSE, input_required).
import { createServer } from "node:http";
import type { IncomingHttpHeaders, IncomingMessage, Server, ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ModernMcpClient, speaksModern } from "../../gateways/tools/mcp-2026.js";
import { ModernMcpError, MODERN_PROTOCOL, TASKS_EXTENSION, type ModernTaskState } from "../../gateways/tools/mcp-2026-types.js";
import { freePort, waitFor } from "../harness/index.js";
import { EFFECT_KEY_META, startEffectsServer, startModernServer } from "../fixtures/mcp/start.js";
import type { EffectsServerHandle } from "../fixtures/mcp/start.js";

const servers = new Set<{ stop(): Promise<void> }>();
const httpServers = new Set<Server>();

afterAll(async () => {
  await Promise.all([...servers].map((s) => s.stop()));
  for (const s of httpServers) s.closeAllConnections();
  await Promise.all([...httpServers].map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
});

interface Received {
  headers: IncomingHttpHeaders;
  body: { jsonrpc: string; id: number; method: string; params: Record<string, unknown> & { _meta: Record<string, unknown> } };
}

/** A node:http server on 127.0.0.1 that records every request and answers through `respond`
 *  (which may also never answer). */
async function scripted(respond: (req: Received, res: ServerResponse) => void): Promise<{ url: string; received: Received[] }> {
  const received: Received[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const r: Received = { headers: req.headers, body: JSON.parse(Buffer.concat(chunks).toString("utf8")) as Received["body"] };
      received.push(r);
      respond(r, res);
    });
  });
  httpServers.add(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const addr = server.address();
  const port = typeof addr === "object" && addr ? addr.port : 0;
  return { url: `http://127.0.0.1:${port}/mcp`, received };
}

const json = (res: ServerResponse, body: unknown, status = 200) => res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));

/** Poll tasks/get (at the fixture's poll interval) until the task leaves working/input_required. */
function pollUntilTerminal(client: ModernMcpClient, taskId: string, timeoutMs = 10_000): Promise<ModernTaskState> {
  return waitFor(
    async () => {
      const state = await client.getTask(taskId, { timeoutMs: 5000 });
      return state.status === "working" || state.status === "input_required" ? undefined : state;
    },
    { timeoutMs, intervalMs: 100, describe: `task ${taskId} to end` },
  );
}

async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error("expected a rejection");
}

describe("MCP 2026-07-28 client against the modern fixture", () => {
  let modern: EffectsServerHandle;
  let legacy: EffectsServerHandle;
  let client: ModernMcpClient;

  beforeAll(async () => {
    [modern, legacy] = await Promise.all([startModernServer(), startEffectsServer({ http: true })]);
    servers.add(modern);
    servers.add(legacy);
    client = new ModernMcpClient(modern.url!, { clientInfo: { name: "mcp-2026-test", version: "1.0.0" } });
  });

  it("discovers 2026-07-28 and the tasks extension; the 2025-11-25 server does not speak it", async () => {
    const found = await client.discover({ timeoutMs: 5000 });
    expect(found.protocolVersions).toEqual([MODERN_PROTOCOL]);
    expect(found.tasks).toBe(true);
    expect((found.raw as { resultType?: string }).resultType).toBe("complete");
    expect(await speaksModern(modern.url!)).toBe(true);
    expect(await speaksModern(legacy.url!, undefined, 5000)).toBe(false);
    // the legacy server answers the modern request with a JSON-RPC error
    const err = await rejection(new ModernMcpClient(legacy.url!).discover({ timeoutMs: 5000 }));
    expect(err).toBeInstanceOf(ModernMcpError);
  });

  it("lists the tools across pages, with their annotations", async () => {
    const tools = await client.listTools({ timeoutMs: 5000 });
    expect(tools.map((t) => t.name)).toEqual(["charge", "get_value", "confirm_charge", "slow_task"]);
    expect(tools.find((t) => t.name === "get_value")?.annotations).toEqual({ readOnlyHint: true });
    expect(tools.find((t) => t.name === "charge")?.annotations).toBeUndefined();
    expect(tools.find((t) => t.name === "charge")?.inputSchema).toMatchObject({ type: "object" });
  });

  it("charge applies one effect and the effect key from meta is recorded", async () => {
    const before = modern.counts();
    const out = await client.callTool("charge", { account: "acc-1", amount: 7 }, { [EFFECT_KEY_META]: "key-charge-1" }, { timeoutMs: 5000 });
    expect(out.kind).toBe("result");
    if (out.kind !== "result") return;
    expect(out.result.isError).toBeFalsy();
    expect(out.result.structuredContent).toEqual({ account: "acc-1", amount: 7, charge_no: (before.effects.charge ?? 0) + 1 });
    const after = modern.counts();
    expect(after.effects.charge).toBe((before.effects.charge ?? 0) + 1);
    expect(after.calls.charge).toBe((before.calls.charge ?? 0) + 1);
    expect(after.keys).toContain("key-charge-1");

    const read = await client.callTool("get_value", { key: "nothing" }, {}, { timeoutMs: 5000 });
    expect(read).toMatchObject({ kind: "result", result: { structuredContent: { key: "nothing", value: null } } });
    expect(modern.counts().effects.get_value).toBeUndefined();
  });

  it("slow_task returns a task that polls to completed; another client instance reads the same task", async () => {
    const out = await client.callTool("slow_task", { ms: 300 }, { [EFFECT_KEY_META]: "key-slow-1" }, { timeoutMs: 5000 });
    expect(out).toMatchObject({ kind: "task", status: "working", pollIntervalMs: 100, ttlMs: 60_000 });
    if (out.kind !== "task") return;
    const counts = modern.counts();
    expect(counts.calls.slow_task).toBe(1);
    expect(counts.effects.slow_task).toBe(1);
    expect(counts.keys).toContain("key-slow-1");

    const final = await pollUntilTerminal(client, out.taskId);
    expect(final).toEqual({ status: "completed", result: { content: [{ type: "text", text: "done" }], structuredContent: { done: true, ms: 300 } } });

    const other = new ModernMcpClient(modern.url!);
    expect(await other.getTask(out.taskId, { timeoutMs: 5000 })).toEqual(final);
    expect(modern.counts().effects.slow_task).toBe(1);
  });

  it("cancelTask is recorded and the task ends cancelled", async () => {
    const out = await client.callTool("slow_task", { ms: 60_000 }, {}, { timeoutMs: 5000 });
    if (out.kind !== "task") throw new Error("expected a task");
    expect(await client.getTask(out.taskId, { timeoutMs: 5000 })).toMatchObject({ status: "working", pollIntervalMs: 100 });
    await client.cancelTask(out.taskId, { timeoutMs: 5000 });
    expect(modern.counts().cancelled).toContain(out.taskId);
    expect(await new ModernMcpClient(modern.url!).getTask(out.taskId, { timeoutMs: 5000 })).toEqual({ status: "cancelled" });
  });

  it("a client that does not declare the tasks extension gets -32021", async () => {
    const bare = new ModernMcpClient(modern.url!, { declareTasks: false });
    const before = modern.counts().effects.slow_task ?? 0;
    const err = await rejection(bare.callTool("slow_task", { ms: 10 }, {}, { timeoutMs: 5000 }));
    expect(err).toBeInstanceOf(ModernMcpError);
    expect((err as ModernMcpError).code).toBe(-32021);
    expect((err as ModernMcpError).data).toEqual({ requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } });
    expect(modern.counts().effects.slow_task ?? 0).toBe(before);
    // tasks/* too (ext-tasks: MUST for non-declaring clients)
    const getErr = await rejection(bare.getTask("whatever", { timeoutMs: 5000 }));
    expect((getErr as ModernMcpError).code).toBe(-32021);
    // a tool that needs no task works without the extension
    expect((await bare.callTool("get_value", { key: "k" }, {}, { timeoutMs: 5000 })).kind).toBe("result");
  });

  it("an unknown task id is -32602 for tasks/get and tasks/cancel", async () => {
    for (const call of [() => client.getTask("no-such-task", { timeoutMs: 5000 }), () => client.cancelTask("no-such-task", { timeoutMs: 5000 })]) {
      const err = await rejection(call());
      expect(err).toBeInstanceOf(ModernMcpError);
      expect((err as ModernMcpError).code).toBe(-32602);
    }
  });

  it("the fixture checks headers against the body and the protocol version", async () => {
    const post = async (headers: Record<string, string>, meta: Record<string, unknown>) => {
      const res = await fetch(modern.url!, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: { _meta: meta } }),
        signal: AbortSignal.timeout(5000),
      });
      return { status: res.status, body: (await res.json()) as { error?: { code: number; data?: unknown } } };
    };
    const meta = { "io.modelcontextprotocol/protocolVersion": MODERN_PROTOCOL, "io.modelcontextprotocol/clientCapabilities": {} };
    const ok = await post({ "mcp-method": "tools/list", "mcp-protocol-version": MODERN_PROTOCOL }, meta);
    expect(ok.status).toBe(200);
    const wrongMethod = await post({ "mcp-method": "tools/call", "mcp-protocol-version": MODERN_PROTOCOL }, meta);
    expect(wrongMethod).toMatchObject({ status: 400, body: { error: { code: -32020 } } });
    const noMethod = await post({ "mcp-protocol-version": MODERN_PROTOCOL }, meta);
    expect(noMethod).toMatchObject({ status: 400, body: { error: { code: -32020 } } });
    const oldVersion = await post(
      { "mcp-method": "tools/list", "mcp-protocol-version": "2025-11-25" },
      { ...meta, "io.modelcontextprotocol/protocolVersion": "2025-11-25" },
    );
    expect(oldVersion).toMatchObject({ status: 400, body: { error: { code: -32022, data: { supported: [MODERN_PROTOCOL], requested: "2025-11-25" } } } });
  });
});

describe("MCP 2026-07-28 client on the wire", () => {
  it("sends the protocol _meta merged with the caller's meta, and the routing headers", async () => {
    const server = await scripted((req, res) => {
      if (req.body.method === "tasks/get") {
        json(res, {
          jsonrpc: "2.0",
          id: req.body.id,
          result: { resultType: "complete", taskId: "t-1", status: "failed", error: { code: -32603, message: "boom" } },
        });
      } else {
        json(res, { jsonrpc: "2.0", id: req.body.id, result: { content: [{ type: "text", text: "ok" }] } }); // no resultType: complete
      }
    });
    const client = new ModernMcpClient(server.url, { headers: { authorization: "Bearer t0k" }, clientInfo: { name: "wire-test", version: "9" } });
    const out = await client.callTool("héllo", { a: 1 }, { [EFFECT_KEY_META]: "key-wire" }, { timeoutMs: 5000 });
    expect(out).toEqual({ kind: "result", result: { content: [{ type: "text", text: "ok" }] } });
    expect(await client.getTask("t-1", { timeoutMs: 5000 })).toEqual({ status: "failed", error: { code: -32603, message: "boom" } });

    const [call, get] = server.received;
    expect(call?.headers["mcp-method"]).toBe("tools/call");
    expect(call?.headers["mcp-name"]).toBe(`=?base64?${Buffer.from("héllo").toString("base64")}?=`);
    expect(call?.headers["mcp-protocol-version"]).toBe(MODERN_PROTOCOL);
    expect(call?.headers["authorization"]).toBe("Bearer t0k");
    expect(call?.headers["accept"]).toContain("text/event-stream");
    expect(call?.body.params).toMatchObject({ name: "héllo", arguments: { a: 1 } });
    expect(call?.body.params._meta).toEqual({
      [EFFECT_KEY_META]: "key-wire",
      "io.modelcontextprotocol/protocolVersion": MODERN_PROTOCOL,
      "io.modelcontextprotocol/clientCapabilities": { elicitation: { form: {} }, extensions: { [TASKS_EXTENSION]: {} } },
      "io.modelcontextprotocol/clientInfo": { name: "wire-test", version: "9" },
    });
    expect(get?.headers["mcp-method"]).toBe("tasks/get");
    expect(get?.headers["mcp-name"]).toBe("t-1");
    expect(get?.body.params).toMatchObject({ taskId: "t-1" });
  });

  it("reads a response from an SSE stream (after notifications, without waiting for the stream to end)", async () => {
    const server = await scripted((req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(`: keep-alive\n\nevent: message\ndata: ${JSON.stringify({ jsonrpc: "2.0", method: "notifications/progress", params: { progress: 1 } })}\n\n`);
      const result = { resultType: "complete", content: [{ type: "text", text: "streamed" }], structuredContent: { n: 1 } };
      res.write(`event: message\r\nid: 7\r\ndata: ${JSON.stringify({ jsonrpc: "2.0", id: req.body.id, result })}\r\n\r\n`);
      // the stream stays open
    });
    const out = await new ModernMcpClient(server.url).callTool("s", {}, {}, { timeoutMs: 3000 });
    expect(out).toMatchObject({ kind: "result", result: { structuredContent: { n: 1 } } });
  });

  it("mirrors x-mcp-header arguments into Mcp-Param headers and leaves out invalid tool definitions", async () => {
    const tools = [
      {
        name: "sql",
        inputSchema: {
          type: "object",
          properties: {
            region: { type: "string", "x-mcp-header": "Region" },
            opts: { type: "object", properties: { n: { type: "integer", "x-mcp-header": "N" } } },
          },
        },
      },
      { name: "bad", inputSchema: { type: "object", properties: { xs: { type: "array", items: { type: "string", "x-mcp-header": "X" } } } } },
    ];
    const server = await scripted((req, res) => {
      const result = req.body.method === "tools/list" ? { resultType: "complete", tools } : { resultType: "complete", content: [] };
      json(res, { jsonrpc: "2.0", id: req.body.id, result });
    });
    const client = new ModernMcpClient(server.url);
    const listed = await client.listTools({ timeoutMs: 3000 });
    expect(listed.map((t) => t.name)).toEqual(["sql"]);
    await client.callTool("sql", { region: " us-west1", opts: { n: 42 } }, {}, { timeoutMs: 3000 });
    const call = server.received.at(-1);
    expect(call?.headers["mcp-param-region"]).toBe(`=?base64?${Buffer.from(" us-west1").toString("base64")}?=`);
    expect(call?.headers["mcp-param-n"]).toBe("42");
  });

  it("an input_required result is MRTR: its requests and state come back to the caller, the retry carries the answers and the state; one without requests, or a task answer to tasks/get, is invalid", async () => {
    const seen: Record<string, unknown>[] = [];
    const server = await scripted((req, res) => {
      seen.push(req.body.params);
      const ask = { confirm: { method: "elicitation/create", params: { message: "ok?", requestedSchema: { type: "object" } } } };
      const result =
        req.body.method !== "tools/call"
          ? { resultType: "task", taskId: "x", status: "working" }
          : req.body.params.name === "empty"
            ? { resultType: "input_required", inputRequests: {} }
            : req.body.params.inputResponses
              ? { resultType: "complete", content: [{ type: "text", text: "done" }] }
              : { resultType: "input_required", inputRequests: ask, requestState: "s-1" };
      json(res, { jsonrpc: "2.0", id: req.body.id, result });
    });
    const client = new ModernMcpClient(server.url);
    const asked = await client.callTool("t", { a: 1 }, {}, { timeoutMs: 3000 });
    expect(asked).toEqual({
      kind: "input_required",
      inputRequests: { confirm: { method: "elicitation/create", params: { message: "ok?", requestedSchema: { type: "object" } } } },
      requestState: "s-1",
    });
    const answered = await client.callTool(
      "t",
      { a: 1 },
      {},
      { timeoutMs: 3000 },
      { inputResponses: { confirm: { action: "accept", content: {} } }, requestState: "s-1" },
    );
    expect(answered.kind).toBe("result");
    expect(seen.at(-1)).toMatchObject({ name: "t", arguments: { a: 1 }, inputResponses: { confirm: { action: "accept", content: {} } }, requestState: "s-1" });
    await expect(client.callTool("empty", {}, {}, { timeoutMs: 3000 })).rejects.toThrow(/without input requests/);
    const taskErr = await rejection(client.getTask("x", { timeoutMs: 3000 }));
    expect(taskErr).toBeInstanceOf(Error);
    expect(taskErr).not.toBeInstanceOf(ModernMcpError);
  });

  it("a server that does not answer in time gives a TimeoutError; the caller's abort an AbortError", async () => {
    const server = await scripted(() => {}); // never answers
    const client = new ModernMcpClient(server.url);
    const started = Date.now();
    const err = await rejection(client.callTool("slow", {}, {}, { timeoutMs: 200 }));
    expect((err as Error).name).toBe("TimeoutError");
    expect(err).not.toBeInstanceOf(ModernMcpError);
    expect(Date.now() - started).toBeLessThan(5000);

    const controller = new AbortController();
    const pending = rejection(client.getTask("t", { timeoutMs: 10_000, signal: controller.signal }));
    controller.abort();
    expect(((await pending) as Error).name).toBe("AbortError");

    expect(await speaksModern(server.url, undefined, 200)).toBe(false);
  });

  it("a connection failure is the fetch error, not a ModernMcpError", async () => {
    const port = await freePort(); // nothing listens there
    const err = await rejection(new ModernMcpClient(`http://127.0.0.1:${port}/mcp`).discover({ timeoutMs: 3000 }));
    expect(err).toBeInstanceOf(TypeError);
    expect(err).not.toBeInstanceOf(ModernMcpError);
    expect(await speaksModern(`http://127.0.0.1:${port}/mcp`, undefined, 3000)).toBe(false);
  });
});
