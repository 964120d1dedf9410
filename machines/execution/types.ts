import { z } from "zod";
import { TokenSchema } from "../tenant/index.js";
import type { RunLifecycle } from "../run/index.js";
import type { StepError, StepState } from "../step/index.js";
import type { NodeStatus, Plan } from "../workflow/index.js";

/**
 * The state of one run, as its actor stores it. Steps are not separate records: a step is an
 * actor embedded in its run (its own machine, `machines/step`, its own transitions), stored in
 * the run's record so that a step's result and the readiness it unlocks are one durable write.
 */
export interface RunError {
  code: string;
  message: string;
  retryable?: boolean;
  nodes?: string[];
}

export interface ItemRun {
  step: StepState;
  output?: unknown;
  /** While leased or running: when the lease lapses unless a heartbeat renews it. */
  lease_expires_at?: number;
  /** The attempt offered to the node's scheduler and not yet leased. */
  offered?: number;
  /** When it was offered (a sweep offers again an offer lost on its way). */
  offered_at?: number;
  /** The sweep offered this attempt again; lost a second time, it fails `dispatch_lost`. */
  reoffered?: boolean;
}

export interface NodeRun {
  s: NodeStatus;
  /** Code nodes: the attempt lifecycle. */
  step?: StepState;
  /** Code nodes, while leased or running: when the lease lapses unless a heartbeat renews it. */
  lease_expires_at?: number;
  /** Code nodes: the attempt offered to the node's scheduler and not yet leased. */
  offered?: number;
  offered_at?: number;
  reoffered?: boolean;
  /** Map nodes: one attempt lifecycle per item, in input order. */
  items?: ItemRun[];
  /** Map nodes: the combined size (JSON, UTF-8) of the item outputs so far (bounded by MAP_OUTPUT_LIMIT). */
  output_bytes?: number;
  output?: unknown;
  taken?: "then" | "else";
  child?: string;
  wake_at?: number;
  error?: RunError;
  /**
   * Map nodes under expansion admission: asked of the tenant (`pending`), admitted (its items
   * count against the tenant's active descendants), then `released` once the node settled.
   */
  expansion?: { state: "pending" | "admitted" | "released"; children: number; asked_at: number };
}

export type Lane = "interactive" | "batch" | "migration";

export interface DefinitionRef {
  name: string;
  version: number;
  digest: string;
}

export interface RunContext {
  id: string;
  tenant: string;
  root_run_id: string;
  parent_run_id: string | null;
  parent_node: string | null;
  depth: number;
  definition: DefinitionRef;
  source: string;
  start_key: string;
  lane: Lane;
  /** `queued`: created behind its tenant's concurrency caps; it starts on `run.admitted`. */
  admission?: "admitted" | "queued";
  /** The tenant's project the run counts under (absent: `default`). */
  project?: string;
  /** Scheduling priority of its attempts, 0–9 (absent: 5); a child's is never above its parent's. */
  priority?: number;
  /** Its attempts should be leased before this instant (ms); earlier deadlines go first at equal priority. */
  deadline?: number | null;
  input: unknown;
  lifecycle: RunLifecycle;
  created_at: number;
  cancellation_epoch: number;
  nodes: Record<string, NodeRun>;
  result: unknown;
  result_truncated: boolean;
  error: RunError | null;
  cancel: { reason: string; by: string; at: number } | null;
}

export interface ExecutionContext {
  run: RunContext | null;
}

/** What a run needs to be created; validated at the actor's mailbox. */
export const RunSeedSchema = z.object({
  id: z.string().min(1),
  tenant: z.string().min(1),
  root_run_id: z.string().min(1),
  parent_run_id: z.string().nullable(),
  parent_node: z.string().nullable(),
  depth: z.number().int().nonnegative(),
  definition: z.object({ name: z.string(), version: z.number().int().positive(), digest: z.string() }),
  source: z.string(),
  start_key: z.string(),
  /** A seed that names no lane is batch: a value nobody wrote never reads as interactive. */
  lane: z.enum(["interactive", "batch", "migration"]).default("batch"),
  admission: z.enum(["admitted", "queued"]).optional(),
  project: TokenSchema.optional(),
  priority: z.number().int().min(0).max(9).optional(),
  deadline: z.number().int().nonnegative().nullable().optional(),
  input: z.unknown(),
});
export type RunSeed = z.infer<typeof RunSeedSchema>;

const StepErrorShape = z.object({ code: z.string(), message: z.string(), retryable: z.boolean() });

