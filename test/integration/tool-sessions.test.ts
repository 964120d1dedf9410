/**
 * A tool server deleted or changed has its sessions closed at once, on every node that holds one
 * (issue 37 §6): a stdio server's process ends, an HTTP server's streams and session end and a
 * 2026-07-28 server's requests in flight stop (so the server can stop without waiting on the
 * node), and the next call opens a session with the new record. The second "node" here is what a
 * node builds of the tool gateway (its own connection, registry and sessions): it learns of the
 * change only through the registry's watch.
 */
import { randomUUID } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ToolConnections, ToolGateway, ToolRegistry } from "../../gateways/tools/index.js";
import { waitFor } from "../harness/index.js";
import { effectsServerCommand } from "../fixtures/mcp/start.js";
import { workflowWorld } from "./workflow-support.js";

const world = workflowWorld({ name: "sessions-node" });
/** The other node's tool gateway. */
const other = { nc: undefined as unknown as NatsConnection, registry: undefined as unknown as ToolRegistry, connections: new ToolConnections() };
let otherGateway: ToolGateway;
const dir = mkdtempSync(join(tmpdir(), "runway-sessions-"));

beforeAll(async () => {
  other.nc = await connect(world.server.connectOptions());
  other.registry = new ToolRegistry(other.nc);
  otherGateway = new ToolGateway(other.registry, other.connections);
});
afterAll(async () => {
  await other.registry?.close();
  await other.connections.close();
  await other.nc?.close();
});

/** The effects server as a stdio server that first appends its pid to `pidFile` (`exec` keeps the pid). */
function stdioServer(pidFile: string, mark: string) {
  const fx = effectsServerCommand(join(dir, "counter.json"));
  return {
    type: "stdio",
    command: "/bin/sh",
    args: ["-c", 'echo $$ >> "$PID_FILE"; exec "$@"', "sh", fx.command, ...fx.args],
    env: { ...fx.env, PID_FILE: pidFile, MARK: mark },
  };
}

const pidsIn = (file: string): number[] => (existsSync(file) ? readFileSync(file, "utf8").split("\n").filter(Boolean).map(Number) : []);

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Opens a session to `server` on both nodes (a listing of its tools opens one). */
async function openOnBothNodes(server: string): Promise<void> {
  const here = await world.client.listTools(server);
  expect(here.unavailable).toEqual([]);
  expect((here.tools as unknown[]).length).toBeGreaterThan(0);
  const there = await otherGateway.list("t1", server);
  expect(there.unavailable).toEqual([]);
  expect(there.tools.length).toBeGreaterThan(0);
}

describe("a stdio tool server", () => {
  it("deleted: its process ends at once on every node that had a session to it", async () => {
    const pidFile = join(dir, "deleted.pids");
    expect((await world.client.putToolServer({ name: "doomed", transport: stdioServer(pidFile, "a") })).outcome).toBe("saved");
    await openOnBothNodes("doomed");
    const pids = pidsIn(pidFile);
    expect(pids).toHaveLength(2);
    expect(pids.every(alive)).toBe(true);

    expect((await world.client.deleteToolServer("doomed")).outcome).toBe("deleted");
    await waitFor(() => pids.every((pid) => !alive(pid)) || undefined, {
      timeoutMs: 10_000,
      describe: `the deleted server's processes ${pids.join(", ")} to end`,
    });
    expect((await otherGateway.list("t1", "doomed")).tools).toEqual([]);
  });

  it("changed: the old session's process ends at once, and the next call opens a session with the new config", async () => {
    const before = join(dir, "before.pids");
    const after = join(dir, "after.pids");
    expect((await world.client.putToolServer({ name: "changing", transport: stdioServer(before, "a") })).outcome).toBe("saved");
    await openOnBothNodes("changing");
    const old = pidsIn(before);
    expect(old).toHaveLength(2);

    expect((await world.client.putToolServer({ name: "changing", transport: stdioServer(after, "b") })).outcome).toBe("saved");
    await waitFor(() => old.every((pid) => !alive(pid)) || undefined, { timeoutMs: 10_000, describe: `the old config's processes ${old.join(", ")} to end` });
    expect(pidsIn(after)).toEqual([]);

    await openOnBothNodes("changing");
    const fresh = pidsIn(after);
    expect(fresh).toHaveLength(2);
    expect(fresh.every(alive)).toBe(true);
    expect(pidsIn(before)).toEqual(old);
  });
});

