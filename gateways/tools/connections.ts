import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CreateMessageResult, Tool } from "@modelcontextprotocol/sdk/types.js";
import { toolServerKey, type ToolServerRecord } from "./registry.js";
import { ModernMcpClient } from "./mcp-2026.js";
import { ModernMcpVersionError } from "./mcp-2026-types.js";
import { loadedMcpSdk, mcpSdk } from "./sdk.js";

/** The revision the SDK's client speaks (its `initialize` handshake). */
const LEGACY_PROTOCOL = "2025-11-25";

/** How long connecting (spawn or HTTP, plus the handshake and the tool list) may take. */
const CONNECT_TIMEOUT_MS = 15_000;

/** A tool as a server listed it (either revision). */
export type ListedTool = Pick<Tool, "name" | "description" | "inputSchema" | "annotations"> & { execution?: { taskSupport?: string } };

/** A live session with one registered server (an SDK session, or a stateless 2026-07-28 client) and the tools it listed. */
export type Connection = {
  tools: Map<string, ListedTool>;
  /** The registry record it was opened with (a changed record opens a new one). */
  updatedAt: number;
  closed: boolean;
} & ({ wire: "2025-11-25"; client: Client; tasks: boolean } | { wire: "2026-07-28"; client: ModernMcpClient; tasks: boolean });

/** A 2025-11-25 session (the SDK's client). */
export type LegacyConnection = Extract<Connection, { wire: "2025-11-25" }>;

/** Answers a server's `sampling/createMessage` params on a call's own session (throws an `McpError` to refuse). */
export type Sampler = (params: unknown) => Promise<CreateMessageResult>;

/**
 * MCP client sessions, one per (tenant, server) per node, opened on first use; a session whose
 * transport closes leaves the pool, so a crashed stdio server restarts on its next call. A 2025-11-25
 * server's `elicitation/create` and `sampling/createMessage` are refused: the SDK does not say which
 * call asks, so no run's person or budget could answer it.
 */
export class ToolConnections {
  private readonly open = new Map<string, Promise<Connection>>();

  constructor(private readonly clientInfo = { name: "runway-tool-gateway", version: "0.2.0" }) {}

  get(record: ToolServerRecord): Promise<Connection> {
    const key = toolServerKey(record.tenant, record.spec.name);
    const existing = this.open.get(key);
    if (existing) {
      return existing.then(
        (c) => (c.closed || c.updatedAt !== record.updated_at ? this.replace(key, record, c) : c),
        () => this.replace(key, record, undefined),
      );
    }
    return this.start(key, record);
  }

  private replace(key: string, record: ToolServerRecord, old: Connection | undefined): Promise<Connection> {
    if (old && !old.closed) void closeSession(old);
    return this.start(key, record);
  }

  /**
   * The registry learnt that a server changed or was deleted: a session opened with another
   * record is closed now (see `closeSession`), not when the next call finds it stale or the node
   * stops. Calls in flight on it fail as to a server that went away; the next call opens a
   * session with the new record.
   */
  forget(key: string, record: ToolServerRecord | null): void {
    const opening = this.open.get(key);
    if (!opening) return;
    void opening.then(
      (c) => {
        if (c.closed || (record && c.updatedAt === record.updated_at)) return;
        if (this.open.get(key) === opening) this.open.delete(key);
        return closeSession(c);
      },
      () => undefined,
    );
  }

  private start(key: string, record: ToolServerRecord): Promise<Connection> {
    const opening = this.connect(record);
    this.open.set(key, opening);
    opening.then(
      (c) => {
        if (c.wire !== "2025-11-25") return;
        c.client.onclose = () => {
          c.closed = true;
          if (this.open.get(key) === opening) this.open.delete(key);
        };
      },
      () => {
        if (this.open.get(key) === opening) this.open.delete(key);
      },
    );
    return opening;
  }

  /** Drops a session (a call through it timed out: it may be wedged). */
  discard(record: ToolServerRecord): void {
    const key = toolServerKey(record.tenant, record.spec.name);
    const opening = this.open.get(key);
    this.open.delete(key);
    // A stateless 2026-07-28 client has no session to wedge: its other calls go on.
    void opening?.then((c) => (c.wire === "2025-11-25" ? closeSession(c) : undefined)).catch(() => undefined);
  }

  /**
   * A server registered as 2026-07-28 that offers, when refused, only 2025-11-25 is reached with
   * the SDK's client on 2025-11-25; one that offers neither fails with a {@link ModernMcpVersionError}
   * naming what each side speaks.
   */
  private async connect(record: ToolServerRecord): Promise<Connection> {
    const t = record.spec.transport;
    if (record.spec.protocol !== "2026-07-28" || t.type !== "http") return this.connectSdk(record);
    try {
      return await this.connectModern(record, t.url, { ...t.secret_headers });
    } catch (err) {
      if (!(err instanceof ModernMcpVersionError)) throw err;
      if (!err.supported.includes(LEGACY_PROTOCOL)) throw new ModernMcpVersionError(err.url, err.requested, err.supported, [...err.speaks, LEGACY_PROTOCOL]);
    }
    return this.connectSdk(record);
  }

