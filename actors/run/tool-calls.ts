import type { ToolClass } from "../../machines/index.js";
import { sha256Hex } from "../records/index.js";
import { canonicalJson } from "../../machines/index.js";

/** The `_meta` key an effect key travels in, so a server can deduplicate. */
export const EFFECT_KEY_META = "io.runway/effect-key";

/**
 * `<run>:<step path>:<sha256 of the canonical call>` (the call: server, tool and arguments, so the
 * key's scope is the tool): the same call of the same step is one effect, however often its
 * step runs. Two effects need two nodes (or different arguments).
 */
export function effectKey(run: string, node: string, item: number | undefined, call: { server: string; tool: string; arguments: unknown }): string {
  const hash = sha256Hex(canonicalJson({ server: call.server, tool: call.tool, arguments: call.arguments ?? null }));
  return `${run}:${node}${item !== undefined ? `[${item}]` : ""}:${hash}`;
}

/** What the gateway knows of a tool before a call. */
export type ToolLookup =
  /**
   * `lookup`: a read-only tool of the same server that tells whether a call of this one happened
   * (by effect key); `cost_cents`: the operator's price of one call (metered before it is made).
   */
  | {
      outcome: "found";
      class: ToolClass;
      lookup?: string;
      cost_cents?: number;
      /** As the server lists the tool: what an agent's model is shown. */
      description?: string;
      input_schema?: unknown;
    }
  | { outcome: "server_not_found" | "tool_not_found"; message: string }
  | { outcome: "unavailable"; code: string; message: string };

/**
 * How a call ended, as far as the world is concerned:
 * - `ok`: the tool answered (`result` is MCP's CallToolResult; `isError` in it is the tool's own failure);
 * - `refused`: it is known that nothing happened (the server refused the request or was never reached);
 * - `unknown`: it may have happened (timeout, the server died mid-call): only reconciliation can tell.
 */
export type ToolCallOutcome =
  | ToolResultOutcome
  /** The server runs the call as an MCP task: poll it (the call is not made again). */
  | { outcome: "task"; taskId: string; pollMs: number; wire: string }
  /** The server needs a person's input first (MCP 2026-07-28 MRTR): nothing happened; call again with the answers and `state`. */
  | ToolInputRequired;

/**
 * A person's input is needed: the forms, the state to echo with the answers, and (a remote A2A
 * task that asks) the task, which the run cancels if nobody answers.
 */
export interface ToolInputRequired {
  outcome: "input_required";
  requests: ToolInputRequest[];
  state?: string;
  task?: { id: string; wire: string };
}

/** A form a person fills for a tool: the server's key for it, its message, and the JSON schema the answer must fit. */
export interface ToolInputRequest {
  key: string;
  message: string;
  schema: Record<string, unknown>;
}

/** A call's (or a task's) end as the world saw it. */
export type ToolResultOutcome =
  | { outcome: "ok"; result: { content?: unknown[]; structuredContent?: unknown; isError?: boolean } & Record<string, unknown>; bytes: number }
  | { outcome: "refused"; code: string; message: string; retryable: boolean }
  | { outcome: "unknown"; code: string; message: string };

/**
 * How a task is doing: still working (ask again), ended (its result, or why not), not known now
 * (the server could not be asked), or asking a person (an A2A task in `input-required`: the run
 * files the question like a server's `input_required` and parks the step; the answer is the
 * next attempt's call, with `state`).
 */
export type TaskPollOutcome = { outcome: "working"; pollMs?: number } | ToolResultOutcome | ToolInputRequired;

export interface ToolCallRequest {
  tenant: string;
  server: string;
  tool: string;
  arguments: unknown;
  key: string;
  timeoutMs: number;
  signal: AbortSignal;
  /** The caller can wait on an MCP task (a tool node can; a handler's call cannot). */
  allowTask: boolean;
  /** The caller can wait on a person's input (a tool node can; a handler's call cannot). */
  allowInput?: boolean;
  /** A call again after `input_required`: a person's answers (`{action, content?}` by the server's keys) and the server's state. */
  input?: { responses: Record<string, unknown>; state?: string };
  /**
   * Serves a server's `sampling/createMessage` asked during this call (MCP 2026-07-28 MRTR: the
   * request comes back with the call, so it is this call's) under the calling run's budget;
   * absent: sampling is refused. The gateway checks the server's sampling policy first.
   */
  sample?: (ask: SamplingAsk) => Promise<SamplingAnswer>;
}

/**
 * One `sampling/createMessage` a server asked during a call, checked against its server's policy:
 * the model it may use (`<provider>/<model>`), the request as the model gateway takes it, and
 * where it was asked (the call's `round` of input requests, and its place among them) — never
 * anything the server makes up, so a call made again after a crash asks under the same key.
 */
export interface SamplingAsk {
  model: string;
  request: { messages: { role: "system" | "user" | "assistant"; content: string }[]; max_tokens: number; temperature?: number };
  round: number;
  index: number;
  /** sha256 of the server's params (canonical JSON): part of the sampling's effect key. */
  hash: string;
}

/**
 * The answer to a sampling request: the model's (MCP's CreateMessageResult), or a refusal with
 * the MCP error code that says why (`-32600` policy or budget, `-32603` the model failed), or
 * `stopped` (the run no longer wants the attempt).
 */
export type SamplingAnswer =
  | { outcome: "ok"; result: { role: "assistant"; content: { type: "text"; text: string }; model: string; stopReason: string } }
  /** `retryable`: the provider's quota was spent (a later attempt may be served). */
  | { outcome: "refused"; mcp_code: number; code: string; message: string; retryable?: true }
  | { outcome: "stopped"; reason: string };

/** The tool gateway as the executor sees it (the MCP gateway in `gateways/tools` implements it). */
export interface ToolPort {
  lookup(tenant: string, server: string, tool: string): Promise<ToolLookup>;
  call(request: ToolCallRequest): Promise<ToolCallOutcome>;
  /** `tool`: the tool whose call became the task (an `a2a` node's: the agent's card URL). */
  pollTask(tenant: string, server: string, taskId: string, wire: string, tool?: string): Promise<TaskPollOutcome>;
  /** Best effort: a task the run no longer wants (`tasks/cancel`). */
  cancelTask(tenant: string, server: string, taskId: string, wire: string, tool?: string): Promise<void>;
}
