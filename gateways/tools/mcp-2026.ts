// A client for MCP 2026-07-28 (stateless, Streamable HTTP) and its Tasks extension, on fetch: the
// SDK's 1.x line stops at 2025-11-25. Every request is one POST carrying the version and
// capabilities in `params._meta`; a server's questions come back as MRTR `input_required`. Not
// implemented: tasks/update, subscriptions/listen, notifications/tasks, result caching.

import { encodeHeaderValue, isObject, paramHeadersOf, readResponse, sameHeaders, type JsonObject, type ParamHeader } from "./mcp-2026-http.js";
import {
  MODERN_PROTOCOL,
  MODERN_PROTOCOLS,
  ModernMcpError,
  ModernMcpHttpError,
  ModernMcpVersionError,
  supportedVersionsOf,
  TASKS_EXTENSION,
  type ModernCallResult,
  type ModernInputRequest,
  type ModernInputAnswers,
  type ModernMcpClientOptions,
  type ModernRequestOptions,
  type ModernTaskState,
  type ModernTool,
  type ToolResult,
} from "./mcp-2026-types.js";

const META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion";
const META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities";
const META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo";

/** Used when the caller gives no timeout. */
const DEFAULT_TIMEOUT_MS = 60_000;
/** A tools/list that pages on past this many pages is refused (a server looping on cursors). */
const MAX_LIST_PAGES = 1000;

export class ModernMcpClient {
  private nextId = 1;
  /** The revision every request declares: the preferred one, until `discover` settles on another. */
  private version = MODERN_PROTOCOLS[0] ?? MODERN_PROTOCOL;
  private readonly headers: Record<string, string>;
  private readonly clientInfo: { name: string; version: string };
  private readonly declareTasks: boolean;
  /** `x-mcp-header` annotations per tool, from the last tools/list of this instance. */
  private readonly paramHeaders = new Map<string, ParamHeader[]>();
  /** Aborted by `close`: the requests in flight stop and no more are sent. */
  private readonly closing = new AbortController();

  constructor(
    readonly url: string,
    options: ModernMcpClientOptions = {},
  ) {
    this.headers = { ...(options.headers ?? {}) };
    this.clientInfo = options.clientInfo ?? { name: "runway", version: "0.1.0" };
    this.declareTasks = options.declareTasks ?? true;
  }

  /** Stops the requests in flight (their connections close) and refuses any more. */
  close(): void {
    this.closing.abort();
  }

  /** The protocol revision this client's requests declare. */
  get protocolVersion(): string {
    return this.version;
  }

  /**
   * server/discover: protocol versions, capabilities (extensions), server info. A server that
   * refuses the version (-32022) is asked once more with a version of its `supported` list this
   * client speaks (the spec's SHOULD), which later requests then declare; with none in common, or
   * refused again, it throws {@link ModernMcpVersionError}.
   */
  async discover(opts: ModernRequestOptions = {}): Promise<{ protocolVersions: string[]; tasks: boolean; raw: unknown }> {
    let result: JsonObject;
    try {
      result = await this.request("server/discover", {}, undefined, opts);
    } catch (err) {
      const supported = supportedVersionsOf(err);
      if (supported === undefined) throw err;
      const version = MODERN_PROTOCOLS.find((v) => supported.includes(v));
      if (version === undefined) throw new ModernMcpVersionError(this.url, this.version, supported, MODERN_PROTOCOLS);
      this.version = version;
      try {
        result = await this.request("server/discover", {}, undefined, opts);
      } catch (again) {
        const still = supportedVersionsOf(again);
        if (still === undefined) throw again;
        throw new ModernMcpVersionError(this.url, version, still, MODERN_PROTOCOLS);
      }
    }
    // The spec field is `supportedVersions` (schema.ts DiscoverResult); `protocolVersions` is
    // accepted too in case a server follows older drafts.
    const versions = Array.isArray(result.supportedVersions) ? result.supportedVersions : Array.isArray(result.protocolVersions) ? result.protocolVersions : [];
    const capabilities = isObject(result.capabilities) ? result.capabilities : {};
    const extensions = isObject(capabilities.extensions) ? capabilities.extensions : {};
    return {
      protocolVersions: versions.filter((v): v is string => typeof v === "string"),
      tasks: isObject(extensions[TASKS_EXTENSION]),
      raw: result,
    };
  }

