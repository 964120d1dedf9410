import { resolve } from "node:path";
import { DefinitionStore, ensureDomainTopology, recoverPartition, runActor, RunService, StepExecutor, TenantDirectory } from "../actors/index.js";
import { startApi } from "../gateways/index.js";
import { STEP_EXECUTE, type ExecuteRequest } from "../machines/index.js";
import { createLogger, startNode, StepPool, systemClock, type Clock, type ConnectionConfig, type Logger, type MicroService, type RunwayNode } from "../runtime/index.js";

export interface RunwayNodeConfig {
  connection: ConnectionConfig;
  name: string;
  /** Handler modules (paths), each `export const handlers = { name: async (ctx) => … }`. */
  handlers: readonly string[];
  threads?: number;
  replicas?: number;
  leaseTtlMs?: number;
  clock?: Clock;
  logger?: Logger;
  /** Serve the `runway` micro service from this node (default true). */
  api?: boolean;
  /** How long an attempt's lease lasts past its last heartbeat (default: the node's timeout + 5 s). */
  stepLeaseTtlMs?: number;
}

export interface RunwayWorkflowNode {
  node: RunwayNode;
  definitions: DefinitionStore;
  tenants: TenantDirectory;
  runs: RunService;
  executor: StepExecutor;
  pool: StepPool;
  stop(): Promise<void>;
}

/**
 * A workflow node: the generic runtime node plus the run actor, its step executor (a Piscina
 * pool), recovery of in-flight attempts when a partition is claimed, and the `runway` API.
 * Stages start in order and stop in reverse: the API stops taking requests before the
 * partitions are handed back, and the pool is destroyed last.
 */
export async function startRunwayNode(config: RunwayNodeConfig): Promise<RunwayWorkflowNode> {
  const logger = config.logger ?? createLogger(`node:${config.name}`);
  const clock = config.clock ?? systemClock;
  const pool = new StepPool({ handlerModules: config.handlers.map((h) => resolve(h)), threads: config.threads ?? 2, onHeartbeat: (ref) => executor?.heartbeat(ref) });
  let definitions: DefinitionStore | undefined;
  let executor: StepExecutor | undefined;
  let tenants: TenantDirectory | undefined;
  let runs: RunService | undefined;
  let api: MicroService | undefined;
  let node!: () => RunwayNode;
  // The run actor is defined before the connection exists; the store is made on first use.
  const definitionsOf = () => (definitions ??= new DefinitionStore(node().nc, () => pool.handlerNames()));

  const started = await startNode({
    connection: config.connection,
    name: config.name,
    actors: [runActor({ planOf: (digest) => definitionsOf().planOf(digest) }, config.stepLeaseTtlMs ? { leaseTtlMs: config.stepLeaseTtlMs } : {})],
    topology: { replicas: config.replicas ?? 1 },
    ...(config.leaseTtlMs !== undefined ? { leaseTtlMs: config.leaseTtlMs } : {}),
    clock,
    logger,
    local: { [STEP_EXECUTE]: (payload) => executor?.execute(payload as ExecuteRequest) },
    onServe: async (partition, log) => {
      // Not awaited: the mailbox starts while in-flight attempts are being recovered.
      void recoverPartition({ nc: node().nc, host: node().host, logger }, partition, log).catch((err) => logger.error("recovery failed", { partition, error: String(err) }));
    },
    stages: (self) => {
      node = self;
      return [
        { name: "domain-topology", start: () => ensureDomainTopology(self().nc, config.replicas ?? 1) },
        { name: "step-pool", start: () => pool.start(), stop: () => pool.destroy() },
        {
          name: "services",
          start: () => {
            tenants = new TenantDirectory(self().nc);
            executor = new StepExecutor({ nc: self().nc, pool, host: self().host, mailbox: self().mailbox, logger });
            runs = new RunService({ nc: self().nc, partitions: self().topology.partitions, mailbox: self().mailbox, definitions: definitionsOf(), tenants });
          },
        },
        {
          name: "api",
          start: async () => {
            if (config.api === false) return;
            api = await startApi(self().nc, { tenants: tenants!, definitions: definitionsOf(), runs: runs!, now: () => clock.now() });
          },
          stop: () => api?.stop(),
        },
      ];
    },
  });
  return { node: started, definitions: definitionsOf(), tenants: tenants!, runs: runs!, executor: executor!, pool, stop: () => started.stop() };
}
