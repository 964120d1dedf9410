import { resolve } from "node:path";
import { createServer, type Server } from "node:http";
import {
  DefinitionStore,
  DEFAULT_SCHEDULER,
  LiveRunIndex,
  Dispatcher,
  QuotaGate,
  UsageMeter,
  EndedRunCompaction,
  NodeMetrics,
  readParent,
  readTenantGate,
  RunMemories,
  RUN_KIND,
  recoverPartitionPatiently,
  runActor,
  ReplayTools,
  StepExecutor,
  PartitionHold,
  Sweeper,
  tenantActor,
} from "../actors/index.js";
import {
  modelPortOf,
  A2ACaller,
  RunService,
  ScheduleFirer,
  withA2A,
  ScheduleService,
  ScheduleStore,
  TenantService,
  type A2aServer,
  type AgentStore,
  type ApiKeyStore,
  type ModelStore,
  type ToolConnections,
  type ToolGateway,
  type ToolRegistry,
  type TraceExporter,
} from "../gateways/index.js";
import { METRICS_CHANNEL, STEP_ABORT, TASK_POLL, STEP_LAPSED, STEP_READY, type MachineCounter, type RunLocalChannels } from "../machines/index.js";
import {
  DEFAULT_LEASE_TTL_MS,
  partitionOf,
  StepPool,
  type ActorDefinition,
  type Clock,
  type LocalReceivers,
  type Logger,
  type NodeConfig,
  type RunwayNode,
} from "../runtime/index.js";
import type { NodeDecorators, RunwayNodeConfig } from "./node-config.js";
import { collectNodeMetrics, collectRunMetrics, collectSchedulerMetrics } from "./node-metrics.js";

/**
 * The parts a workflow node is built from (`startRunwayNode` puts them together in order): each
 * builder makes one part from the parts it needs.
 */

export /** Help text of the counters the run machine reports on its metrics channel. */
/** Help text of the counters the run machine reports on its metrics channel. */
const MACHINE_COUNTERS: Record<MachineCounter["counter"], string> = {
  lease_expiries: "attempt leases that lapsed without a heartbeat",
  sweep_actions: "repairs made by the recovery sweep, by action",
};

/**
 * What the node's stages make, as they make it. The actors and the pool are defined before the
 * connection exists and reach these late: a part is there once its stage started.
 */
export interface Parts {
  node?: () => RunwayNode;
  toolConnections: ToolConnections;
  tools?: ToolsPart;
  /** The tenants' model providers, watched. */
  models?: ModelStore;
  /** The tenants' exposed A2A agents, watched from the node's start (a request reads its agent from memory). */
  agents?: AgentStore;
  /** The tenants' API keys, watched from the node's start (a revocation holds here as soon as it is written). */
  keys?: ApiKeyStore;
  services?: ServicesPart;
  /** The A2A HTTP server (`http` set). */
  http?: A2aServer;
  schedules?: SchedulesPart;
  /** The span exporter (tracing on), made before the actors. */
  traces?: TraceExporter;
}

export interface SchedulesPart {
  service: ScheduleService;
  firer: ScheduleFirer;
}

export interface ToolsPart {
  registry: ToolRegistry;
  gateway: ToolGateway;
}

export interface EnginePart {
  executor: StepExecutor;
  /** The fair scheduler (absent: `scheduler: false`, attempts go to the executor at once). */
  dispatcher: Dispatcher | undefined;
}

export interface ServicesPart {
  tenants: TenantService;
  engine: EnginePart;
  sweeper: Sweeper;
  runs: RunService;
}

/** Everything a stage builder reads. */
export interface StageDeps {
  self: () => RunwayNode;
  parts: Parts;
  stores: StoresPart;
  pool: PoolPart;
  metrics: NodeMetrics;
  clock: Clock;
  logger: Logger;
}

export interface PoolPart {
  pool: StepPool;
  /** Settles once the threads loaded the handler modules: the error when they could not. */
  ready: Promise<unknown>;
  /** Attempts one thread interleaves. */
  tasksPerThread: number;
}

/**
 * The step pool, its threads starting at once: they load the handler modules while the node
 * connects and checks its streams (a third of a restart, done one after the other otherwise).
 */
