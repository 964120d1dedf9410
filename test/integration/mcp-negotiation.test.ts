/**
 * MCP version negotiation (issue 37 §6): a server that refuses a request's protocol version with
 * -32022 names the versions it supports; the client asks again with one of them it speaks (the
 * 2026-07-28 spec's SHOULD), falls back to the SDK's client on 2025-11-25 when that is what the
 * server offers, and with nothing in common fails with a typed error that says what each side
 * speaks (the gateway lists the server as unavailable with it).
 */
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ToolConnections, ToolGateway, ToolRegistry, ToolServerSpecSchema, ensureToolsBucket } from "../../gateways/tools/index.js";
import { ModernMcpClient } from "../../gateways/tools/mcp-2026.js";
import { MODERN_PROTOCOL, ModernMcpVersionError } from "../../gateways/tools/mcp-2026-types.js";
import { startServer, type NatsServerHandle } from "../harness/index.js";
import { startEffectsServer, startModernServer, type EffectsServerHandle } from "../fixtures/mcp/start.js";

let nats: NatsServerHandle;
let nc: NatsConnection;
let registry: ToolRegistry;
let connections: ToolConnections;
let gateway: ToolGateway;
const fixtures: EffectsServerHandle[] = [];
const scriptedServers: Server[] = [];

beforeAll(async () => {
  nats = await startServer();
  nc = await connect(nats.connectOptions());
  await ensureToolsBucket(nc, 1);
  registry = new ToolRegistry(nc);
  connections = new ToolConnections();
  gateway = new ToolGateway(registry, connections);
}, 60_000);

afterAll(async () => {
  await connections?.close();
  await registry?.close();
  await Promise.all(fixtures.map((f) => f.stop()));
  for (const s of scriptedServers) s.closeAllConnections();
  await Promise.all(scriptedServers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  await nc?.close();
  await nats?.dispose();
});

async function register(name: string, url: string): Promise<void> {
  await registry.put("t", ToolServerSpecSchema.parse({ name, protocol: "2026-07-28", transport: { type: "http", url } }), Date.now());
}

const call = (server: string, tool: string, args: unknown) =>
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

/** A 2026-07-28 endpoint that refuses its first `refusals` requests with -32022 naming `supported`, recording every request's version. */
async function refusing(
  supported: string[],
  refusals = 1,
): Promise<{ url: string; versions: { method: string; header: IncomingHttpHeaders[string]; meta: unknown }[] }> {
  const versions: { method: string; header: IncomingHttpHeaders[string]; meta: unknown }[] = [];
  const http = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { id: number; method: string; params: { _meta: Record<string, unknown> } };
      const meta = body.params._meta["io.modelcontextprotocol/protocolVersion"];
      versions.push({ method: body.method, header: req.headers["mcp-protocol-version"], meta });
      const answer = (status: number, payload: object) =>
        res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id: body.id, ...payload }));
      if (versions.length <= refusals)
        return answer(400, { error: { code: -32022, message: "Unsupported protocol version", data: { supported, requested: meta } } });
      if (body.method === "server/discover") return answer(200, { result: { resultType: "complete", supportedVersions: supported, capabilities: {} } });
      answer(200, { result: { resultType: "complete", tools: [{ name: "echo", inputSchema: { type: "object" } }] } });
    });
  });
  scriptedServers.push(http);
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  const addr = http.address();
  return { url: `http://127.0.0.1:${typeof addr === "object" && addr ? addr.port : 0}/mcp`, versions };
}