/** A stateful 2025-11-25 server in this process: it counts its open GET streams and the sessions ended by their client. */
async function statefulServer(): Promise<{ url: string; http: Server; streams: Set<IncomingMessage>; ended: string[] }> {
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const streams = new Set<IncomingMessage>();
  const ended: string[] = [];
  const http = createServer((req, res) => {
    void (async () => {
      const id = req.headers["mcp-session-id"];
      let transport = typeof id === "string" ? sessions.get(id) : undefined;
      if (!transport) {
        if (req.method !== "POST" || id !== undefined) return void res.writeHead(404).end();
        const created = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (sid) => void sessions.set(sid, created),
          onsessionclosed: (sid) => {
            sessions.delete(sid);
            ended.push(sid);
          },
        });
        const mcp = new McpServer({ name: "stateful", version: "1.0.0" });
        mcp.registerTool("ping", { description: "Answers pong." }, () => ({ content: [{ type: "text" as const, text: "pong" }] }));
        await mcp.connect(created);
        transport = created;
      }
      if (req.method === "GET") {
        streams.add(req);
        res.on("close", () => streams.delete(req));
      }
      await transport.handleRequest(req, res);
    })().catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  const addr = http.address();
  return { url: `http://127.0.0.1:${typeof addr === "object" && addr ? addr.port : 0}/mcp`, http, streams, ended };
}

describe("an HTTP tool server", () => {
  it("deleted: every node ends its session and closes its streams, so the server stops without waiting on them", async () => {
    const server = await statefulServer();
    try {
      expect((await world.client.putToolServer({ name: "web", transport: { type: "http", url: server.url } })).outcome).toBe("saved");
      await openOnBothNodes("web");
      // Each session's client opens its standing GET stream once initialized.
      await waitFor(() => server.streams.size === 2 || undefined, { timeoutMs: 10_000, describe: "both sessions' GET streams" });

      expect((await world.client.deleteToolServer("web")).outcome).toBe("deleted");
      await waitFor(() => (server.streams.size === 0 && server.ended.length === 2) || undefined, {
        timeoutMs: 10_000,
        describe: "both sessions to be ended and their streams closed",
      });
      // Stopping waits for open connections: it ends now, with nothing closed by force.
      let timer: NodeJS.Timeout | undefined;
      const stopped = await Promise.race([
        new Promise<boolean>((resolve) => server.http.close(() => resolve(true))),
        new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), 5_000))),
      ]);
      clearTimeout(timer);
      expect(stopped).toBe(true);
    } finally {
      server.http.closeAllConnections();
      server.http.close();
    }
  });

  it("2026-07-28, deleted during a call: the call in flight is stopped (its outcome unknown) and the server stops without waiting on it", async () => {
    let calls = 0;
    let open = 0;
    const http = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { id: number; method: string };
        const answer = (result: object) =>
          res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id: body.id, result }));
        if (body.method === "server/discover") return answer({ resultType: "complete", supportedVersions: ["2026-07-28"], capabilities: {} });
        if (body.method === "tools/list") return answer({ resultType: "complete", tools: [{ name: "hang", inputSchema: { type: "object" } }] });
        // tools/call: never answered.
        calls++;
        open++;
        res.on("close", () => open--);
      });
    });
    await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
    const addr = http.address();
    const url = `http://127.0.0.1:${typeof addr === "object" && addr ? addr.port : 0}/mcp`;
    try {
      expect((await world.client.putToolServer({ name: "modern", protocol: "2026-07-28", transport: { type: "http", url } })).outcome).toBe("saved");
      const calling = otherGateway.call({
        tenant: "t1",
        server: "modern",
        tool: "hang",
        arguments: {},
        key: "k-hang",
        timeoutMs: 60_000,
        signal: new AbortController().signal,
        allowTask: false,
      });
      await waitFor(() => open === 1 || undefined, { timeoutMs: 10_000, describe: "the call to reach the server" });

      expect((await world.client.deleteToolServer("modern")).outcome).toBe("deleted");
      let timer: NodeJS.Timeout | undefined;
      const outcome = await Promise.race([calling, new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), 10_000)))]);
      clearTimeout(timer);
      expect(outcome).toMatchObject({ outcome: "unknown", code: "tool_server_unavailable" });
      await waitFor(() => open === 0 || undefined, { timeoutMs: 10_000, describe: "the call's request to be closed" });
      const stopped = await Promise.race([
        new Promise<boolean>((resolve) => http.close(() => resolve(true))),
        new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), 5_000))),
      ]);
      clearTimeout(timer);
      expect(stopped).toBe(true);
      expect(calls).toBe(1);
    } finally {
      http.closeAllConnections();
      http.close();
    }
  });
});