export function stepPoolPart(config: RunwayNodeConfig, parts: Parts): PoolPart {
  // Every scheduler slot can run at once: the scheduler, not the pool's FIFO, decides who waits.
  const tasksPerThread = config.tasksPerThread ?? 8;
  const executor = () => parts.services?.engine.executor;
  const pool = new StepPool({
    handlerModules: config.handlers.map((h) => resolve(h)),
    threads: config.threads ?? 2,
    tasksPerThread,
    onHeartbeat: (ref) => executor()?.heartbeat(ref),
    onToolCall: (ref, call) => executor()?.toolCallOf(ref, call) ?? Promise.resolve({ outcome: "stopped" as const, reason: "node_starting" }),
  });
  const ready = pool.start().then(
    () => undefined,
    (err: unknown) => err,
  );
  return { pool, ready, tasksPerThread };
}

export interface StoresPart {
  definitions(): DefinitionStore;
  memories(): RunMemories;
  /** Run memories held now (0 before the first is made). */
  memoriesHeld(): number;
  live(): LiveRunIndex;
}

/** The stores the actors and services share, each made on first use (the run actor is defined before the connection exists). */
export function storesPart(node: () => RunwayNode, pool: StepPool): StoresPart {
  let definitions: DefinitionStore | undefined;
  let memories: RunMemories | undefined;
  let live: LiveRunIndex | undefined;
  return {
    definitions: () => (definitions ??= new DefinitionStore(node().nc, () => pool.handlerNames())),
    memories: () => (memories ??= new RunMemories({ nc: node().nc, partitions: node().topology.partitions, kind: RUN_KIND })),
    memoriesHeld: () => memories?.size ?? 0,
    live: () => (live ??= new LiveRunIndex(node().nc, node().topology.partitions)),
  };
}

/** The run actor and the tenant actor, wired to the node's stores and engine. */
export function domainActors(config: RunwayNodeConfig, parts: Parts, stores: StoresPart): ActorDefinition[] {
  const node = () => parts.node!();
  const engine = () => parts.services?.engine;
  const retention = config.endedRunRetentionMs !== undefined ? { endedRunRetentionMs: config.endedRunRetentionMs } : {};
  return [
    runActor(
      {
        planOf: (digest) => stores.definitions().planOf(digest),
        parentOf: (parent, child) => readParent(node().nc, node().topology.partitions, parent, child),
        tenantGate: (tenant) => readTenantGate(node().nc, node().topology.partitions, tenant),
        memories: {
          of: (run, pending) => stores.memories().of(run, pending),
          stored: (id, facts) => stores.memories().stored(id, facts),
          forget: (id) => stores.memories().forget(id),
        },
        alive: (run) => [...(engine()?.executor.alive(run) ?? []), ...(engine()?.dispatcher?.alive(run) ?? [])],
      },
      {
        ...(config.stepLeaseTtlMs ? { leaseTtlMs: config.stepLeaseTtlMs } : {}),
        expansionAdmission: config.expansionAdmission !== false,
        ...(config.sweep ? { sweep: config.sweep } : {}),
        ...(config.waitGraceMs !== undefined ? { waitGraceMs: config.waitGraceMs } : {}),
        live: stores.live,
        ...(parts.traces ? { spans: parts.traces } : {}),
      },
    ),
    tenantActor({ nc: () => node().nc, partitions: () => node().topology.partitions, host: () => node().host, ...retention }),
  ];
}

/** The in-process receivers of the run actor's `runway.local` effects, one per channel of its typed map. */
export function localReceivers(parts: Parts, metrics: NodeMetrics, logger: Logger): LocalReceivers<RunLocalChannels> {
  const engine = () => parts.services?.engine;
  return {
    // A ready attempt goes to the fair scheduler, or (no scheduler) straight to the executor.
    [STEP_READY]: (ticket) => {
      const e = engine();
      if (e?.dispatcher) e.dispatcher.offer(ticket);
      else e?.executor.execute(ticket.request);
    },
    [STEP_LAPSED]: (lapsed) => engine()?.dispatcher?.done(lapsed.ticket),
    [STEP_ABORT]: (abort) => {
      engine()?.dispatcher?.drop(abort);
      engine()?.executor.abort(abort);
    },
    // A task a step waits on is due a poll: asked from here, off the actor's lane.
    [TASK_POLL]: (poll) =>
      void engine()
        ?.executor.pollTask(poll)
        .catch((err: unknown) => logger.warn("task poll failed", { error: String(err) })),
    [METRICS_CHANNEL]: (p) => {
      metrics.inc(p.counter, MACHINE_COUNTERS[p.counter], {
        ...(p.tenant ? { tenant: p.tenant } : {}),
        ...("action" in p && p.action ? { action: p.action } : {}),
      });
    },
  };
}

