import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CreateMessageRequestSchema, ElicitRequestSchema, ErrorCode, McpError, type Tool } from "@modelcontextprotocol/sdk/types.js";
import type { ToolServerRecord } from "./registry.js";

/** How long connecting (spawn or HTTP, plus the handshake and the tool list) may take. */
const CONNECT_TIMEOUT_MS = 15_000;

/** A live MCP session with one registered server, and the tools it listed. */
export interface Connection {
  client: Client;
  tools: Map<string, Tool>;
  /** The registry record it was opened with (a changed record opens a new one). */
  updatedAt: number;
  closed: boolean;
}

/**
 * MCP client sessions, pooled per node: one per (tenant, server), opened on first use and
 * reused. A session whose transport closes (the server died, the HTTP endpoint went away) leaves
 * the pool, so the next call opens a new one: a crashed stdio server is restarted by its next
 * call. Opening is bounded in time.
 *
 * Requests a server makes of us are refused with a clear MCP error until the approvals and
 * model-gateway work routes them: `elicitation/create` (a person's input) and
 * `sampling/createMessage` (a model call under the run's budget).
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
    if (old && !old.closed) void old.client.close().catch(() => undefined);
    return this.start(key, record);
  }

  private start(key: string, record: ToolServerRecord): Promise<Connection> {
    const opening = this.connect(record);
    this.open.set(key, opening);
    opening.then(
      (c) => {
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
    void opening?.then((c) => c.client.close()).catch(() => undefined);
  }

  private async connect(record: ToolServerRecord): Promise<Connection> {
    const client = new Client(this.clientInfo, { capabilities: { elicitation: {}, sampling: {} } });
    client.setRequestHandler(ElicitRequestSchema, () => {
      throw new McpError(ErrorCode.InvalidRequest, "Runway does not route elicitation to a person yet: the request is refused");
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
      const tools = new Map<string, Tool>();
      let cursor: string | undefined;
      do {
        const page = await client.listTools(cursor ? { cursor } : {}, { timeout: CONNECT_TIMEOUT_MS, signal: timer });
        for (const tool of page.tools) tools.set(tool.name, tool);
        cursor = page.nextCursor;
      } while (cursor);
      return { client, tools, updatedAt: record.updated_at, closed: false };
    } catch (err) {
      await client.close().catch(() => undefined);
      throw err;
    }
  }

  async close(): Promise<void> {
    const all = [...this.open.values()];
    this.open.clear();
    await Promise.all(all.map((p) => p.then((c) => c.client.close()).catch(() => undefined)));
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
