import type { Server } from "node:http";
import { ensureDomainTopology, NodeMetrics } from "../actors/index.js";
import {
  AgentStore,
  ApiKeyStore,
  ensureA2aBuckets,
  ensureKeysBucket,
  ensureModelsBucket,
  ensureSchedulesBucket,
  ensureToolsBucket,
  RunReplays,
  ModelStore,
  startA2a,
  startApi,
  startTraceExporter,
  ToolConnections,
  ToolGateway,
  ToolRegistry,
  type A2aServer,
} from "../gateways/index.js";
import { createLogger, startNode, systemClock, type MicroService, type RunwayNode, type Stage } from "../runtime/index.js";
import type { RunwayNodeConfig, RunwayWorkflowNode } from "./node-config.js";
import { callerDirectory } from "./creds/index.js";
import {
  schedulesPart,
  decorateLocal,
  domainActors,
  localReceivers,
  recoverOnServe,
  serveMetrics,
  servicesPart,
  stepPoolPart,
  storesPart,
  type Parts,
  type StageDeps,
} from "./node-parts.js";

export type { LocalReceiver, NodeDecorators, RunwayNodeConfig, RunwayWorkflowNode } from "./node-config.js";

/**
 * A workflow node: the generic runtime node plus the run and tenant actors, the step pool, the
 * engine, the services, the metrics and the API, made in dependency order (node-parts.ts) and
 * stopped in reverse, each stop running even if an earlier one threw: the API stops taking requests
 * before partitions are handed back, and the pool is destroyed last. The pool's threads load while
 * the node connects and recovers, and are waited for only after ownership.
 */
export async function startRunwayNode(config: RunwayNodeConfig): Promise<RunwayWorkflowNode> {
  const logger = config.logger ?? createLogger(`node:${config.name}`);
  const clock = config.clock ?? systemClock;
  const metrics = new NodeMetrics(config.name);
  const parts: Parts = { toolConnections: new ToolConnections() };
  // Before the actors are defined: the run actor's span observer and the executor write to it.
  if (config.traces) parts.traces = await startTraceExporter(config.traces, config.name);
  const pool = stepPoolPart(config, parts);
  const stores = storesPart(() => parts.node!(), pool.pool);
  let started: RunwayNode;
  try {
    started = await startNode({
      connection: config.connection,
      name: config.name,
      actors: domainActors(config, parts, stores),
      topology: { replicas: config.replicas ?? 1 },
      ...(config.leaseTtlMs !== undefined ? { leaseTtlMs: config.leaseTtlMs } : {}),
      ...(config.decorate?.log ? { decorate: { log: config.decorate.log } } : {}),
      ...(config.maxDeliveries !== undefined ? { maxDeliveries: config.maxDeliveries } : {}),
      clock,
      logger,
      local: decorateLocal(config.decorate, localReceivers(parts, metrics, logger)),
      onServe: recoverOnServe(() => parts.node!(), stores, metrics, clock, logger),
      stages: (self) => {
        parts.node = self;
        return domainStages(config, { self, parts, stores, pool, metrics, clock, logger });
      },
      // Claims and their recovery start before these: a restarted node's recovered attempts wait
      // in the pool for its threads rather than the claims waiting for them.
      serving: (self) => servingStages(config, { self, parts, stores, pool, metrics, clock, logger }),
    });
  } catch (err) {
    // A node that failed to start leaves no threads behind: its step-pool stage may not have run.
    await pool.ready;
    await pool.pool.destroy();
    await parts.traces?.shutdown().catch(() => undefined);
    throw err;
  }
  const services = parts.services!;
  return {
    httpUrl: parts.http?.url,
    node: started,
    definitions: stores.definitions(),
    tenants: services.tenants,
    runs: services.runs,
    executor: services.engine.executor,
    pool: pool.pool,
    metrics,
    dispatcher: services.engine.dispatcher,
    sweeper: services.sweeper,
    models: parts.models!,
    // The spans the node's last transitions ended are sent before it is gone.
    stop: async () => {
      try {
        await started.stop();
      } finally {
        await parts.traces?.shutdown().catch((err: unknown) => logger.warn("trace export at stop failed", { error: String(err) }));
      }
    },
  };
}

