import {
  EFFECT_KEY_META,
  type TaskPollOutcome,
  type ToolCallOutcome,
  type ToolCallRequest,
  type ToolInputRequest,
  type ToolLookup,
  type ToolPort,
} from "../../actors/index.js";
import type { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
import type { JsonSchemaType } from "@modelcontextprotocol/sdk/validation";
import { loadedMcpSdk, mcpSdk, type McpSdk } from "./sdk.js";
import { ModernMcpError, type ModernInputRequest } from "./mcp-2026-types.js";
import { effectiveClass, type ClassSource, type ToolClass } from "../../machines/index.js";
import { jsonBytes } from "../../runtime/index.js";
import type { Connection, LegacyConnection, Sampler, ToolConnections } from "./connections.js";
import type { ToolRegistry, ToolServerRecord, ToolServerSpec } from "./registry.js";
import { checkSampling, INVALID_REQUEST } from "./sampling.js";

/**
 * The error codes a call's outcome turns on, the same numbers in both MCP revisions (JSON-RPC's
 * and the SDK's `ErrorCode`): named here so they are at hand before the SDK is loaded.
 */
const CONNECTION_CLOSED = -32000;
const REQUEST_TIMEOUT = -32001;
const INVALID_PARAMS = -32602;
const INTERNAL_ERROR = -32603;

/** How often to poll a task whose server names no interval. */
const DEFAULT_POLL_MS = 1_000;
/** How long a task may live on its server (asked of a 2025-11-25 server; the step's own timeout does not bound a task). */
const TASK_TTL_MS = 24 * 3_600_000;
/** A poll or a cancel that has not answered in this long is tried again at the next poll. */
const POLL_TIMEOUT_MS = 15_000;

function ok(result: Extract<ToolCallOutcome, { outcome: "ok" }>["result"]): ToolCallOutcome & { outcome: "ok" } {
  return { outcome: "ok", result, bytes: jsonBytes(result) };
}

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
 * A 2026-07-28 server asks for input before it answers (MRTR). A person answers form elicitations
 * (through the run's inbox: the caller must be able to wait, as a tool node can); a round of
 * sampling requests alone is answered before this (`sampleAll`); anything else — roots, a URL
 * elicitation, sampling mixed with other input — is refused, as is input for a caller that cannot wait.
 */
function inputRequired(req: ToolCallRequest, requests: Record<string, ModernInputRequest>, state: string | undefined): ToolCallOutcome {
  const refused = (code: string, message: string): ToolCallOutcome => ({ outcome: "refused", code, message, retryable: false });
  if (!req.allowInput) return refused("tool_requires_input", `${req.server}/${req.tool} asks a person for input: call it from a tool node`);
  const asked: ToolInputRequest[] = [];
  for (const [key, r] of Object.entries(requests)) {
    const p = r.params ?? {};
    const form =
      r.method === "elicitation/create" && (p.mode === undefined || p.mode === "form") && typeof p.requestedSchema === "object" && p.requestedSchema !== null;
    if (!form)
      return refused(
        "tool_input_unsupported",
        r.method === "sampling/createMessage"
          ? `${req.server}/${req.tool} asks for sampling/createMessage beside other input in one round: sampling is answered only in a round of its own`
          : `${req.server}/${req.tool} asks for ${r.method}${typeof p.mode === "string" ? ` (${p.mode})` : ""}: only form elicitation and sampling are answered`,
      );
    asked.push({ key, message: typeof p.message === "string" ? p.message.slice(0, 4_096) : "", schema: p.requestedSchema as Record<string, unknown> });
  }
  return { outcome: "input_required", requests: asked, ...(state !== undefined ? { state } : {}) };
}

/** Input rounds of sampling one call may ask for (a server that keeps asking is refused). */
const MAX_SAMPLING_ROUNDS = 8;

/** Every one of a round's input requests is a sampling request (a round that mixes kinds is refused as input Runway cannot answer). */
function isSampling(requests: Record<string, ModernInputRequest>): boolean {
  const all = Object.values(requests);
  return all.length > 0 && all.every((r) => r.method === "sampling/createMessage");
}

/**
 * Answers a round's sampling requests, in the order of their keys, each checked against the
 * server's policy and then served by the caller's sampler. The first refusal refuses the call:
 * MCP 2026-07-28 has no error answer for one input request, so the server is not called again,
 * and the call fails `tool_sampling_refused` with the MCP error (code and why) in its message.
 */
async function sampleAll(
  req: ToolCallRequest,
  spec: ToolServerSpec,
  requests: Record<string, ModernInputRequest>,
  round: number,
): Promise<{ responses: Record<string, unknown> } | ToolCallOutcome> {
  const where = `${req.server}/${req.tool}`;
  const refused = (mcp_code: number, code: string, message: string, retryable = false): ToolCallOutcome => ({
    outcome: "refused",
    code,
    message: `${where}: sampling/createMessage refused (MCP error ${mcp_code}): ${message}`.slice(0, 4_096),
    retryable,
  });
  if (!req.sample) return refused(INVALID_REQUEST, "tool_sampling_refused", "this caller has no model budget to sample with");
  const responses: Record<string, unknown> = {};
  const keys = Object.keys(requests).sort();
  for (const [index, key] of keys.entries()) {
    const checked = checkSampling(req.server, spec.sampling, requests[key]!.params, round, index);
    if (!checked.ok) return refused(checked.mcp_code, checked.code, checked.message);
    const answer = await req.sample(checked.ask);
    if (answer.outcome === "stopped") return { outcome: "refused", code: "tool_sampling_stopped", message: `${where}: ${answer.reason}`, retryable: true };
    if (answer.outcome === "refused") return refused(answer.mcp_code, answer.code, answer.message, answer.retryable === true);
    responses[key] = answer.result;
  }
  return { responses };
}

/**
 * The sampler of one call's own 2025-11-25 session: each `sampling/createMessage` the server makes
 * (the n-th of the call: its round) is checked against the server's policy and served by the
 * call's sampler; a refusal is the MCP error the server receives.
 */
function legacySampler(req: ToolCallRequest, spec: ToolServerSpec, sdk: McpSdk): Sampler {
  let round = 0;
  return async (params) => {
    const checked = checkSampling(req.server, spec.sampling, params, round++, 0);
    if (!checked.ok) throw new sdk.McpError(checked.mcp_code, checked.message);
    const answer = await req.sample!(checked.ask);
    if (answer.outcome === "ok") return answer.result;
    if (answer.outcome === "stopped") throw new sdk.McpError(INTERNAL_ERROR, `the run stopped the call (${answer.reason}): the request is refused`);
    throw new sdk.McpError(answer.mcp_code, answer.message);
  };
}

/**
 * The MCP tool gateway: tenant-registered servers reached through pooled sessions. Every call
 * carries its effect key in `_meta` (so a server can deduplicate) and is bounded by the server's
 * call timeout and the step's; how it failed is told apart by what the world may have seen
 * (`ToolCallOutcome`: refused — nothing happened — or unknown).
 */
export class ToolGateway implements ToolPort {
  private schemas: AjvJsonSchemaValidator | undefined;

  constructor(
    private readonly registry: ToolRegistry,
    private readonly connections: ToolConnections,
  ) {
    // A server changed or deleted, here or on another node: its sessions on this node close now.
    registry.onChange((key, record) => connections.forget(key, record));
  }

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
    const lookup = record.spec.lookups[tool];
    // A record stored before prices existed has none.
    const price = (record.spec.prices as ToolServerSpec["prices"] | undefined)?.[tool];
    return {
      outcome: "found",
      class: effectiveClass(found.annotations, record.spec, tool).class,
      ...(lookup ? { lookup } : {}),
      ...(price ? { cost_cents: price } : {}),
      ...(found.description ? { description: found.description } : {}),
      ...(found.inputSchema ? { input_schema: found.inputSchema } : {}),
    };
  }

  async call(req: ToolCallRequest): Promise<ToolCallOutcome> {
    const opened = await this.open(req.tenant, req.server);
    if ("outcome" in opened) return opened;
    const { record, connection } = opened;
    const timeout = Math.min(req.timeoutMs, record.spec.call_timeout_ms);
    const meta = { [EFFECT_KEY_META]: req.key };
    const args = (req.arguments ?? {}) as Record<string, unknown>;
    try {
      if (connection.wire === "2026-07-28") {
        const answers = req.input
          ? { inputResponses: req.input.responses, ...(req.input.state !== undefined ? { requestState: req.input.state } : {}) }
          : undefined;
        let answered = await connection.client.callTool(req.tool, args, meta, { timeoutMs: timeout, signal: req.signal }, answers);
        // A server's sampling requests are answered here (by the run's model budget) and the call made again with the answers.
        for (let round = 0; answered.kind === "input_required" && isSampling(answered.inputRequests); round++) {
          if (round >= MAX_SAMPLING_ROUNDS)
            return {
              outcome: "refused",
              code: "tool_sampling_refused",
              message: `${req.server}/${req.tool} asked to sample more than ${MAX_SAMPLING_ROUNDS} times in one call`,
              retryable: false,
            };
          const sampled = await sampleAll(req, record.spec, answered.inputRequests, round);
          if ("outcome" in sampled) return sampled;
          const again = { inputResponses: sampled.responses, ...(answered.requestState !== undefined ? { requestState: answered.requestState } : {}) };
          answered = await connection.client.callTool(req.tool, args, meta, { timeoutMs: timeout, signal: req.signal }, again);
        }
        if (answered.kind === "result") return ok(answered.result);
        if (answered.kind === "input_required") return inputRequired(req, answered.inputRequests, answered.requestState);
        if (req.allowTask) return { outcome: "task", taskId: answered.taskId, pollMs: answered.pollIntervalMs ?? DEFAULT_POLL_MS, wire: connection.wire };
        // The server chose a task for a caller that cannot wait on one (a handler's call): stop it.
        await connection.client.cancelTask(answered.taskId).catch(() => undefined);
        return {
          outcome: "refused",
          code: "tool_requires_task",
          message: `${req.server}/${req.tool} runs as a task: call it from a tool node`,
          retryable: false,
        };
      }
      const support = connection.tools.get(req.tool)?.execution?.taskSupport;
      if (connection.tasks && (support === "required" || support === "optional") && req.allowTask) {
        const created = await connection.client.request(
          { method: "tools/call", params: { name: req.tool, arguments: args, _meta: meta } },
          (await mcpSdk()).CreateTaskResultSchema,
          { task: { ttl: TASK_TTL_MS }, timeout, signal: req.signal },
        );
        return { outcome: "task", taskId: created.task.taskId, pollMs: created.task.pollInterval ?? DEFAULT_POLL_MS, wire: connection.wire };
      }
      if (support === "required")
        return {
          outcome: "refused",
          code: "tool_requires_task",
          message: `${req.server}/${req.tool} runs only as a task: call it from a tool node`,
          retryable: false,
        };
      // A server that may sample gets this call a session of its own: a request made on it can only be this call's.
      let own: LegacyConnection | undefined;
      if (record.spec.sampling && req.sample) {
        try {
          own = await this.connections.dedicated(record, legacySampler(req, record.spec, await mcpSdk()));
        } catch (err) {
          return { outcome: "refused", code: "tool_server_unavailable", message: `${req.server}: ${describe(err)}`, retryable: true };
        }
      }
      try {
        const result = await (own ?? connection).client.callTool({ name: req.tool, arguments: args, _meta: meta }, undefined, { timeout, signal: req.signal });
        return ok(result as Extract<ToolCallOutcome, { outcome: "ok" }>["result"]);
      } finally {
        if (own) await this.connections.release(own).catch(() => undefined);
      }
    } catch (err) {
      return this.failure(record, err, req, timeout);
    }
  }

  async pollTask(tenant: string, server: string, taskId: string, wire: string): Promise<TaskPollOutcome> {
    const opened = await this.open(tenant, server);
    if ("outcome" in opened) return { outcome: "unknown", code: opened.code, message: opened.message };
    const { connection } = opened;
    const where = `${server} task ${taskId}`;
    try {
      if (connection.wire !== wire) return { outcome: "unknown", code: "tool_server_changed", message: `${server} no longer speaks ${wire}` };
      if (connection.wire === "2026-07-28") {
        const state = await connection.client.getTask(taskId, { timeoutMs: POLL_TIMEOUT_MS });
        if (state.status === "completed") return ok(state.result);
        if (state.status === "failed") return { outcome: "refused", code: "tool_task_failed", message: `${where}: ${state.error.message}`, retryable: false };
        if (state.status === "cancelled") return { outcome: "refused", code: "tool_task_cancelled", message: `${where} was cancelled`, retryable: false };
        return { outcome: "working", ...(state.pollIntervalMs !== undefined ? { pollMs: state.pollIntervalMs } : {}) };
      }
      const task = await connection.client.experimental.tasks.getTask(taskId, { timeout: POLL_TIMEOUT_MS });
      if (task.status === "completed") {
        const result = await connection.client.experimental.tasks.getTaskResult(taskId, (await mcpSdk()).CallToolResultSchema, { timeout: POLL_TIMEOUT_MS });
        return ok(result as Extract<ToolCallOutcome, { outcome: "ok" }>["result"]);
      }
      if (task.status === "failed")
        return { outcome: "refused", code: "tool_task_failed", message: `${where}: ${task.statusMessage ?? "failed"}`, retryable: false };
      if (task.status === "cancelled") return { outcome: "refused", code: "tool_task_cancelled", message: `${where} was cancelled`, retryable: false };
      return { outcome: "working", ...(task.pollInterval ? { pollMs: task.pollInterval } : {}) };
    } catch (err) {
      // A task the server no longer knows (expired, or lost with the server) ended without a result anyone can know.
      const sdk = loadedMcpSdk();
      if (((sdk && err instanceof sdk.McpError) || err instanceof ModernMcpError) && err.code === INVALID_PARAMS)
        return { outcome: "refused", code: "tool_task_lost", message: `${where}: ${err.message}`, retryable: false };
      return { outcome: "unknown", code: "tool_server_unavailable", message: `${where}: ${describe(err)}` };
    }
  }

  async cancelTask(tenant: string, server: string, taskId: string, wire: string): Promise<void> {
    const opened = await this.open(tenant, server);
    if ("outcome" in opened || opened.connection.wire !== wire) return;
    const { connection } = opened;
    try {
      if (connection.wire === "2026-07-28") await connection.client.cancelTask(taskId, { timeoutMs: POLL_TIMEOUT_MS });
      else await connection.client.experimental.tasks.cancelTask(taskId, { timeout: POLL_TIMEOUT_MS });
    } catch {
      // Best effort: a task already ended, or a server gone, has nothing to stop.
    }
  }

  private async open(
    tenant: string,
    server: string,
  ): Promise<{ record: ToolServerRecord; connection: Connection } | { outcome: "refused"; code: string; message: string; retryable: boolean }> {
    const record = await this.registry.get(tenant, server);
    if (!record) return { outcome: "refused", code: "tool_server_not_found", message: `no tool server named '${server}' is registered`, retryable: false };
    try {
      return { record, connection: await this.connections.get(record) };
    } catch (err) {
      return { outcome: "refused", code: "tool_server_unavailable", message: `${server}: ${describe(err)}`, retryable: true };
    }
  }

  private failure(record: ToolServerRecord, err: unknown, req: ToolCallRequest, timeout: number): ToolCallOutcome {
    const where = `${req.server}/${req.tool}`;
    if (req.signal.aborted) return { outcome: "unknown", code: "tool_call_aborted", message: `${where}: the attempt was stopped during the call` };
    const sdk = loadedMcpSdk();
    const sdkError = sdk && err instanceof sdk.McpError ? err : undefined;
    if (sdkError?.code === REQUEST_TIMEOUT || (err instanceof Error && err.name === "TimeoutError")) {
      // A session that let a request hang may be wedged: the next call opens a new one.
      this.connections.discard(record);
      return { outcome: "unknown", code: "tool_timeout", message: `${where} did not answer within ${timeout} ms` };
    }
    if (sdkError?.code === CONNECTION_CLOSED)
      return { outcome: "unknown", code: "tool_server_crashed", message: `${where}: the server closed the connection during the call` };
    const rpcError = sdkError ?? (err instanceof ModernMcpError ? err : undefined);
    if (rpcError) {
      // The server answered the request with a JSON-RPC error: it did not run the tool.
      const retryable = rpcError.code === INTERNAL_ERROR;
      return { outcome: "refused", code: "tool_call_refused", message: `${where}: ${rpcError.message}`.slice(0, 4_096), retryable };
    }
    return { outcome: "unknown", code: "tool_server_unavailable", message: `${where}: ${describe(err)}`.slice(0, 4_096) };
  }

  /**
   * Checks a call's arguments against the tool's input schema as its server lists it (a person's
   * edit of a gated call, before it is stored), with the MCP SDK's JSON Schema validator (Ajv: the
   * whole of JSON Schema, not the subset workflow schemas use). A schema it cannot compile is
   * `invalid`: an edit is never let through unchecked.
   */
  async checkArguments(
    tenant: string,
    server: string,
    tool: string,
    args: unknown,
  ): Promise<{ outcome: "valid" } | { outcome: "invalid"; reason: string } | { outcome: "unavailable"; message: string }> {
    const record = await this.registry.get(tenant, server);
    if (!record) return { outcome: "invalid", reason: `no tool server named '${server}' is registered` };
    let listed;
    try {
      listed = (await this.connections.get(record)).tools.get(tool);
    } catch (err) {
      return { outcome: "unavailable", message: `${server}: ${describe(err)}` };
    }
    if (!listed) return { outcome: "invalid", reason: `server '${server}' has no tool named '${tool}'` };
    try {
      this.schemas ??= new (await mcpSdk()).AjvJsonSchemaValidator();
      const checked = this.schemas.getValidator(listed.inputSchema as JsonSchemaType)(args);
      return checked.valid ? { outcome: "valid" } : { outcome: "invalid", reason: `${server}/${tool} arguments: ${checked.errorMessage}` };
    } catch (err) {
      return { outcome: "invalid", reason: `${server}/${tool}'s input schema cannot be checked: ${describe(err)}` };
    }
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
