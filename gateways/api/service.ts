import type { NatsConnection } from "@nats-io/transport-node";
import type { DefinitionStore, NodeMetrics, Sweeper } from "../../actors/index.js";
import { MicroService } from "../../runtime/index.js";
import type { ModelStore } from "../models/index.js";
import type { ToolGateway, ToolRegistry } from "../tools/index.js";
import type { AgentStore } from "../a2a/index.js";
import type { ApiKeyStore } from "../keys/index.js";
import { addKeyEndpoints } from "./key-endpoints.js";
import { addAgentEndpoints } from "./agent-endpoints.js";
import { addApprovalEndpoints } from "./approval-endpoints.js";
import { addDefinitionEndpoints } from "./definition-endpoints.js";
import { addModelEndpoints } from "./model-endpoints.js";
import { addOpsEndpoints, type NodeSelf } from "./ops-endpoints.js";
import type { RunReplays } from "./replays.js";
import { addRunEndpoints } from "./run-endpoints.js";
import type { RunService } from "./run-service.js";
import { tenantEndpoints } from "./serve.js";
import type { CallerDirectory } from "./callers.js";
import { addTenantEndpoints } from "./tenant-endpoints.js";
import type { TenantService } from "./tenant-service.js";
import { addToolEndpoints } from "./tool-endpoints.js";
import { addScheduleEndpoints } from "./schedule-endpoints.js";
import type { ScheduleService } from "../schedules/index.js";

export const API_VERSION = "0.2.0";

export interface ApiServices {
  tenants: TenantService;
  definitions: DefinitionStore;
  runs: RunService;
  metrics: NodeMetrics;
  /** This node's recovery sweep (an operator may run a pass now). */
  sweeper?: Sweeper;
  /** Trajectories and replays of finished runs. */
  replays?: RunReplays;
  /** The tool gateway: the tenant's MCP server registry and the tools behind it. */
  tools?: { registry: ToolRegistry; gateway: ToolGateway };
  /** The tenant's schedules. */
  schedules?: ScheduleService;
  /** The tenants' exposed A2A agents. */
  agents?: AgentStore;
  /** The tenant's model providers. */
  models?: ModelStore;
  /** The tenants' API keys (bearer tokens of HTTP callers). */
  keys?: ApiKeyStore;
  /** This node itself: the partitions it owns (`ops.nodes`). */
  self?: NodeSelf;
  /** Who the deployment's NATS keys are (credentials on): a tenant key's requests are answered as that key. */
  callers?: CallerDirectory;
  now(): number;
}

/**
 * The `runway` NATS micro service (`runway.v1.<tenant>.…` and `runway.v1.ops.…`; docs/api.md).
 * Requests are validated by schemas.ts (unknown fields refused) and every business answer is a
 * closed `{ outcome, … }`; only faults use the `Nats-Service-Error` headers (503 when a retry may
 * help, 500 otherwise).
 */
export async function startApi(nc: NatsConnection, services: ApiServices): Promise<MicroService> {
  const service = new MicroService(nc, { name: "runway", version: API_VERSION, description: "Runway durable workflow runtime" });
  const endpoint = tenantEndpoints(service, services.tenants, services.callers);
  addDefinitionEndpoints(endpoint, services.definitions, () => services.now());
  addRunEndpoints(endpoint, nc, services.runs, services.replays);
  addApprovalEndpoints(endpoint, nc, services.runs, services.tools?.gateway);
  if (services.agents) addAgentEndpoints(endpoint, services.agents, services.definitions, () => services.now());
  if (services.tools) addToolEndpoints(endpoint, services.tools, () => services.now());
  if (services.schedules) addScheduleEndpoints(endpoint, services.schedules);
  if (services.models) addModelEndpoints(endpoint, services.models, () => services.now());
  if (services.keys) addKeyEndpoints(endpoint, services.keys, () => services.now());
  addTenantEndpoints(service, endpoint, services.tenants);
  addOpsEndpoints(service, nc, services.metrics, services.sweeper, services.self);
  await service.start();
  return service;
}
