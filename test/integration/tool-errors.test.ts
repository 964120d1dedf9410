/**
 * A tool server that answers a call with a JSON-RPC error refused it: the tool did not run, so
 * the call is `refused` (`tool_call_refused`), tried again only for an internal error; a poll for
 * a task it no longer knows ends the task (`tool_task_lost`). Checked
 * through the gateway for both revisions: a scripted 2025-11-25 server (the SDK's client; an
 * McpServer turns every error into a tool result, so a scripted one is needed to answer with a
 * protocol error) and the 2026-07-28 fixture (the hand-rolled client).
 */
import { createServer, type Server } from "node:http";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ToolConnections, ToolGateway, ToolRegistry, ToolServerSpecSchema, ensureToolsBucket } from "../../gateways/tools/index.js";
import { startServer, type NatsServerHandle } from "../harness/index.js";
import { startModernServer, type EffectsServerHandle } from "../fixtures/mcp/start.js";

let server: NatsServerHandle;
let nc: NatsConnection;
let http: Server;
let scriptedUrl: string;
let modern: EffectsServerHandle;
let gateway: ToolGateway;
let connections: ToolConnections;
const registry = () => new ToolRegistry(nc);

/** A 2025-11-25 server over Streamable HTTP (JSON answers) whose tools/call answers the JSON-RPC error its tool's name gives. */
function scripted(): Promise<string> {
  http = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (req.method !== "POST") return void res.writeHead(405).end();
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { id?: number; method: string; params?: { name?: string } };
      if (body.id === undefined) return void res.writeHead(202).end();
      const answer = (result: unknown) =>
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id: body.id, ...result! }));
      if (body.method === "initialize")
        return answer({ result: { protocolVersion: "2025-11-25", capabilities: { tools: {} }, serverInfo: { name: "scripted", version: "1" } } });
      if (body.method === "tools/list")
        return answer({ result: { tools: ["invalid_params", "internal_error"].map((name) => ({ name, inputSchema: { type: "object" } })) } });
      if (body.method === "tools/call") {
        const code = body.params?.name === "internal_error" ? -32603 : -32602;
        return answer({ error: { code, message: `scripted ${body.params?.name}` } });
      }
      // No task is known here: a poll for one is answered as for a task the server lost.
      if (body.method === "tasks/get") return answer({ error: { code: -32602, message: "Failed to retrieve task: Task not found" } });
      answer({ error: { code: -32601, message: "method not found" } });
    });
  });
  return new Promise((resolve) =>
    http.listen(0, "127.0.0.1", () => {
      const addr = http.address();
      resolve(`http://127.0.0.1:${typeof addr === "object" && addr ? addr.port : 0}/mcp`);
    }),
  );
}

beforeAll(async () => {
  server = await startServer();
  nc = await connect(server.connectOptions());
  await ensureToolsBucket(nc, 1);
  [scriptedUrl, modern] = await Promise.all([scripted(), startModernServer()]);
  await registry().put("t", ToolServerSpecSchema.parse({ name: "legacy", transport: { type: "http", url: scriptedUrl } }), 1);
  await registry().put("t", ToolServerSpecSchema.parse({ name: "modern", protocol: "2026-07-28", transport: { type: "http", url: modern.url } }), 1);
  connections = new ToolConnections();
  gateway = new ToolGateway(registry(), connections);
}, 60_000);

afterAll(async () => {
  await connections?.close();
  await modern?.stop();
  http?.closeAllConnections();
  await new Promise<void>((resolve) => (http ? http.close(() => resolve()) : resolve()));
  await nc?.close();
  await server?.dispose();
});

const call = (server: string, tool: string, args: unknown = {}) =>
  gateway.call({
    tenant: "t",
    server,
    tool,
    arguments: args,
    key: `k-${server}-${tool}`,
    timeoutMs: 10_000,
    signal: new AbortController().signal,
    allowTask: false,
  });

describe("a call the server answers with a JSON-RPC error", () => {
  it("2025-11-25 (the SDK's client): refused, tool_call_refused; retryable only for an internal error", async () => {
    expect(await call("legacy", "invalid_params")).toMatchObject({ outcome: "refused", code: "tool_call_refused", retryable: false });
    expect(await call("legacy", "internal_error")).toMatchObject({ outcome: "refused", code: "tool_call_refused", retryable: true });
  });

  it("2026-07-28 (the hand-rolled client): invalid arguments are refused, not retried", async () => {
    expect(await call("modern", "charge", { account: 1 })).toMatchObject({ outcome: "refused", code: "tool_call_refused", retryable: false });
  });
});

describe("a poll for a task the server no longer knows", () => {
  it("ended without a result anyone can know: refused, tool_task_lost, on both revisions", async () => {
    expect(await gateway.pollTask("t", "legacy", "gone", "2025-11-25")).toMatchObject({ outcome: "refused", code: "tool_task_lost", retryable: false });
    expect(await gateway.pollTask("t", "modern", "gone", "2026-07-28")).toMatchObject({ outcome: "refused", code: "tool_task_lost", retryable: false });
  });
});
