import type { DefinitionStore } from "../../actors/index.js";
import type { AgentStore } from "../a2a/index.js";
import { requests } from "./schemas.js";
import type { TenantEndpoint } from "./serve.js";

/** `agents.expose|list|hide`: which of a tenant's published definitions are A2A agents (docs/a2a.md). */
export function addAgentEndpoints(endpoint: TenantEndpoint, agents: AgentStore, definitions: DefinitionStore, now: () => number): void {
  endpoint("agents_expose", "agents.expose", requests.agentsExpose, async (t, b) => {
    const resolved = await definitions.resolve(t, b.definition);
    if (resolved.outcome !== "found") return resolved;
    const agent = {
      name: b.name ?? b.definition,
      definition: b.definition,
      ...(b.description !== undefined ? { description: b.description } : {}),
      ...(b.skills !== undefined ? { skills: b.skills } : {}),
      public: b.public,
      exposed_at: now(),
    };
    await agents.put(t, agent);
    return { outcome: "exposed", agent };
  });
  endpoint("agents_list", "agents.list", requests.agentsList, async (t) => ({ outcome: "ok", agents: await agents.list(t) }));
  endpoint("agents_hide", "agents.hide", requests.agentsHide, async (t, b) =>
    (await agents.hide(t, b.name)) ? { outcome: "hidden", name: b.name } : { outcome: "agent_not_found" },
  );
}
