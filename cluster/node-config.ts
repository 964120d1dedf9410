import type { DefinitionStore, Dispatcher, HeartbeatOutcome, NodeMetrics, StepExecutor, StepReport, Sweeper } from "../actors/index.js";
import type { ModelStore, RunService, TenantService, TracesConfig } from "../gateways/index.js";
import type { SchedulerConfig, SweepSettings } from "../machines/index.js";
import type { Clock, LocalReceiver, ConnectionConfig, HostDecorators, Logger, RunwayNode, StepPool } from "../runtime/index.js";

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
  /**
   * Serve HTTP: the tenants' exposed A2A agents at `/a2a/<tenant>/<agent>` (docs/a2a.md). `port`
   * 0 takes a free one; `host` defaults to 127.0.0.1; `publicUrl` is the base the agents' cards
   * name (default `http://<host>:<port>`). `push`: the timings of push-notification delivery
   * (gateways/a2a/push.ts; defaults: 15 s lease, 1 s journal poll, 5 s scan, retries from 250 ms to 30 s, 20 tries).
   */
  http?: {
    port: number;
    host?: string;
    publicUrl?: string;
    /** How often a task's waiting call reads its run's journal when no live event came (default 1 s; tests lengthen it to show the live events suffice). */
    taskPollMs?: number;
    push?: { leaseMs?: number; pollMs?: number; scanMs?: number; retryBaseMs?: number; retryMaxMs?: number; maxAttempts?: number; timeoutMs?: number };
  };
  /**
   * A `runway creds` directory, when the deployment runs with credentials on: a request a tenant's
   * key sends is answered as that key (initiator, decider, lane; docs/security.md).
   */
  credentialsDir?: string;
  /**
   * The A2A client of `a2a` nodes: `credentials` are the bearer tokens of the remote agents this
   * node's runs call, by `<tenant>/<auth name>` (a node's `auth` names one; docs/a2a.md#calling-remote-agents).
   */
  a2a?: { credentials?: Readonly<Record<string, string>> };
  /** Serve Prometheus text metrics on http://127.0.0.1:<port>/metrics. */
  metricsPort?: number;
  /**
   * Export OpenTelemetry trace spans over OTLP/HTTP (docs/traces.md). Absent (the default):
   * tracing is off, the SDK is never loaded and a step does no tracing work.
   */
  traces?: TracesConfig;
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
  /** The base URL of this node's HTTP server (`http` set), e.g. `http://127.0.0.1:8080`. */
  httpUrl: string | undefined;
  /** The tenants' model providers (this node's watched copy). */
  models: ModelStore;
  stop(): Promise<void>;
}
