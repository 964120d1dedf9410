import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type * as Types from "@modelcontextprotocol/sdk/types.js";
import type { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";

/** What Runway uses of the MCP SDK (its 2025-11-25 client, schemas, errors and JSON Schema validator). */
export interface McpSdk {
  Client: typeof Client;
  StdioClientTransport: typeof StdioClientTransport;
  StreamableHTTPClientTransport: typeof StreamableHTTPClientTransport;
  AjvJsonSchemaValidator: typeof AjvJsonSchemaValidator;
  CallToolResultSchema: typeof Types.CallToolResultSchema;
  CreateTaskResultSchema: typeof Types.CreateTaskResultSchema;
  CreateMessageRequestSchema: typeof Types.CreateMessageRequestSchema;
  ElicitRequestSchema: typeof Types.ElicitRequestSchema;
  ErrorCode: typeof Types.ErrorCode;
  McpError: typeof Types.McpError;
}

let loading: Promise<McpSdk> | undefined;
let loaded: McpSdk | undefined;

/**
 * The MCP SDK, imported on first use: importing it (with Ajv) is a large part of starting a
 * process (a node's restart, every `runway` CLI command), and a node serves runs that call no
 * tool, and many commands never reach one.
 */
export function mcpSdk(): Promise<McpSdk> {
  loading ??= (async () => {
    const [client, stdio, http, types, ajv] = await Promise.all([
      import("@modelcontextprotocol/sdk/client/index.js"),
      import("@modelcontextprotocol/sdk/client/stdio.js"),
      import("@modelcontextprotocol/sdk/client/streamableHttp.js"),
      import("@modelcontextprotocol/sdk/types.js"),
      import("@modelcontextprotocol/sdk/validation/ajv"),
    ]);
    loaded = {
      Client: client.Client,
      StdioClientTransport: stdio.StdioClientTransport,
      StreamableHTTPClientTransport: http.StreamableHTTPClientTransport,
      AjvJsonSchemaValidator: ajv.AjvJsonSchemaValidator,
      CallToolResultSchema: types.CallToolResultSchema,
      CreateTaskResultSchema: types.CreateTaskResultSchema,
      CreateMessageRequestSchema: types.CreateMessageRequestSchema,
      ElicitRequestSchema: types.ElicitRequestSchema,
      ErrorCode: types.ErrorCode,
      McpError: types.McpError,
    };
    return loaded;
  })();
  return loading;
}

/** The SDK if it was loaded: only then can an error be one of its classes. */
export function loadedMcpSdk(): McpSdk | undefined {
  return loaded;
}
