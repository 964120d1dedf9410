import type { RunLifecycle, RunOp, RunOpEvent } from "../run/index.js";
import type { ChildStartCode, Plan, PlanAgent } from "../workflow/index.js";
import type { RunCommand } from "./commands.js";
import type { DefinitionRef, GateRule, RunMemory, SweepSettings } from "./types.js";

/** What the run machine takes and hands out besides its record: its events, what `prepare` adds, and the attempts it offers. */

/**
 * A lifecycle op a decision took, raised inside the run machine, which takes it as a transition of
 * the run table (`lifecycle.claim`: queued → running, …) and writes the run's lifecycle columns.
 * Never a command: nobody sends one from outside.
 */
export type LifecycleEvent = { [K in RunOp]: { type: `lifecycle.${K}`; move: Extract<RunOpEvent, { op: K }> } }[RunOp];

/** Every event the run machine takes: the run's commands, and the lifecycle ops its decisions raise. */
export type RunMachineEvent = ExecutionEvent | LifecycleEvent;

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
  /**
   * A child's `run.create` its start gate refused (`CHILD_START_CODES`: its pinned definition
   * did not read, its tenant's policy did not read, or the tenant is killed): the child is
   * created already `failed` under this code, runs nothing, and tells its parent (C047, C048).
   */
  refused?: { code: ChildStartCode; message: string };
  /** The run's input and outputs (its journal's facts); absent only for a create. */
  memory?: RunMemory;
  /** Child run id for each subworkflow node of this run. */
  child_ids?: Record<string, string>;
  /** An agent's `effect.child`: the id of the child run its call starts (from the call's effect key). */
  subagent_child_id?: string;
  /** Pinned definition of each workflow a subworkflow node names. */
  child_definitions?: Record<string, DefinitionRef>;
  /** Engine setting: an attempt's lease lasts this long past its last heartbeat (default: the node's timeout + 5 s). */
  lease_ttl_ms?: number;
  /** Engine setting: how long past its last wake-up a parked run may wait (default WAIT_GRACE_MS). */
  wait_grace_ms?: number;
  /** Engine setting: a map's items start only once the run's tenant admitted the expansion. */
  expansion_admission?: boolean;
  /** Engine setting: how old a lost lease or offer must be before the sweep repairs it (default DEFAULT_SWEEP). */
  sweep?: SweepSettings;
  /** A map item's successful `step.result`: its output's JSON size in UTF-8 bytes, measured once by the host (the map's combined output is capped without serialising it here). */
  output_bytes?: number;
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
  /** What the executor runs once the ticket is granted a slot (in memory: a grant is not written). */
  request: ExecuteRequest;
}

export type ExecutionEvent = RunCommand & Prepared;

/**
 * What the node's step executor runs: an offered attempt once its ticket is granted, under the
 * attempt number and lease epoch the offer named (the grant writes nothing; the result, or a
 * heartbeat of a long attempt, does).
 */
export interface ExecuteRequest {
  run: string;
  /** The run's root (its progress events' subject names it). */
  root: string;
  tenant: string;
  node: string;
  item?: number;
  attempt: number;
  lease_epoch: number;
  handler: string;
  input: unknown;
  /** A tool node: the call the gateway makes (with `input` as its arguments) instead of a handler. */
  tool?: { server: string; tool: string; item_kind?: string };
  /** An agent node: the model loop the node runs (with `input` as its task) instead of a handler. */
  agent?: PlanAgent;
  /** The calls that ask a person first (absent: none): a tool node's own call asks its run (`effect.gate`); a handler's fails `tool_needs_approval`. */
  gate?: GateRule;
  /** The run is a replay of this one: its tool calls are answered from that run's receipts. */
  replay_of?: string;
  /** The tree's money ceiling: a priced call is charged against it before it is made. */
  cost_ceiling_cents?: number;
  /** The run's tool scope (see `RunContext.tool_scope`): a call outside it fails `tool_not_allowed`. */
  tool_scope?: string[];
  /** The trace id its run's start came with (absent: derived from `root`; see `RunContext.trace`). */
  trace?: string;
  timeout_ms: number;
  cancellation_epoch: number;
  /** The ticket the attempt runs under (its scheduler slot). */
  ticket: string;
  /**
   * An attempt still running this long after it starts is leased durably by a heartbeat (then it
   * keeps its lease alive with heartbeats, and a lapsed lease fails it `worker_lost`).
   */
  lease_after_ms: number;
}
