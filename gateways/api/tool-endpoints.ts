import { redacted, ToolServerSpecSchema, type ToolGateway, type ToolRegistry } from "../tools/index.js";
import { requests } from "./schemas.js";
import type { TenantEndpoint } from "./serve.js";

/** `tools.servers.put|get|list|delete` and `tools.list`: the tenant's MCP servers and their tools. */
export function addToolEndpoints(endpoint: TenantEndpoint, tools: { registry: ToolRegistry; gateway: ToolGateway }, now: () => number): void {
  endpoint("tool_servers_put", "tools.servers.put", requests.toolServersPut, async (t, b) => {
    const spec = ToolServerSpecSchema.safeParse(b.server);
    if (!spec.success) return { outcome: "invalid_input", reason: spec.error.issues.map((i) => `server.${i.path.join(".")}: ${i.message}`).join("; ") };
    return { outcome: "saved", server: redacted(await tools.registry.put(t, spec.data, now())) };
  });
  endpoint("tool_servers_get", "tools.servers.get", requests.toolServerName, async (t, b) => {
    const record = await tools.registry.get(t, b.name);
    return record ? { outcome: "found", server: redacted(record) } : { outcome: "server_not_found" };
  });
  endpoint("tool_servers_list", "tools.servers.list", requests.toolServersList, async (t) => ({
    outcome: "ok",
    servers: (await tools.registry.list(t)).map(redacted),
  }));
  endpoint("tool_servers_delete", "tools.servers.delete", requests.toolServerName, async (t, b) =>
    (await tools.registry.delete(t, b.name)) ? { outcome: "deleted" } : { outcome: "server_not_found" },
  );
  endpoint("tools_list", "tools.list", requests.toolsList, (t, b) => tools.gateway.list(t, b.server));
}
