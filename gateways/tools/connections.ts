import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import type { ToolServerRecord } from "./registry.js";
import { ModernMcpClient } from "./mcp-2026.js";
import { mcpSdk } from "./sdk.js";

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

/**
 * MCP client sessions, pooled per node: one per (tenant, server), opened on first use and
 * reused. A session whose transport closes (the server died, the HTTP endpoint went away) leaves
 * the pool, so the next call opens a new one: a crashed stdio server is restarted by its next
 * call. Opening is bounded in time.
 *
 * Requests a 2025-11-25 server makes of us on its shared session are refused with a clear MCP
 * error: `elicitation/create` (the SDK does not tell which of the session's calls asks, so no
 * run's person can be asked; a 2026-07-28 server asks with `input_required`, which reaches the
 * run's inbox) and `sampling/createMessage` (a model call under the run's budget, with the model
 * gateway).
 */
export class ToolConnections {
  private readonly open = new Map<string, Promise<Connection>>();

  constructor(private readonly clientInfo = { name: "runway-tool-gateway", version: "0.2.0" }) {}

  get(record: ToolServerRecord): Promise<Connection> {
    const key = `${record.tenant}.${record.spec.name}`;
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
    if (old && !old.closed && old.wire === "2025-11-25") void old.client.close().catch(() => undefined);
    return this.start(key, record);
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
    const key = `${record.tenant}.${record.spec.name}`;
    const opening = this.open.get(key);
    this.open.delete(key);
    void opening?.then((c) => (c.wire === "2025-11-25" ? c.client.close() : undefined)).catch(() => undefined);
  }

  private async connect(record: ToolServerRecord): Promise<Connection> {
    const t0 = record.spec.transport;
    if (record.spec.protocol === "2026-07-28" && t0.type === "http") {
      // Stateless: nothing to open or close, only what it serves to learn.
      const client = new ModernMcpClient(t0.url, { headers: { ...t0.secret_headers }, clientInfo: this.clientInfo });
      const discovered = await client.discover({ timeoutMs: CONNECT_TIMEOUT_MS });
      const tools = new Map<string, ListedTool>();
      for (const tool of await client.listTools({ timeoutMs: CONNECT_TIMEOUT_MS })) tools.set(tool.name, tool as ListedTool);
      return { wire: "2026-07-28", client, tools, tasks: discovered.tasks, updatedAt: record.updated_at, closed: false };
    }
    const { Client, CreateMessageRequestSchema, ElicitRequestSchema, ErrorCode, McpError, StdioClientTransport, StreamableHTTPClientTransport } =
      await mcpSdk();
    const client = new Client(this.clientInfo, { capabilities: { elicitation: {}, sampling: {} } });
    client.setRequestHandler(ElicitRequestSchema, () => {
      throw new McpError(
        ErrorCode.InvalidRequest,
        "Runway does not route elicitation/create on a shared MCP 2025-11-25 session to a person (a 2026-07-28 server asks with input_required, which is): the request is refused",
      );
    });
    client.setRequestHandler(CreateMessageRequestSchema, () => {
      throw new McpError(ErrorCode.InvalidRequest, "Runway does not route sampling to its model gateway yet: the request is refused");
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
    await Promise.all(all.map((p) => p.then((c) => (c.wire === "2025-11-25" ? c.client.close() : undefined)).catch(() => undefined)));
  }
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