/** The stages between the actor host and membership, in start order (they stop in reverse). */
function domainStages(config: RunwayNodeConfig, deps: StageDeps): Stage[] {
  const { self, parts, pool, metrics } = deps;
  let http: Server | undefined;
  return [
    {
      name: "domain-topology",
      start: async () => {
        await ensureDomainTopology(self().nc, config.replicas ?? 1);
        await ensureToolsBucket(self().nc, config.replicas ?? 1);
        await ensureSchedulesBucket(self().nc, config.replicas ?? 1);
        await ensureA2aBuckets(self().nc, config.replicas ?? 1);
        await ensureModelsBucket(self().nc, config.replicas ?? 1);
        await ensureKeysBucket(self().nc, config.replicas ?? 1);
      },
    },
    {
      name: "api-keys",
      start: async () => {
        parts.keys = new ApiKeyStore(self().nc);
        await parts.keys.start();
      },
      stop: () => parts.keys?.close(),
    },
    {
      // Watched from the start, so a model call finds its provider in memory.
      name: "model-store",
      start: async () => {
        parts.models = new ModelStore(self().nc);
        await parts.models.start();
      },
      stop: () => parts.models?.close(),
    },
    {
      // Watched from the start, so an A2A request finds its agent in memory.
      name: "agent-store",
      start: async () => {
        parts.agents = new AgentStore(self().nc);
        await parts.agents.start();
      },
      stop: () => parts.agents?.close(),
    },
    {
      name: "tool-gateway",
      start: () => {
        const registry = new ToolRegistry(self().nc);
        parts.tools = { registry, gateway: new ToolGateway(registry, parts.toolConnections) };
      },
      // Stdio tool servers are this node's children: they go with it.
      stop: async () => {
        try {
          await parts.tools?.registry.close();
        } finally {
          await parts.toolConnections.close();
        }
      },
    },
    // Started above; destroyed last, once the partitions are handed back.
    { name: "step-pool", start: () => undefined, stop: () => pool.pool.destroy() },
    {
      name: "services",
      start: () => {
        parts.services = servicesPart(config, deps, parts.tools!);
      },
    },
    {
      name: "metrics-http",
      start: async () => {
        if (config.metricsPort !== undefined) http = await serveMetrics(config.metricsPort, metrics);
      },
      stop: () => new Promise<void>((r) => (http ? http.close(() => r()) : r())),
    },
    { name: "dispatcher", start: () => undefined, stop: () => parts.services?.engine.dispatcher?.stop() },
    {
      name: "sweeper",
      start: () => {
        if (config.sweepIntervalMs !== false) parts.services!.sweeper.start(config.sweepIntervalMs ?? 60_000);
      },
      stop: () => parts.services?.sweeper.stop(),
    },
    {
      name: "schedules",
      start: async () => {
        parts.schedules = schedulesPart(deps, parts.services!);
        await parts.schedules.firer.start();
      },
      stop: () => parts.schedules?.firer.stop(),
    },
  ];
}

/** The stages after ownership: the pool's threads are waited for, then the API serves. */
function servingStages(config: RunwayNodeConfig, deps: StageDeps): Stage[] {
  const { self, parts, stores, pool, metrics, clock } = deps;
  let api: MicroService | undefined;
  let http: A2aServer | undefined;
  return [
    {
      name: "step-pool-ready",
      start: async () => {
        const failed = await pool.ready;
        if (failed !== undefined) throw failed;
      },
    },
    {
      name: "api",
      start: async () => {
        if (config.api === false) return;
        const { tenants, runs, sweeper } = parts.services!;
        api = await startApi(self().nc, {
          tenants,
          definitions: stores.definitions(),
          runs,
          metrics,
          sweeper,
          tools: parts.tools!,
          schedules: parts.schedules!.service,
          models: parts.models!,
          keys: parts.keys!,
          replays: new RunReplays({ nc: self().nc, partitions: self().topology.partitions, runs }),
          agents: parts.agents!,
          self: { owned: () => self().host.ownedPartitions(), httpUrl: () => parts.http?.url },
          ...(config.credentialsDir ? { callers: callerDirectory(config.credentialsDir, () => clock.now()) } : {}),
          now: () => clock.now(),
        });
      },
      stop: () => api?.stop(),
    },
    {
      name: "a2a-http",
      start: async () => {
        if (!config.http) return;
        const { runs } = parts.services!;
        const host = config.http.host ?? "127.0.0.1";
        // The web console shares the server (docs/console.md); express is loaded only for a node that serves HTTP.
        const { consoleRouter } = await import("./console/server.js");
        const web = consoleRouter({ nc: self().nc, keys: parts.keys!, logger: deps.logger, host });
        http = await startA2a(
          {
            nc: self().nc,
            runs,
            definitions: stores.definitions(),
            agents: parts.agents!,
            keys: parts.keys!,
            logger: deps.logger,
            now: () => clock.now(),
          },
          { ...config.http, host, push: { ...config.http.push, node: config.name }, mounts: [{ path: "/console", handler: web }] },
        );
        parts.http = http;
      },
      stop: () => http?.close(),
    },
  ];
}
