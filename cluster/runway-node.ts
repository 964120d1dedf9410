import { resolve } from "node:path";
import { createServer, type Server } from "node:http";
import {
  DefinitionStore,
  DEFAULT_SCHEDULER,
  LiveRunIndex,
  Dispatcher,
  type HeartbeatOutcome,
  type StepReport,
  QuotaGate,
  UsageMeter,
  ensureDomainTopology,
  NodeMetrics,
  EndedRunCompaction,
  readParent,
  RunMemories,
  RUN_KIND,
  recoverPartitionPatiently,
  runActor,
  ReplayTools,
  RunReplays,
  RunService,
  StepExecutor,
  Sweeper,
  tenantActor,
  TenantService,
} from "../actors/index.js";
import { ensureToolsBucket, startApi, ToolConnections, ToolGateway, ToolRegistry } from "../gateways/index.js";
import { collectNodeMetrics, collectRunMetrics, collectSchedulerMetrics } from "./node-metrics.js";
import {
  METRICS_CHANNEL,
  STEP_ABORT,
  TASK_POLL,
  STEP_LAPSED,
  STEP_READY,
  type MachineCounter,
  type RunLocalChannels,
  type SchedulerConfig,
  type SweepSettings,
} from "../machines/index.js";
import {
  createLogger,
  startNode,
  StepPool,
  systemClock,
  type LocalReceiver,
  type LocalReceivers,
  type Clock,
  type ConnectionConfig,
  type HostDecorators,
  type Logger,
  type MicroService,
  type RunwayNode,
} from "../runtime/index.js";

export interface RunwayNodeConfig {
  connection: ConnectionConfig;
  name: string;
  /** Handler modules (paths), each `export const handlers = { name: async (ctx) => … }`. */
  handlers: readonly string[];
  threads?: number;
  /** Attempts one pool thread interleaves (default 8): agent handlers mostly await I/O. */
  tasksPerThread?: number;
  replicas?: number;
  leaseTtlMs?: number;
  clock?: Clock;
  logger?: Logger;
  /** Serve the `runway` micro service from this node (default true). */
  api?: boolean;
  /** How long an attempt's lease lasts past its last heartbeat (default: the node's timeout + 5 s). */
  stepLeaseTtlMs?: number;
  /** Serve Prometheus text metrics on http://127.0.0.1:<port>/metrics. */
  metricsPort?: number;
  /** Fair scheduler settings (worker slots, interactive reserve, migration cap, aging); `false` leases at once. */
  scheduler?: Partial<SchedulerConfig> | false;
  /** Window of provider quotas (default one minute: `requests_per_minute` per window). */
  quotaWindowMs?: number;
  /** How long a parked run may stay parked past its last wake-up before it is abandoned (default 60 s). */
  waitGraceMs?: number;
  /** How often the recovery sweep passes over the runs this node serves (default 60 s); `false`: only on demand (`sweeper.pass()`). */
  sweepIntervalMs?: number | false;
  /** Maps start their items only once the run's tenant admitted the expansion (default true). */
  expansionAdmission?: boolean;
  /** How old a lost lease (past its expiry) or a lost offer must be before the sweep repairs it (default 5 s and 60 s). */
  sweep?: SweepSettings;
  /** Runs one sweep pass reads at most (default 5,000); the next pass goes on from there. */
  sweepMaxPerPass?: number;
  /**
   * How long an ended run is kept whole (default 7 days): then its record and journal are
   * removed by the recovery sweep and only its final summary in the runs index is left; its
   * tenant forgets it then too (a duplicate admission of it is answered rather than counted until then).
   */
  endedRunRetentionMs?: number;
  /**
   * Wrappers of the node's ports, applied before use: the log its actors write through, the
   * in-process receivers of `runway.local` effects (an attempt handed to the executor, a ticket
   * offered to the scheduler, …) and the executor's report path. Tests decorate them to inject
   * faults (a lost hand-over, a lost report); production passes none.
   */
  decorate?: NodeDecorators;
  /** Deliveries after which a command that faults its actor is dead-lettered (default 5). */
  maxDeliveries?: number;
  /** Observes each heartbeat renewal: ms from dispatch to the run's stored answer (the `heartbeats` benchmark). */
  onHeartbeatSettled?(ms: number, outcome: HeartbeatOutcome): void;
}

/** Receives one `runway.local` channel's payloads in this process (the runtime's). */
export type { LocalReceiver };

