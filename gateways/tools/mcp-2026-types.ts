// The vocabulary of MCP 2026-07-28 as this client speaks it: the revisions, the errors a request
// throws, and the shapes of tools, call results and tasks (the client is mcp-2026.ts).

import { isObject } from "./mcp-2026-http.js";

export const MODERN_PROTOCOL = "2026-07-28";
/** The modern revisions this client speaks, preferred first. */
export const MODERN_PROTOCOLS: readonly string[] = [MODERN_PROTOCOL];
export const TASKS_EXTENSION = "io.modelcontextprotocol/tasks";

/** UnsupportedProtocolVersionError: the server does not take the request's version, and names those it does. */
const UNSUPPORTED_PROTOCOL_VERSION = -32022;

/** A JSON-RPC error answered by the server. */
export class ModernMcpError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
    this.name = "ModernMcpError";
  }
}

/**
 * The server refused the protocol version and no retry can help: it names no version the client
 * speaks, or it refused again the one it named.
 */
export class ModernMcpVersionError extends Error {
  constructor(
    readonly url: string,
    readonly requested: string,
    readonly supported: readonly string[],
    readonly speaks: readonly string[],
  ) {
    const named = supported.length > 0 ? supported.join(", ") : "no version";
    super(
      supported.some((v) => speaks.includes(v))
        ? `MCP server at ${url} refused protocol version ${requested}, though it names ${named}`
        : `MCP server at ${url} speaks ${named}; Runway speaks ${speaks.join(", ")}: no protocol version in common`,
    );
    this.name = "ModernMcpVersionError";
  }
}

/** The versions an UnsupportedProtocolVersionError names (`data.supported`), or undefined for any other error. */
export function supportedVersionsOf(err: unknown): string[] | undefined {
  if (!(err instanceof ModernMcpError) || err.code !== UNSUPPORTED_PROTOCOL_VERSION) return undefined;
  const listed = isObject(err.data) && Array.isArray(err.data.supported) ? err.data.supported : [];
  return listed.filter((v): v is string => typeof v === "string");
}

/** The server answered with an HTTP error status and no JSON-RPC error in the body. */
export class ModernMcpHttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = "ModernMcpHttpError";
  }
}

export interface ModernTool {
  name: string;
  description?: string;
  inputSchema?: unknown;
  annotations?: Record<string, unknown>;
}

export type ToolResult = { content?: unknown[]; structuredContent?: unknown; isError?: boolean } & Record<string, unknown>;

/** One of a server's MRTR input requests: `elicitation/create`, `sampling/createMessage` or `roots/list`, with its params. */
export interface ModernInputRequest {
  method: string;
  params?: Record<string, unknown>;
}

export type ModernCallResult =
  | { kind: "result"; result: ToolResult }
  | { kind: "task"; taskId: string; status: string; pollIntervalMs?: number; ttlMs?: number | null }
  /** MRTR: the server needs input before it can answer; the call is retried with `inputResponses` (same keys) and `requestState` echoed. */
  | { kind: "input_required"; inputRequests: Record<string, ModernInputRequest>; requestState?: string };

/** A retry of a call that answered `input_required`: the answers by the server's keys, and its state echoed byte for byte. */
export interface ModernInputAnswers {
  inputResponses: Record<string, unknown>;
  requestState?: string;
}

export type ModernTaskState =
  | { status: "working" | "input_required"; pollIntervalMs?: number; statusMessage?: string }
  | { status: "completed"; result: ToolResult }
  | { status: "failed"; error: { code: number; message: string } }
  | { status: "cancelled" };

export interface ModernRequestOptions {
  /** Whole request, response body included (default 60 s). Expiry throws an Error named "TimeoutError". */
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface ModernMcpClientOptions {
  /** Extra HTTP headers on every request (e.g. Authorization). */
  headers?: Record<string, string>;
  clientInfo?: { name: string; version: string };
  /** Declare the tasks extension in every request's client capabilities (default true). */
  declareTasks?: boolean;
}