  private async connectModern(record: ToolServerRecord, url: string, headers: Record<string, string>): Promise<Connection> {
    // Stateless: nothing to open or close, only what it serves to learn.
    const client = new ModernMcpClient(url, { headers, clientInfo: this.clientInfo });
    const discovered = await client.discover({ timeoutMs: CONNECT_TIMEOUT_MS });
    const tools = new Map<string, ListedTool>();
    for (const tool of await client.listTools({ timeoutMs: CONNECT_TIMEOUT_MS })) tools.set(tool.name, tool as ListedTool);
    return { wire: "2026-07-28", client, tools, tasks: discovered.tasks, updatedAt: record.updated_at, closed: false };
  }

  /**
   * A 2025-11-25 session for one call alone, never pooled: a server with a sampling policy. The SDK
   * does not say which call a server's request belongs to, but on this session there is only one,
   * so `onSample` answers its `sampling/createMessage` (a thrown `McpError` refuses it). The
   * caller ends it with {@link release} when the call has answered.
   */
  dedicated(record: ToolServerRecord, onSample: Sampler): Promise<LegacyConnection> {
    return this.connectSdk(record, onSample);
  }

  /** Ends a session of {@link dedicated} (its stdio server's process, or its HTTP session). */
  release(c: LegacyConnection): Promise<void> {
    return closeSession(c);
  }

  private async connectSdk(record: ToolServerRecord, onSample?: Sampler): Promise<LegacyConnection> {
    const { Client, CreateMessageRequestSchema, ElicitRequestSchema, ErrorCode, McpError, StdioClientTransport, StreamableHTTPClientTransport } =
      await mcpSdk();
    const client = new Client(this.clientInfo, { capabilities: { elicitation: {}, sampling: {} } });
    client.setRequestHandler(ElicitRequestSchema, () => {
      throw new McpError(
        ErrorCode.InvalidRequest,
        "Runway does not route elicitation/create on a shared MCP 2025-11-25 session to a person (a 2026-07-28 server asks with input_required, which is): the request is refused",
      );
    });
    client.setRequestHandler(CreateMessageRequestSchema, (request) => {
      if (onSample) return onSample(request.params);
      throw new McpError(
        ErrorCode.InvalidRequest,
        "Runway does not route sampling/createMessage on a shared MCP 2025-11-25 session to a model (it cannot tell which call asks): register the server with a sampling policy, whose calls each get a session of their own; the request is refused",
      );
    });
    const t = record.spec.transport;
    const transport =
      t.type === "stdio"
        ? new StdioClientTransport({
            command: t.command,
            args: t.args,
            env: { ...inheritedEnv(), ...t.env, ...t.secret_env },
            stderr: "ignore",
          })
        : new StreamableHTTPClientTransport(new URL(t.url), { requestInit: { headers: { ...t.secret_headers } } });
    const timer = AbortSignal.timeout(CONNECT_TIMEOUT_MS);
    try {
      await client.connect(transport, { timeout: CONNECT_TIMEOUT_MS, signal: timer });
      const tools = new Map<string, ListedTool>();
      let cursor: string | undefined;
      do {
        const page = await client.listTools(cursor ? { cursor } : {}, { timeout: CONNECT_TIMEOUT_MS, signal: timer });
        for (const tool of page.tools) tools.set(tool.name, tool);
        cursor = page.nextCursor;
      } while (cursor);
      const tasks = !!client.getServerCapabilities()?.tasks?.requests?.tools?.call;
      return { wire: "2025-11-25", client, tools, tasks, updatedAt: record.updated_at, closed: false };
    } catch (err) {
      await client.close().catch(() => undefined);
      throw err;
    }
  }

  async close(): Promise<void> {
    const all = [...this.open.values()];
    this.open.clear();
    await Promise.all(all.map((p) => p.then((c) => (c.wire === "2025-11-25" ? closeSession(c) : undefined)).catch(() => undefined)));
  }
}

/** How long ending an HTTP session (its DELETE) may hold up closing it. */
const END_SESSION_TIMEOUT_MS = 2_000;

/**
 * Closes a session: a stdio server's process is ended (the SDK closes its stdin, then signals
 * it); an HTTP session is ended at the server (DELETE, best effort and bounded) and its streams
 * closed. A stateless 2026-07-28 client has no session: its requests in flight are stopped.
 */
async function closeSession(c: Connection): Promise<void> {
  c.closed = true;
  if (c.wire !== "2025-11-25") return c.client.close();
  const transport = c.client.transport;
  const sdk = loadedMcpSdk();
  if (sdk && transport instanceof sdk.StreamableHTTPClientTransport && transport.sessionId !== undefined) {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([transport.terminateSession().catch(() => undefined), new Promise((resolve) => (timer = setTimeout(resolve, END_SESSION_TIMEOUT_MS)))]);
    clearTimeout(timer);
  }
  await c.client.close().catch(() => undefined);
}

/** What a spawned stdio server inherits: the basics a program needs, not the node's own secrets. */
function inheritedEnv(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of ["PATH", "HOME", "LANG", "TMPDIR", "SystemRoot"]) {
    const v = process.env[name];
    if (v !== undefined) out[name] = v;
  }
  return out;
}
