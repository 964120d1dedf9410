import type { AgentCard, AgentSkill } from "@a2a-js/sdk";
import type { ExposedAgent } from "./agents.js";

/** The media types a task's message parts and artifacts use (tasks.ts: `inputOf`, `resultArtifact`). */
const MODES = ["application/json", "text/plain"];

/**
 * An exposed agent's card: both bindings at one URL (JSON-RPC first), A2A 1.0, streaming,
 * push notifications. A non-public agent names one security scheme, `bearer` (a
 * tenant API key sent as a bearer token), required by every call.
 */
export function agentCardOf(url: string, agent: ExposedAgent, definition: { version: number; description?: string }): AgentCard {
  const skills: AgentSkill[] = (
    agent.skills ?? [
      { id: agent.definition, name: agent.definition, description: definition.description ?? `Runs the ${agent.definition} workflow`, tags: ["workflow"] },
    ]
  ).map((s) => ({ examples: [], ...s, inputModes: MODES, outputModes: MODES, securityRequirements: [] }));
  return {
    name: agent.name,
    description: agent.description ?? definition.description ?? `The ${agent.definition} workflow, run durably by Runway`,
    supportedInterfaces: [
      { url, protocolBinding: "JSONRPC", tenant: "", protocolVersion: "1.0" },
      { url, protocolBinding: "HTTP+JSON", tenant: "", protocolVersion: "1.0" },
    ],
    provider: undefined,
    version: String(definition.version),
    capabilities: { streaming: true, pushNotifications: true, extensions: [], extendedAgentCard: true },
    securitySchemes: agent.public
      ? {}
      : { bearer: { scheme: { $case: "httpAuthSecurityScheme", value: { description: "a tenant API key", scheme: "Bearer", bearerFormat: "" } } } },
    securityRequirements: agent.public ? [] : [{ schemes: { bearer: { list: [] } } }],
    defaultInputModes: MODES,
    defaultOutputModes: MODES,
    skills,
    signatures: [],
  };
}
