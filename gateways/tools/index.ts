export { ToolGateway, type ToolListing, type ToolsListResult } from "./gateway.js";
export { ToolConnections } from "./connections.js";
export { ToolRegistry, ToolServerSpecSchema, TOOLS_BUCKET, ensureToolsBucket, redacted, type ToolServerSpec, type ToolServerRecord } from "./registry.js";
export { mcpSdk } from "./sdk.js";