/** The node's ports a test may wrap (Orleans' FaultInjectionGrainStorage style: faults live in the test, not here). */
export interface NodeDecorators extends HostDecorators {
  /** Wraps the receiver of `runway.local` effects on `channel`. */
  local?<P>(channel: string, receiver: LocalReceiver<P>): LocalReceiver<P>;
  /** Wraps the executor's report path (step results and heartbeats to their runs). */
  report?(report: StepReport): StepReport;
}

export interface RunwayWorkflowNode {
  node: RunwayNode;
  definitions: DefinitionStore;
  tenants: TenantService;
  runs: RunService;
  executor: StepExecutor;
  pool: StepPool;
  metrics: NodeMetrics;
  dispatcher: Dispatcher | undefined;
  sweeper: Sweeper;
  stop(): Promise<void>;
}

/** Help text of the counters the run machine reports on its metrics channel. */
const MACHINE_COUNTERS: Record<MachineCounter["counter"], string> = {
  lease_expiries: "attempt leases that lapsed without a heartbeat",
  sweep_actions: "repairs made by the recovery sweep, by action",
};

/**
 * A workflow node: the generic runtime node plus the run actor, its step executor (a Piscina
 * pool), recovery of in-flight attempts when a partition is claimed, and the `runway` API.
 * Stages start in order and stop in reverse: the API stops taking requests before the
 * partitions are handed back, and the pool is destroyed last. The pool's threads start first
 * and are waited for only after ownership: a restarted node recovers its partitions while they
 * load.
 */