/** Recovery of a partition's in-flight attempts once this node serves it. */
export function recoverOnServe(node: () => RunwayNode, stores: StoresPart, metrics: NodeMetrics, clock: Clock, logger: Logger): NodeConfig["onServe"] {
  return async (partition, log) => {
    // Not awaited: the mailbox starts while in-flight attempts are being recovered.
    void recoverPartitionPatiently(
      {
        nc: node().nc,
        host: node().host,
        logger,
        live: stores.live(),
        memories: stores.memories(),
        now: () => clock.now(),
        serving: (p, log) => node().host.logOf(p) === log && !log.fenced,
      },
      partition,
      log,
    )
      .then((n) => n > 0 && metrics.inc("recovered_runs", "runs whose in-flight attempts were recovered after a partition claim", {}, n))
      .catch((err) => logger.error("recovery failed", { partition, error: String(err) }));
  };
}

/** The services in the order they need each other: tenants, the engine, the sweeper, runs; then their metrics. */
export function servicesPart(config: RunwayNodeConfig, deps: StageDeps, tools: ToolsPart): ServicesPart {
  const { self, stores, pool, metrics, clock } = deps;
  const tenants = new TenantService({
    nc: self().nc,
    partitions: self().topology.partitions,
    mailbox: self().mailbox,
    host: self().host,
    now: () => clock.now(),
  });
  const engine = enginePart(config, deps, tools, tenants);
  const sweeper = sweeperPart(config, deps, tenants, engine);
  tenants.onLoaded(() => engine.dispatcher?.policyChanged());
  const runs = new RunService({
    nc: self().nc,
    partitions: self().topology.partitions,
    mailbox: self().mailbox,
    host: self().host,
    definitions: stores.definitions(),
    tenants,
    live: stores.live(),
    now: () => clock.now(),
  });
  metrics.addSource({
    collect: () => [
      ...collectNodeMetrics(self(), engine.executor, pool.pool),
      ...collectSchedulerMetrics(engine.dispatcher, clock.now()),
      ...collectRunMetrics(runs.early.stats, sweeper.totals, stores.live().memberListings, stores.memoriesHeld()),
    ],
  });
  return { tenants, engine, sweeper, runs };
}

/**
 * Whether this node still holds a run's partition, from its liveness lease (membership starts
 * after the executor: read at each question). A hold is trusted up to a quarter of the lease
 * (at most 1 s) before it ends; a stale one waits up to a lease for the renewals to tell.
 */
function partitionHold(config: RunwayNodeConfig, { self, clock }: StageDeps): PartitionHold {
  const ttl = config.leaseTtlMs ?? DEFAULT_LEASE_TTL_MS;
  return new PartitionHold(
    {
      holdsUntil: () => self().membership.holdsUntil(),
      lapses: () => self().membership.lapses,
      onRenewal: (listener) => self().membership.onRenewal(listener),
      epochOf: (partition) => self().host.logOf(partition)?.epoch,
      partitionOfRun: (run) => self().host.partitionOf({ kind: RUN_KIND, id: run }),
      monotonic: () => clock.monotonic(),
    },
    { marginMs: Math.min(1_000, Math.floor(ttl / 4)), maxWaitMs: ttl },
  );
}

/** The step executor and, unless `scheduler: false`, the fair scheduler in front of it. */
export function enginePart(config: RunwayNodeConfig, deps: StageDeps, tools: ToolsPart, tenants: TenantService): EnginePart {
  const { self, pool, clock, logger } = deps;
  let dispatcher: Dispatcher | undefined;
  // One cluster-wide quota gate: the scheduler's grants and a tool server's samplings count in the same windows.
  const quota = new QuotaGate(self().nc, config.quotaWindowMs ?? 60_000);
  const executor = new StepExecutor({
    nc: self().nc,
    pool: pool.pool,
    host: self().host,
    mailbox: self().mailbox,
    logger,
    onDone: (r) => dispatcher?.done(r.ticket),
    onReturned: (r) => dispatcher?.free(r.ticket),
    now: () => clock.now(),
    // `a2a` nodes' calls go to the A2A client; every other tool call to the MCP gateway.
    tools: withA2A(tools.gateway, new A2ACaller({ ...(config.a2a?.credentials ? { credentials: config.a2a.credentials } : {}), now: () => clock.now() })),
    // The model store starts in its own stage: read through `parts` at each call.
    models: modelPortOf({ provider: (tenant, name) => deps.parts.models?.provider(tenant, name) ?? Promise.resolve(undefined) }),
    replay: new ReplayTools(self().nc, self().topology.partitions),
    meter: new UsageMeter(self().nc),
    quota: async (tenant, model, tokens, now) => {
      const q = tenants.policy(tenant)?.provider_quotas[model];
      if (!q) return { ok: true };
      const taken = await quota.take(tenant, model, { requests: q.requests_per_minute, tokens: q.tokens_per_minute }, tokens, now);
      if (taken.ok) return { ok: true };
      return { ok: false, detail: "unavailable" in taken ? taken.unavailable : `${taken.count} requests and ${taken.tokens} tokens in this window` };
    },
    ...(config.decorate?.report ? { decorateReport: config.decorate.report } : {}),
    ...(config.onHeartbeatSettled ? { onHeartbeatSettled: config.onHeartbeatSettled } : {}),
    ...(deps.parts.traces ? { spans: deps.parts.traces } : {}),
    hold: partitionHold(config, deps),
  });
  if (config.scheduler !== false) {
    const settings = { ...DEFAULT_SCHEDULER, slots: (config.threads ?? 2) * pool.tasksPerThread, ...(config.scheduler ?? {}) };
    dispatcher = new Dispatcher({
      execute: (request) => executor.execute(request),
      clock,
      logger,
      config: settings,
      // A tenant this node has not read yet is scheduled once its record arrives (one KV
      // read): never with default settings, so a killed tenant is never granted here.
      policy: (t) => tenants.policy(t),
      quotaOf: (t, provider) => {
        const q = tenants.policy(t)?.provider_quotas[provider];
        // A step's declared cost is its estimated tokens.
        return q ? { requests: q.requests_per_minute, tokens: q.tokens_per_minute } : undefined;
      },
      quota,
    });
  }
  return { executor, dispatcher };
}