describe("a server that refuses the first server/discover with -32022", () => {
  it("naming a version the client speaks: discover is asked again with it, and later requests declare it", async () => {
    const server = await refusing(["2099-01-01", MODERN_PROTOCOL]);
    const client = new ModernMcpClient(server.url);
    const found = await client.discover({ timeoutMs: 5_000 });
    expect(found.protocolVersions).toEqual(["2099-01-01", MODERN_PROTOCOL]);
    expect(client.protocolVersion).toBe(MODERN_PROTOCOL);
    expect((await client.listTools({ timeoutMs: 5_000 })).map((t) => t.name)).toEqual(["echo"]);
    expect(server.versions).toEqual([
      { method: "server/discover", header: MODERN_PROTOCOL, meta: MODERN_PROTOCOL },
      { method: "server/discover", header: MODERN_PROTOCOL, meta: MODERN_PROTOCOL },
      { method: "tools/list", header: MODERN_PROTOCOL, meta: MODERN_PROTOCOL },
    ]);
  });

  it("refused again with the version it names: a typed error after one retry, not a loop", async () => {
    const server = await refusing([MODERN_PROTOCOL], 5);
    const err = await new ModernMcpClient(server.url).discover({ timeoutMs: 5_000 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ModernMcpVersionError);
    expect((err as Error).message).toBe(`MCP server at ${server.url} refused protocol version ${MODERN_PROTOCOL}, though it names ${MODERN_PROTOCOL}`);
    expect(server.versions.map((v) => v.method)).toEqual(["server/discover", "server/discover"]);
  });

  it("through the gateway: the 2026-07-28 fixture refusing its first discover is reached on 2026-07-28 and its tools are called", async () => {
    const modern = await startModernServer({ env: { MCP_REFUSE_FIRST_DISCOVER: "1" } });
    fixtures.push(modern);
    await register("retried", modern.url!);
    expect((await connections.get((await registry.get("t", "retried"))!)).wire).toBe("2026-07-28");
    expect(await call("retried", "charge", { account: "a", amount: 1 })).toMatchObject({ outcome: "ok", result: { structuredContent: { account: "a" } } });
    expect(modern.counts().effects.charge).toBe(1);
  });

  it("naming only 2025-11-25: the server is reached with the SDK's client on 2025-11-25", async () => {
    const legacy = await startEffectsServer({ http: true, env: { MCP_REFUSE_MODERN: "1" } });
    fixtures.push(legacy);
    // The server does refuse the modern client.
    const refused = await new ModernMcpClient(legacy.url!).discover({ timeoutMs: 5_000 }).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(refused).toBeInstanceOf(ModernMcpVersionError);
    expect(refused).toMatchObject({ supported: ["2025-11-25"], requested: MODERN_PROTOCOL });

    await register("fallback", legacy.url!);
    const connection = await connections.get((await registry.get("t", "fallback"))!);
    expect(connection.wire).toBe("2025-11-25");
    expect(connection.tools.has("charge")).toBe(true);
    expect(await call("fallback", "charge", { account: "b", amount: 2 })).toMatchObject({ outcome: "ok" });
    expect(legacy.counts().calls.charge).toBe(1);
  });

  it("naming nothing in common: a typed error that says what each side speaks; the gateway lists the server as unavailable", async () => {
    const modern = await startModernServer({ env: { MCP_SUPPORTED: "2099-01-01,2024-11-05" } });
    fixtures.push(modern);
    await register("strange", modern.url!);
    const err = await connections.get((await registry.get("t", "strange"))!).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ModernMcpVersionError);
    expect(err).toMatchObject({ supported: ["2099-01-01", "2024-11-05"], speaks: [MODERN_PROTOCOL, "2025-11-25"] });
    expect((err as Error).message).toBe(
      `MCP server at ${modern.url} speaks 2099-01-01, 2024-11-05; Runway speaks ${MODERN_PROTOCOL}, 2025-11-25: no protocol version in common`,
    );
    const listed = await gateway.list("t", "strange");
    expect(listed.tools).toEqual([]);
    expect(listed.unavailable).toEqual([{ server: "strange", code: "tool_server_unavailable", message: (err as Error).message }]);
    expect(await gateway.lookup("t", "strange", "charge")).toMatchObject({ outcome: "unavailable", code: "tool_server_unavailable" });
    expect(modern.counts().calls).toEqual({});
  });
});
