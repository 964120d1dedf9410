import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { EFFECT_KEY_META, type ToolCallOutcome, type ToolCallRequest, type ToolLookup, type ToolPort } from "../../actors/index.js";
import { effectiveClass, type ClassSource, type ToolClass } from "../../machines/index.js";
import type { ToolConnections } from "./connections.js";
import type { ToolRegistry, ToolServerRecord } from "./registry.js";

/** One tool as `tools.list` shows it. */
export interface ToolListing {
  server: string;
  name: string;
  description?: string;
  class: ToolClass;
  class_source: ClassSource;
  annotations?: Record<string, unknown>;
  input_schema?: unknown;
}

export type ToolsListResult = { outcome: "tools"; tools: ToolListing[]; unavailable: { server: string; code: string; message: string }[] };

/**
 * The MCP tool gateway: tenant-registered servers reached through pooled sessions. Every call
 * carries its effect key in `_meta` (so a server can deduplicate) and is bounded by the server's
 * call timeout and the step's; how it failed is told apart by what the world may have seen
 * (`ToolCallOutcome`: refused — nothing happened — or unknown).
 */
export class ToolGateway implements ToolPort {
  constructor(
    private readonly registry: ToolRegistry,
    private readonly connections: ToolConnections,
  ) {}

  async lookup(tenant: string, server: string, tool: string): Promise<ToolLookup> {
    const record = await this.registry.get(tenant, server);
    if (!record) return { outcome: "server_not_found", message: `no tool server named '${server}' is registered` };
    let tools;
    try {
      tools = (await this.connections.get(record)).tools;
    } catch (err) {
      return { outcome: "unavailable", code: "tool_server_unavailable", message: `${server}: ${describe(err)}` };
    }
    const found = tools.get(tool);
    if (!found) return { outcome: "tool_not_found", message: `server '${server}' has no tool named '${tool}'` };
    return { outcome: "found", class: effectiveClass(found.annotations, record.spec, tool).class };
  }

  async call(req: ToolCallRequest): Promise<ToolCallOutcome> {
    const record = await this.registry.get(req.tenant, req.server);
    if (!record) return { outcome: "refused", code: "tool_server_not_found", message: `no tool server named '${req.server}' is registered`, retryable: false };
    let connection;
    try {
      connection = await this.connections.get(record);
    } catch (err) {
      return { outcome: "refused", code: "tool_server_unavailable", message: `${req.server}: ${describe(err)}`, retryable: true };
    }
    const timeout = Math.min(req.timeoutMs, record.spec.call_timeout_ms);
    try {
      const result = await connection.client.callTool(
        { name: req.tool, arguments: (req.arguments ?? {}) as Record<string, unknown>, _meta: { [EFFECT_KEY_META]: req.key } },
        undefined,
        { timeout, signal: req.signal },
      );
      return { outcome: "ok", result: result as Extract<ToolCallOutcome, { outcome: "ok" }>["result"], bytes: Buffer.byteLength(JSON.stringify(result)) };
    } catch (err) {
      return this.failure(record, err, req, timeout);
    }
  }

  private failure(record: ToolServerRecord, err: unknown, req: ToolCallRequest, timeout: number): ToolCallOutcome {
    const where = `${req.server}/${req.tool}`;
    if (req.signal.aborted) return { outcome: "unknown", code: "tool_call_aborted", message: `${where}: the attempt was stopped during the call` };
    if (err instanceof McpError && err.code === ErrorCode.RequestTimeout) {
      // A session that let a request hang may be wedged: the next call opens a new one.
      this.connections.discard(record);
      return { outcome: "unknown", code: "tool_timeout", message: `${where} did not answer within ${timeout} ms` };
    }
    if (err instanceof McpError && err.code === ErrorCode.ConnectionClosed)
      return { outcome: "unknown", code: "tool_server_crashed", message: `${where}: the server closed the connection during the call` };
    if (err instanceof McpError) {
      // The server answered the request with a JSON-RPC error: it did not run the tool.
      const retryable = err.code === ErrorCode.InternalError;
      return { outcome: "refused", code: "tool_call_refused", message: `${where}: ${err.message}`.slice(0, 4_096), retryable };
    }
    return { outcome: "unknown", code: "tool_server_unavailable", message: `${where}: ${describe(err)}`.slice(0, 4_096) };
  }

  /** Every tool of the tenant's servers with its effective class; a server that cannot be reached is listed apart. */
  async list(tenant: string, server?: string): Promise<ToolsListResult> {
    const records = server ? [await this.registry.get(tenant, server)].filter((r): r is ToolServerRecord => !!r) : await this.registry.list(tenant);
    const tools: ToolListing[] = [];
    const unavailable: ToolsListResult["unavailable"] = [];
    for (const record of records) {
      try {
        const connection = await this.connections.get(record);
        for (const t of connection.tools.values()) {
          const c = effectiveClass(t.annotations, record.spec, t.name);
          tools.push({
            server: record.spec.name,
            name: t.name,
            ...(t.description ? { description: t.description } : {}),
            class: c.class,
            class_source: c.source,
            ...(t.annotations ? { annotations: t.annotations as Record<string, unknown> } : {}),
            input_schema: t.inputSchema,
          });
        }
      } catch (err) {
        unavailable.push({ server: record.spec.name, code: "tool_server_unavailable", message: describe(err) });
      }
    }
    return { outcome: "tools", tools, unavailable };
  }
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