/** The recovery sweep over the runs this node serves, with the compaction of ended runs. */
export function sweeperPart(config: RunwayNodeConfig, deps: StageDeps, tenants: TenantService, engine: EnginePart): Sweeper {
  const { self, stores, metrics, clock, logger } = deps;
  return new Sweeper({
    nc: self().nc,
    host: self().host,
    mailbox: self().mailbox,
    partitions: self().topology.partitions,
    clock,
    logger,
    ...(config.sweepMaxPerPass !== undefined ? { maxPerPass: config.sweepMaxPerPass } : {}),
    held: (run) => engine.dispatcher?.held(run) ?? [],
    ...(config.sweep ? { settings: config.sweep } : {}),
    live: stores.live(),
    members: (tenant) => tenants.members(tenant),
    compaction: new EndedRunCompaction({
      nc: self().nc,
      partitions: self().topology.partitions,
      owns: (p) => self().host.owns(p),
      ...(config.endedRunRetentionMs !== undefined ? { retentionMs: config.endedRunRetentionMs } : {}),
    }),
    onAction: (action, tenant) => metrics.inc("sweep_actions", MACHINE_COUNTERS.sweep_actions!, { tenant, action }),
  });
}

/**
 * The tenants' schedules: the API's service, and the loop that starts the firings of the
 * schedules whose key's partition this node owns (a new owner catches up after a failover).
 */
export function schedulesPart(deps: StageDeps, services: ServicesPart): SchedulesPart {
  const { self, stores, metrics, clock, logger } = deps;
  const store = new ScheduleStore(self().nc);
  const partitions = self().topology.partitions;
  return {
    service: new ScheduleService({
      store,
      definitions: stores.definitions(),
      interactiveSources: (tenant) => services.tenants.policy(tenant)?.interactive_sources,
      now: () => clock.now(),
    }),
    firer: new ScheduleFirer({
      store,
      owns: (key) => self().host.owns(partitionOf(key, partitions)),
      start: async (tenant, request) => {
        const answer = await services.runs.start(tenant, request);
        metrics.inc("schedule_firings", "firings of schedules this node started, by the start's answer", { tenant, outcome: answer.outcome });
        return answer;
      },
      clock,
      logger,
    }),
  };
}

/** Prometheus text metrics on http://127.0.0.1:<port>/metrics. */
export async function serveMetrics(port: number, metrics: NodeMetrics): Promise<Server> {
  const http = createServer((req, res) => {
    if (req.url !== "/metrics") return void res.writeHead(404).end();
    res.writeHead(200, { "content-type": "text/plain; version=0.0.4" }).end(metrics.prometheus());
  });
  await new Promise<void>((r) => http.listen(port, "127.0.0.1", r));
  return http;
}

export function decorateLocal<M>(decorate: NodeDecorators | undefined, receivers: LocalReceivers<M>): LocalReceivers<M> {
  const wrap = decorate?.local;
  if (!wrap) return receivers;
  const wrapped = { ...receivers };
  for (const channel of Object.keys(receivers) as (keyof M & string)[]) wrapped[channel] = wrap(channel, receivers[channel]);
  return wrapped;
}