/** Commands a run actor accepts (before the host adds `now` and `prepare` adds the plan). */
export const RunCommandSchema = z.discriminatedUnion("type", [
  z.object({ type: z.literal("run.create"), run: RunSeedSchema }),
  z.object({
    type: z.literal("step.result"),
    node: z.string(),
    item: z.number().int().nonnegative().optional(),
    attempt: z.number().int().positive(),
    lease_epoch: z.number().int().positive(),
    outcome: z.enum(["succeeded", "failed"]),
    output: z.unknown().optional(),
    error: StepErrorShape.optional(),
    /** The run's cancellation epoch when the attempt was dispatched. */
    cancellation_epoch: z.number().int().nonnegative().optional(),
  }),
  z.object({
    type: z.literal("timer.fired"),
    kind: z.enum(["retry", "sleep", "lease", "wait"]),
    node: z.string(),
    item: z.number().int().nonnegative().optional(),
    attempt: z.number().int().positive().optional(),
    lease_epoch: z.number().int().positive().optional(),
  }),
  z.object({
    type: z.literal("step.heartbeat"),
    node: z.string(),
    item: z.number().int().nonnegative().optional(),
    attempt: z.number().int().positive(),
    lease_epoch: z.number().int().positive(),
    cancellation_epoch: z.number().int().nonnegative().optional(),
  }),
  z.object({
    type: z.literal("child.settled"),
    node: z.string(),
    child: z.string(),
    status: z.enum(["succeeded", "failed", "cancelled"]),
    result: z.unknown().optional(),
    error: z.object({ code: z.string(), message: z.string() }).passthrough().optional(),
  }),
  z.object({ type: z.literal("run.cancel"), reason: z.string().max(1_000), by: z.string().max(200) }),
  /** The node's scheduler grants the offered attempt a worker slot: READY → LEASED, a new lease epoch. */
  z.object({ type: z.literal("step.lease"), node: z.string(), item: z.number().int().nonnegative().optional(), attempt: z.number().int().positive() }),
  z.object({
    type: z.literal("run.recover"),
    reason: z.string().max(200),
    /** Attempts still executing in the claiming process (it claimed its own partition again): not lost. */
    alive: z
      .array(
        z.object({
          node: z.string(),
          item: z.number().int().nonnegative().optional(),
          attempt: z.number().int().positive(),
          lease_epoch: z.number().int().positive(),
        }),
      )
      .max(10_000)
      .optional(),
  }),
  /** The tenant gave a queued run its slot. */
  z.object({ type: z.literal("run.admitted") }),
  /** A recovery sweep pass at `at` (the sweeper's clock): repairs what a lost clock or hand-over left (see `sweep.ts`). */
  z.object({ type: z.literal("run.sweep"), at: z.number().int().nonnegative() }),
  /** The tenant admitted a map's expansion: its items may start. */
  z.object({ type: z.literal("expansion.admitted"), node: z.string() }),
  /** The tenant refused a map's expansion: the node fails with the code, before any item started. */
  z.object({ type: z.literal("expansion.refused"), node: z.string(), code: z.string().max(100), message: z.string().max(1_000) }),
  /** The sweep found this child's parent ended (or no longer waiting on it): it ends `parent_gone`. */
  z.object({ type: z.literal("run.parent_gone"), parent_status: z.string().max(40) }),
]);
export type RunCommand = z.infer<typeof RunCommandSchema>;

/** A child's parent as its create read it (one read of the parent's record). */
export interface ParentView {
  status: RunLifecycle["status"];
  tenant: string;
  root_run_id: string;
  depth: number;
  /** The parent's node that starts this child is active and names this child. */
  waits: boolean;
}

/** What `prepare` adds: the pinned plan and, for subworkflow nodes, the children it may start. */
export interface Prepared {
  now: number;
  plan: Plan;
  /** A child's `run.create`: its parent, read once at create (null: no such run). */
  parent?: ParentView | null;
  /** Child run id for each subworkflow node of this run. */
  child_ids?: Record<string, string>;
  /** Pinned definition of each workflow a subworkflow node names. */
  child_definitions?: Record<string, DefinitionRef>;
  /** Engine setting: an attempt's lease lasts this long past its last heartbeat (default: the node's timeout + 5 s). */
  lease_ttl_ms?: number;
  /** Engine setting: how long past its last wake-up a parked run may wait (default WAIT_GRACE_MS). */
  wait_grace_ms?: number;
  /** Engine setting: ready attempts are offered to the node's fair scheduler instead of being leased at once. */
  scheduled?: boolean;
  /** Engine setting: a map's items start only once the run's tenant admitted the expansion. */
  expansion_admission?: boolean;
}

/** A ready attempt offered to the node's scheduler (a `runway.local` effect on channel `step.ready`). */
export interface ReadyTicket {
  id: string;
  run: string;
  node: string;
  item?: number;
  attempt: number;
  tenant: string;
  project: string;
  class: "interactive" | "automation" | "migration";
  priority: number;
  deadline: number | null;
  cost: number;
  enqueued_at: number;
  /** The provider quota the attempt draws on (`provider/model`), if any. */
  provider_key?: string;
}

export type ExecutionEvent = RunCommand & Prepared;

/** Handed to the node's step executor (a `runway.local` effect on channel `step.execute`). */
export interface ExecuteRequest {
  run: string;
  tenant: string;
  node: string;
  item?: number;
  attempt: number;
  lease_epoch: number;
  handler: string;
  input: unknown;
  timeout_ms: number;
  cancellation_epoch: number;
  /** The lease lapses at this instant unless a heartbeat renews it. */
  lease_expires_at: number;
  /** The scheduler ticket this attempt was leased under, when scheduled. */
  ticket?: string;
}

export type { StepError, StepState };