  /** tools/list, following nextCursor. Tools with an invalid `x-mcp-header` annotation are left
   *  out, as the Streamable HTTP spec requires of clients. */
  async listTools(opts: ModernRequestOptions = {}): Promise<ModernTool[]> {
    const tools: ModernTool[] = [];
    const headers = new Map<string, ParamHeader[]>();
    const seen = new Set<string>();
    let cursor: string | undefined;
    for (let page = 0; ; page++) {
      if (page >= MAX_LIST_PAGES) throw new Error(`MCP tools/list: more than ${MAX_LIST_PAGES} pages`);
      const result = await this.request("tools/list", cursor === undefined ? {} : { cursor }, undefined, opts);
      if (!Array.isArray(result.tools)) throw new Error("MCP tools/list: result has no tools array");
      for (const raw of result.tools) {
        if (!isObject(raw) || typeof raw.name !== "string") continue;
        const params = paramHeadersOf(raw.inputSchema);
        if (typeof params === "string") {
          process.emitWarning(`MCP tool ${raw.name} at ${this.url} left out: ${params}`, "ModernMcpWarning");
          continue;
        }
        headers.set(raw.name, params);
        const tool: ModernTool = { name: raw.name };
        if (typeof raw.description === "string") tool.description = raw.description;
        if (raw.inputSchema !== undefined) tool.inputSchema = raw.inputSchema;
        if (isObject(raw.annotations)) tool.annotations = raw.annotations;
        tools.push(tool);
      }
      const next = result.nextCursor;
      if (typeof next !== "string" || next === "") break;
      if (seen.has(next)) throw new Error("MCP tools/list: the server repeated a cursor");
      seen.add(next);
      cursor = next;
    }
    this.paramHeaders.clear();
    for (const [name, params] of headers) this.paramHeaders.set(name, params);
    return tools;
  }

  /**
   * tools/call. `meta` is merged into `params._meta` (the protocol's keys win); the server may answer
   * with a task if the tasks extension is declared. A HeaderMismatch (-32020), refused before the
   * tool runs, refetches the tool list and retries once if that changes the `Mcp-Param-*` headers.
   */
  async callTool(
    name: string,
    args: unknown,
    meta: Record<string, unknown>,
    opts: ModernRequestOptions = {},
    answers?: ModernInputAnswers,
  ): Promise<ModernCallResult> {
    const params: JsonObject = { name };
    if (args !== undefined) params.arguments = args;
    if (answers) {
      params.inputResponses = answers.inputResponses as JsonObject;
      if (answers.requestState !== undefined) params.requestState = answers.requestState;
    }
    const sent = this.toolHeaders(name, args);
    let result: JsonObject;
    try {
      result = await this.request("tools/call", params, meta, opts, name, sent);
    } catch (err) {
      if (!(err instanceof ModernMcpError) || err.code !== -32020) throw err;
      await this.listTools(opts).catch(() => {
        throw err;
      });
      const again = this.toolHeaders(name, args);
      if (sameHeaders(sent, again)) throw err;
      result = await this.request("tools/call", params, meta, opts, name, again);
    }
    if (result.resultType === "task") {
      if (typeof result.taskId !== "string" || result.taskId === "") throw new Error("MCP tools/call: task result without a taskId");
      if (typeof result.status !== "string") throw new Error("MCP tools/call: task result without a status");
      const task: ModernCallResult = { kind: "task", taskId: result.taskId, status: result.status };
      if (typeof result.pollIntervalMs === "number") task.pollIntervalMs = result.pollIntervalMs;
      if (typeof result.ttlMs === "number" || result.ttlMs === null) task.ttlMs = result.ttlMs;
      return task;
    }
    if (result.resultType === "input_required") {
      const requests = isObject(result.inputRequests) ? result.inputRequests : {};
      const inputRequests: Record<string, ModernInputRequest> = {};
      for (const [key, r] of Object.entries(requests))
        if (isObject(r) && typeof r.method === "string") inputRequests[key] = { method: r.method, ...(isObject(r.params) ? { params: r.params } : {}) };
      if (Object.keys(inputRequests).length === 0) throw new Error("MCP tools/call: input_required without input requests");
      return { kind: "input_required", inputRequests, ...(typeof result.requestState === "string" ? { requestState: result.requestState } : {}) };
    }
    return { kind: "result", result: result as ToolResult };
  }

  /** tasks/get: the task's DetailedTask, reduced to its status and payload. */
  async getTask(taskId: string, opts: ModernRequestOptions = {}): Promise<ModernTaskState> {
    const task = await this.request("tasks/get", { taskId }, undefined, opts, taskId);
    switch (task.status) {
      case "working":
      case "input_required": {
        const state: ModernTaskState = { status: task.status };
        if (typeof task.pollIntervalMs === "number") state.pollIntervalMs = task.pollIntervalMs;
        if (typeof task.statusMessage === "string") state.statusMessage = task.statusMessage;
        return state;
      }
      case "completed":
        if (!isObject(task.result)) throw new Error(`MCP tasks/get: completed task ${taskId} has no result`);
        return { status: "completed", result: task.result as ToolResult };
      case "failed": {
        const error = isObject(task.error) ? task.error : {};
        const fallback = typeof task.statusMessage === "string" ? task.statusMessage : "task failed";
        return {
          status: "failed",
          error: { code: typeof error.code === "number" ? error.code : -32603, message: typeof error.message === "string" ? error.message : fallback },
        };
      }
      case "cancelled":
        return { status: "cancelled" };
      default:
        throw new Error(`MCP tasks/get: task ${taskId} has an unknown status ${JSON.stringify(task.status)}`);
    }
  }