export async function startRunwayNode(config: RunwayNodeConfig): Promise<RunwayWorkflowNode> {
  const logger = config.logger ?? createLogger(`node:${config.name}`);
  const clock = config.clock ?? systemClock;
  // Every scheduler slot can run at once: the scheduler, not the pool's FIFO, decides who waits.
  const tasksPerThread = config.tasksPerThread ?? 8;
  const pool = new StepPool({
    handlerModules: config.handlers.map((h) => resolve(h)),
    threads: config.threads ?? 2,
    tasksPerThread,
    onHeartbeat: (ref) => executor?.heartbeat(ref),
    onToolCall: (ref, call) => (executor ? executor.toolCallOf(ref, call) : Promise.resolve({ outcome: "stopped" as const, reason: "node_starting" })),
  });
  let definitions: DefinitionStore | undefined;
  let executor: StepExecutor | undefined;
  const toolConnections = new ToolConnections();
  let tools: { registry: ToolRegistry; gateway: ToolGateway } | undefined;
  let tenants: TenantService | undefined;
  let runs: RunService | undefined;
  let api: MicroService | undefined;
  let http: Server | undefined;
  let dispatcher: Dispatcher | undefined;
  let sweeper: Sweeper | undefined;
  const scheduled = config.scheduler !== false;
  const metrics = new NodeMetrics(config.name);
  let node!: () => RunwayNode;
  // The run actor is defined before the connection exists; the store is made on first use.
  const definitionsOf = () => (definitions ??= new DefinitionStore(node().nc, () => pool.handlerNames()));
  let memories: RunMemories | undefined;
  const memoriesOf = () => (memories ??= new RunMemories({ nc: node().nc, partitions: node().topology.partitions, kind: RUN_KIND }));
  let liveIndex: LiveRunIndex | undefined;
  const live = () => (liveIndex ??= new LiveRunIndex(node().nc, node().topology.partitions));
  const retention = config.endedRunRetentionMs !== undefined ? { endedRunRetentionMs: config.endedRunRetentionMs } : {};
  // The pool's threads load the handler modules while the node connects and checks its streams
  // (a third of a restart, done one after the other); its stage waits for them.
  const poolStarting = pool.start().then(
    () => undefined,
    (err: unknown) => err,
  );

  const started = await startNode({
    connection: config.connection,
    name: config.name,
    actors: [
      runActor(
        {
          planOf: (digest) => definitionsOf().planOf(digest),
          parentOf: (parent, child) => readParent(node().nc, node().topology.partitions, parent, child),
          memories: {
            of: (run, pending) => memoriesOf().of(run, pending),
            stored: (id, facts) => memoriesOf().stored(id, facts),
            forget: (id) => memoriesOf().forget(id),
          },
          alive: (run) => [...(executor?.alive(run) ?? []), ...(dispatcher?.alive(run) ?? [])],
        },
        {
          ...(config.stepLeaseTtlMs ? { leaseTtlMs: config.stepLeaseTtlMs } : {}),
          expansionAdmission: config.expansionAdmission !== false,
          ...(config.sweep ? { sweep: config.sweep } : {}),
          ...(config.waitGraceMs !== undefined ? { waitGraceMs: config.waitGraceMs } : {}),
          live,
        },
      ),
      tenantActor({ nc: () => node().nc, partitions: () => node().topology.partitions, host: () => node().host, ...retention }),
    ],
    topology: { replicas: config.replicas ?? 1 },
    ...(config.leaseTtlMs !== undefined ? { leaseTtlMs: config.leaseTtlMs } : {}),
    ...(config.decorate?.log ? { decorate: { log: config.decorate.log } } : {}),
    ...(config.maxDeliveries !== undefined ? { maxDeliveries: config.maxDeliveries } : {}),
    clock,
    logger,
    local: decorateLocal<RunLocalChannels>(config.decorate, {
      // A ready attempt goes to the fair scheduler, or (no scheduler) straight to the executor.
      [STEP_READY]: (ticket) => {
        if (dispatcher) dispatcher.offer(ticket);
        else executor?.execute(ticket.request);
      },
      [STEP_LAPSED]: (lapsed) => dispatcher?.done(lapsed.ticket),
      [STEP_ABORT]: (abort) => {
        dispatcher?.drop(abort);
        executor?.abort(abort);
      },
      // A task a step waits on is due a poll: asked from here, off the actor's lane.
      [TASK_POLL]: (poll) => void executor?.pollTask(poll).catch((err: unknown) => logger.warn("task poll failed", { error: String(err) })),
      [METRICS_CHANNEL]: (p) => {
        metrics.inc(p.counter, MACHINE_COUNTERS[p.counter], {
          ...(p.tenant ? { tenant: p.tenant } : {}),
          ...("action" in p && p.action ? { action: p.action } : {}),
        });
      },
    }),
    onServe: async (partition, log) => {
      // Not awaited: the mailbox starts while in-flight attempts are being recovered.
      void recoverPartitionPatiently(
        {
          nc: node().nc,
          host: node().host,
          logger,
          live: live(),
          memories: memoriesOf(),
          now: () => clock.now(),
          serving: (p, log) => node().host.logOf(p) === log && !log.fenced,
        },
        partition,
        log,
      )
        .then((n) => n > 0 && metrics.inc("recovered_runs", "runs whose in-flight attempts were recovered after a partition claim", {}, n))
        .catch((err) => logger.error("recovery failed", { partition, error: String(err) }));
    },
    stages: (self) => {
      node = self;
      return [
        {
          name: "domain-topology",
          start: async () => {
            await ensureDomainTopology(self().nc, config.replicas ?? 1);
            await ensureToolsBucket(self().nc, config.replicas ?? 1);
          },
        },
        {
          name: "tool-gateway",
          start: () => {
            const registry = new ToolRegistry(self().nc);
            tools = { registry, gateway: new ToolGateway(registry, toolConnections) };
          },
          // Stdio tool servers are this node's children: they go with it.
          stop: async () => {
            await tools?.registry.close();
            await toolConnections.close();
          },
        },
        // Started above; destroyed last, once the partitions are handed back.
        { name: "step-pool", start: () => undefined, stop: () => pool.destroy() },
        {
          name: "services",
          start: () => {
            tenants = new TenantService({
              nc: self().nc,
              partitions: self().topology.partitions,
              mailbox: self().mailbox,
              host: self().host,
              now: () => clock.now(),
            });
            executor = new StepExecutor({
              nc: self().nc,
              pool,
              host: self().host,
              mailbox: self().mailbox,
              logger,
              onDone: (r) => dispatcher?.done(r.ticket),
              onReturned: (r) => dispatcher?.free(r.ticket),
              now: () => clock.now(),
              tools: tools!.gateway,
              replay: new ReplayTools(self().nc, self().topology.partitions),
              meter: new UsageMeter(self().nc),
              ...(config.decorate?.report ? { decorateReport: config.decorate.report } : {}),
              ...(config.onHeartbeatSettled ? { onHeartbeatSettled: config.onHeartbeatSettled } : {}),
            });
            if (scheduled) {
              const settings = { ...DEFAULT_SCHEDULER, slots: (config.threads ?? 2) * tasksPerThread, ...(config.scheduler || {}) };
              dispatcher = new Dispatcher({
                execute: (request) => executor!.execute(request),
                clock,
                logger,
                config: settings,
                // A tenant this node has not read yet is scheduled once its record arrives (one KV
                // read): never with default settings, so a killed tenant is never granted here.
                policy: (t) => tenants!.policy(t),
                quotaOf: (t, provider) => {
                  const q = tenants!.policy(t)?.provider_quotas[provider];
                  // A step's declared cost is its estimated tokens.
                  return q ? { requests: q.requests_per_minute, tokens: q.tokens_per_minute } : undefined;
                },
                quota: new QuotaGate(self().nc, config.quotaWindowMs ?? 60_000),
              });
            }
            sweeper = new Sweeper({
              nc: self().nc,
              host: self().host,
              mailbox: self().mailbox,
              partitions: self().topology.partitions,
              clock,
              logger,
              ...(config.sweepMaxPerPass !== undefined ? { maxPerPass: config.sweepMaxPerPass } : {}),
              held: (run) => dispatcher?.held(run) ?? [],
              ...(config.sweep ? { settings: config.sweep } : {}),
              live: live(),
              members: (tenant) => tenants!.members(tenant),
              compaction: new EndedRunCompaction({
                nc: self().nc,
                partitions: self().topology.partitions,
                owns: (p) => self().host.owns(p),
                ...(config.endedRunRetentionMs !== undefined ? { retentionMs: config.endedRunRetentionMs } : {}),
              }),
              onAction: (action, tenant) => metrics.inc("sweep_actions", MACHINE_COUNTERS.sweep_actions!, { tenant, action }),
            });
            tenants.onLoaded(() => dispatcher?.policyChanged());
            runs = new RunService({
              nc: self().nc,
              partitions: self().topology.partitions,
              mailbox: self().mailbox,
              host: self().host,
              definitions: definitionsOf(),
              tenants,
              live: live(),
              now: () => clock.now(),
            });
            metrics.addSource({
              collect: () => [
                ...collectNodeMetrics(self(), executor!, pool),
                ...collectSchedulerMetrics(dispatcher, clock.now()),
                ...collectRunMetrics(runs!.early.stats, sweeper!.totals, live().memberListings, memories?.size ?? 0),
              ],
            });
          },
        },
        {
          name: "metrics-http",
          start: async () => {
            if (config.metricsPort === undefined) return;
            http = createServer((req, res) => {
              if (req.url !== "/metrics") return void res.writeHead(404).end();
              res.writeHead(200, { "content-type": "text/plain; version=0.0.4" }).end(metrics.prometheus());
            });
            await new Promise<void>((r) => http!.listen(config.metricsPort, "127.0.0.1", r));
          },
          stop: () => new Promise<void>((r) => (http ? http.close(() => r()) : r())),
        },
        {
          name: "dispatcher",
          start: () => undefined,
          stop: () => dispatcher?.stop(),
        },
        {
          name: "sweeper",
          start: () => {
            if (config.sweepIntervalMs !== false) sweeper!.start(config.sweepIntervalMs ?? 60_000);
          },
          stop: () => sweeper?.stop(),
        },
      ];
    },
    // Claims and their recovery start before these: a restarted node's recovered attempts wait
    // in the pool for its threads rather than the claims waiting for them.
    serving: (self) => [
      {
        name: "step-pool-ready",
        start: async () => {
          const failed = await poolStarting;
          if (failed !== undefined) throw failed;
        },
      },
      {
        name: "api",
        start: async () => {
          if (config.api === false) return;
          api = await startApi(self().nc, {
            tenants: tenants!,
            definitions: definitionsOf(),
            runs: runs!,
            metrics,
            sweeper: sweeper!,
            tools: tools!,
            replays: new RunReplays({ nc: self().nc, partitions: self().topology.partitions, runs: runs! }),
            now: () => clock.now(),
          });
        },
        stop: () => api?.stop(),
      },
    ],
  }).catch(async (err: unknown) => {
    // A node that failed to start leaves no threads behind: its step-pool stage may not have run.
    await poolStarting;
    await pool.destroy();
    throw err;
  });
  return {
    node: started,
    definitions: definitionsOf(),
    tenants: tenants!,
    runs: runs!,
    executor: executor!,
    pool,
    metrics,
    dispatcher,
    sweeper: sweeper!,
    stop: () => started.stop(),
  };
}

function decorateLocal<M>(decorate: NodeDecorators | undefined, receivers: LocalReceivers<M>): LocalReceivers<M> {
  const wrap = decorate?.local;
  if (!wrap) return receivers;
  const wrapped = { ...receivers };
  for (const channel of Object.keys(receivers) as (keyof M & string)[]) wrapped[channel] = wrap(channel, receivers[channel]);
  return wrapped;
}