  /** tasks/cancel: an acknowledgement only; cancellation is cooperative and eventually consistent. */
  async cancelTask(taskId: string, opts: ModernRequestOptions = {}): Promise<void> {
    await this.request("tasks/cancel", { taskId }, undefined, opts, taskId);
  }

  // ---- transport ---------------------------------------------------------------------------------

  private toolHeaders(name: string, args: unknown): Record<string, string> {
    const out: Record<string, string> = {};
    for (const { path, name: header } of this.paramHeaders.get(name) ?? []) {
      let value: unknown = args;
      for (const key of path) value = isObject(value) ? value[key] : undefined;
      let text: string | undefined;
      if (typeof value === "string") text = value;
      else if (typeof value === "boolean") text = String(value);
      else if (typeof value === "number" && Number.isSafeInteger(value)) text = String(value);
      if (text !== undefined) out[`Mcp-Param-${header}`] = encodeHeaderValue(text);
    }
    return out;
  }

  /** One JSON-RPC request; resolves with its result object or throws. */
  private async request(
    method: string,
    params: JsonObject,
    meta: Record<string, unknown> | undefined,
    opts: ModernRequestOptions,
    mcpName?: string,
    extraHeaders: Record<string, string> = {},
  ): Promise<JsonObject> {
    const id = this.nextId++;
    // Form elicitation is answered by a person through the run's inbox (MRTR); sampling and roots are not offered.
    const capabilities: JsonObject = { elicitation: { form: {} }, ...(this.declareTasks ? { extensions: { [TASKS_EXTENSION]: {} } } : {}) };
    const body = {
      jsonrpc: "2.0",
      id,
      method,
      params: {
        ...params,
        _meta: {
          ...(meta ?? {}),
          [META_PROTOCOL_VERSION]: this.version,
          [META_CLIENT_CAPABILITIES]: capabilities,
          [META_CLIENT_INFO]: this.clientInfo,
        },
      },
    };
    const headers: Record<string, string> = {
      ...this.headers,
      ...extraHeaders,
      "Content-Type": "application/json",
      Accept: "application/json, text/event-stream",
      "MCP-Protocol-Version": this.version,
      "Mcp-Method": method,
    };
    if (mcpName !== undefined) headers["Mcp-Name"] = encodeHeaderValue(mcpName);

    const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = AbortSignal.any(opts.signal ? [timeout, this.closing.signal, opts.signal] : [timeout, this.closing.signal]);
    try {
      if (this.closing.signal.aborted) throw new Error(`MCP ${method} to ${this.url}: the client was closed`);
      const res = await fetch(this.url, { method: "POST", headers, body: JSON.stringify(body), signal });
      const message = await readResponse(res, id, method);
      if (message === undefined) {
        throw new ModernMcpHttpError(res.status, `MCP ${method}: HTTP ${res.status} without a JSON-RPC response`);
      }
      if (isObject(message.error)) {
        const e = message.error;
        throw new ModernMcpError(typeof e.code === "number" ? e.code : -32603, typeof e.message === "string" ? e.message : "error", e.data);
      }
      if (!res.ok) throw new ModernMcpHttpError(res.status, `MCP ${method}: HTTP ${res.status}`);
      if (!isObject(message.result)) throw new Error(`MCP ${method}: response has neither result nor error`);
      const result = message.result;
      if (result.resultType === "input_required" && method !== "tools/call")
        throw new ModernMcpError(-32603, `MCP ${method}: input_required is only answered for tools/call here`, result);
      if (result.resultType === "task" && method !== "tools/call") throw new Error(`MCP ${method}: a task result is not valid for this method`);
      return result;
    } catch (err) {
      if (timeout.aborted && !opts.signal?.aborted) {
        const timedOut = new Error(`MCP ${method} to ${this.url} timed out after ${timeoutMs} ms`, { cause: err });
        timedOut.name = "TimeoutError";
        throw timedOut;
      }
      if (opts.signal?.aborted && err !== opts.signal.reason) throw opts.signal.reason ?? err;
      if (this.closing.signal.aborted) throw new Error(`MCP ${method} to ${this.url}: the client was closed during the request`, { cause: err });
      throw err;
    }
  }
}

/** True when the server at url answers server/discover with 2026-07-28 (false on any HTTP/JSON-RPC failure). */
export async function speaksModern(url: string, headers?: Record<string, string>, timeoutMs = 10_000): Promise<boolean> {
  try {
    const found = await new ModernMcpClient(url, headers ? { headers } : {}).discover({ timeoutMs });
    return found.protocolVersions.includes(MODERN_PROTOCOL);
  } catch {
    return false;
  }
}
