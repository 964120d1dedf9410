import type { ResourceRef, ToolClass } from "../tools/index.js";
import type { RunLifecycle } from "../run/index.js";
import type { StepError, StepState } from "../step/index.js";
import type { NodeStatus } from "../workflow/index.js";
import type { RunLane } from "../tenant/index.js";
import type { EffectIntent, EffectReceipt } from "../effect/index.js";

export type { RunCommand, RunSeed } from "./commands.js";

/**
 * A run's stored head. Steps are embedded in it, so a step's result and the readiness it unlocks
 * are one durable write. The head is bounded: inputs and outputs are journal facts, a map holds only
 * its items in flight, a settled node a summary, so a write costs the same at any step count.
 */
export const RUN_CONTEXT_VERSION = 2;

export interface RunError {
  code: string;
  message: string;
  retryable?: boolean;
  nodes?: string[];
  /**
   * A ceiling stop before any work (or a node a child's such stop ended): the clock it spent. A
   * parent reads this field, never the code (a handler may answer the same words as a code).
   */
  partial_reason?: string;
  /**
   * A subworkflow node's failure: the code its child run ended under (the node's own `code` is
   * how that reads here: `child_failed`, `start_refused`, or a platform stop; seed 004's
   * `StartRunResult.error_code`), so a parent sees why, whatever its node tolerated.
   */
  error_code?: string;
}

/** One attempt holder: a code node, or one map item in flight. */
export interface ItemRun {
  step: StepState;
  /** While leased or running: when the lease lapses unless a heartbeat renews it. */
  lease_expires_at?: number;
  /**
   * The attempt offered to the node's scheduler: granted in memory (no write), it runs as this
   * attempt with the next lease epoch, until its result, or a heartbeat that leases it durably.
   */
  offered?: number;
  /** When it was offered (a sweep offers again an offer lost on its way). */
  offered_at?: number;
  /** The sweep offered this attempt again; lost a second time, it fails `dispatch_lost`. */
  reoffered?: boolean;
  /**
   * Effect intents recorded by this holder's attempts and not yet answered by a receipt, by
   * effect key: the head's pending effects (their receipts are journal facts).
   */
  intents?: Record<string, PendingIntent>;
  /**
   * An intent whose outcome nobody knows (its attempt was lost before its receipt) on a tool that
   * must not be called twice: the step is held, offered to nobody, until a person settles it.
   */
  reconcile?: { key: string; server: string; tool: string; since: number };
  /**
   * A long tool call running as an MCP task: its attempt ended (no worker held) and the run polls
   * the task from a durable timer until it ends; its result is then the attempt's result.
   */
  task?: TaskRef;
}

/**
 * An approval node's request (`<run>:<node>`), or a gated tool call's (`<run>:<node>:approval.<server>/<tool>`,
 * `tool` set, its payload `{server, tool, arguments}`): pending until a person decides or its clock runs out.
 */
export type ApprovalState =
  | {
      id: string;
      state: "pending";
      prompt: string;
      payload: unknown;
      group: string | null;
      escalation_group: string | null;
      requested_at: number;
      expires_at: number;
      tool?: { server: string; tool: string };
      /** A tool's server asked for a person's input (MRTR): its forms, its state to echo, and which round of asking this is. */
      input?: {
        requests: { key: string; message: string; schema: Record<string, unknown> }[];
        state?: string;
        round: number;
        /** The remote task that asks (an `a2a` node's, seen by its poll): cancelled if the run stops or nobody answers in time. */
        task?: { server: string; tool: string; id: string; wire: string };
      };
      /** A remote task's question after a gated call: the arguments its gate let through, which the answer's call keeps. */
      arguments?: unknown;
    }
  | {
      id: string;
      state: "approved" | "edited" | "rejected" | "expired" | "cancelled";
      by: string | null;
      at: number;
      /** A gated tool call approved (or edited): the arguments it is made with, from this record. */
      arguments?: unknown;
      /** A person answered a tool's input request: the call is made again with these (by the server's keys) and its state. */
      input?: { responses: Record<string, unknown>; state?: string; round: number };
    };

/** Which tool calls of a step ask a person first (see `gates.ts`): by `server/tool` (or `server/*`), or by effective class. */
export interface GateRule {
  tools?: string[];
  classes?: ToolClass[];
}

/** An MCP task a step waits on: which call it is, where, and how often to ask. */
export interface TaskRef {
  key: string;
  id: string;
  server: string;
  tool: string;
  /** The MCP revision it was created under: `2025-11-25` (core tasks) or `2026-07-28` (the tasks extension). */
  wire: string;
  poll_ms: number;
  since: number;
  /** A tool node's write: its `item_kind` (its result adds refs, C074). */
  writes?: string;
}

/** An effect intent waiting for its receipt (in the head while it waits): the effect machine's (`machines/effect/`). */
export type PendingIntent = EffectIntent;

/** What a receipt says: the call's response is known (`observed`), or it is known that it had no effect (`failed`). */
export type Receipt = EffectReceipt;

/** A map's items: those in flight (or waiting to retry) by index, and counters for the rest. */
export interface MapRun {
  /** Items in the list (the fan-out). */
  total: number;
  /** Items below this index were made live (in flight, retrying or settled). */
  next: number;
  /** Items made live and not settled, by index. */
  live: Record<string, ItemRun>;
  succeeded: number;
  failed: number;
  /** The lowest index of a failed item. */
  first_failed?: number;
  /**
   * A ceiling stopped the map: the lowest input position it stopped (refused, or never run).
   * Once settled, its output is the items before it, a contiguous prefix.
   */
  stopped_at?: number;
  /**
   * A platform stop an item returned, the lowest input position's so far (C064): the map fails
   * with it once no item before it is live (one of those may still return a lower one).
   */
  stop?: { at: number; error: RunError };
  /** Combined size (JSON, UTF-8) of the item outputs so far (bounded by MAP_OUTPUT_LIMIT). */
  output_bytes: number;
}

export interface NodeRun extends Omit<ItemRun, "step"> {
  s: NodeStatus;
  /** Code nodes: the attempt lifecycle. */
  step?: StepState;
  map?: MapRun;
  /** The node's output is a fact in the run's journal (`RunMemory.output`). */
  out?: true;
  taken?: "then" | "else";
  child?: string;
  wake_at?: number;
  error?: RunError;
  /** A subworkflow node whose child succeeded partially: the child's mark, which its run carries on. */
  partial_reason?: string;
  /** A tool node whose call wrote resources: its refs, kept with its result (a replay or recovery reads these, never the live tool). */
  refs?: ResourceRef[];
  /** An approval node: its request while a person decides, then how it was decided. */
  approval?: ApprovalState;
  /** An agent node's attempts parked on its gated proposals' approvals (or its subagents): each is given back to its retries. */
  parks?: number;
  /** An agent node waiting on the subagent it delegated to (its child run is `child`): the call's effect key. */
  subagent?: { key: string; workflow: string; turn: number };
  /**
   * Map nodes under expansion admission: asked of the tenant (`pending`), admitted (its items
   * count against the tenant's active descendants); given back (and forgotten) once the node settled.
   */
  expansion?: { state: "pending" | "admitted" | "released"; children: number; asked_at: number };
}

/**
 * What a run's journal holds beside its heads: its input and each output, once. The actor keeps
 * them in memory (`RunMemory`) and hands them to every transition; `journalFact` effects add
 * to them.
 */
export type RunFact =
  | { t: "input"; value: unknown }
  | { t: "output"; node: string; value: unknown }
  /** A tool node's output: the value of its observed receipt `receipt` (stored before it, in the same write): a result is journaled once. */
  | { t: "output"; node: string; receipt: string }
  | { t: "item"; node: string; i: number; value: unknown }
  | IntentFact
  /** `cost_cents`: a priced model turn's charge. */
  | ({ t: "receipt"; cost_cents?: number } & Receipt)
  | { t: "task"; key: string; id: string; server: string; tool: string; wire: string; at: number }
  | { t: "approval"; id: string; node: string; prompt: string; payload: unknown; group: string | null; requested_at: number; expires_at: number }
  | {
      t: "decision";
      id: string;
      node: string;
      decision: "approved" | "edited" | "rejected" | "expired";
      by: string | null;
      payload?: unknown;
      reason?: string;
      at: number;
    };

/** An effect intent as the journal keeps it: who asked for which call, with which arguments (for the trajectory and replay). */
export interface IntentFact {
  t: "intent";
  key: string;
  node: string;
  item?: number;
  attempt: number;
  server: string;
  tool: string;
  class: ToolClass;
  arguments: unknown;
  at: number;
  /** An agent's model turn (its receipt holds the model's response), not a tool call. */
  turn?: true;
}

/** The run's input and outputs, as the journal holds them (read-only for the machine). */
export interface RunMemory {
  readonly input: unknown;
  output(node: string): unknown;
  item(node: string, i: number): unknown;
  /** The receipt stored for an effect key: the claim's outcome. */
  receipt(key: string): Receipt | undefined;
}

/** How old a lost clock or hand-over must be before the recovery sweep repairs it (see `sweep.ts`). */
export interface SweepSettings {
  /** A lease this long past its expiry was not expired by its own timer: the timer was lost. */
  lease_grace_ms: number;
  /** An offer to the node's scheduler this old is offered again (a lost hand-over; the scheduler drops duplicates). */
  reoffer_after_ms: number;
}

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
  lane: RunLane;
  /** `queued`: created behind its tenant's concurrency caps (or asking it, once a person admitted it); it starts on `run.admitted`. */
  admission?: "admitted" | "queued";
  /** A person admits the run before it asks its tenant (`admission.ts`): pending from its create, then decided. */
  admission_approval?: ApprovalState;
  /** The tenant's project the run counts under (absent: `default`). */
  project?: string;
  /** Scheduling priority of its attempts, 0–9 (absent: 5); a child's is never above its parent's. */
  priority?: number;
  /** Its attempts should be leased before this instant (ms); earlier deadlines go first at equal priority. */
  deadline?: number | null;
  /** A replay of this run: its effects are answered from that run's receipts. */
  replay_of?: string;
  /** The tree's money ceiling (its root's `limits.max_cost_cents`), metered at every priced call. */
  cost_ceiling_cents?: number;
  /** The tools it and the runs below it may call, when its delegator limits them (see `RunSeedSchema`). */
  tool_scope?: string[];
  /**
   * Its tenant counted it (admitted or queued) in the decision its start asked for: the tenant's
   * member key for it is its entry in the live-run index until the tenant hears of its end, so it
   * has no index key of its own to add or remove. Absent: it has one (children, runs a person
   * admits first, runs stored before).
   */
  counted?: true;
  /** Who started it, when the caller was authenticated: the one who may not approve its actions (seed 003 §7.4). */
  initiator?: string;
  /** The trace context its start (or its root's) came with: absent, its trace id is derived from its root's id. */
  trace?: TraceContext;
  lifecycle: RunLifecycle;
  created_at: number;
  cancellation_epoch: number;
  nodes: Record<string, NodeRun>;
  result: unknown;
  result_truncated: boolean;
  error: RunError | null;
  /**
   * Set by the first cancel. `enforced_at` null: requested, waiting on calls it let finish (the run
   * is not `cancelled` yet); absent in records stored before it (enforced at `at`).
   */
  cancel: { reason: string; by: string; at: number; enforced_at?: number | null } | null;
  /** What the run used of its ceilings (`limits` of its definition). */
  usage?: { steps: number; tool_calls: number; cost_cents?: number };
  /**
   * A ceiling stopped the run (its own, or a child's marked stop): nothing more starts, work in
   * flight finishes (a call beyond the ceiling is never made), then the run settles under the one
   * status rule. `which` names the clock.
   */
  ceiling?: { reason: string; which: string; at: number };
  /** Set when the run succeeded partially: a ceiling stopped it after work, or a child it ran succeeded partially. */
  partial_reason?: string;
  /**
   * A succeeded run's refs (C074): what its tool nodes wrote, in declaration order, each
   * `(kind, id)` once (the first wins); absent when none.
   */
  refs?: ResourceRef[];
  /** Receipts in the run's journal (a memory holding fewer is behind the head). */
  receipts?: number;
  /** The schema of this head ({@link RUN_CONTEXT_VERSION}); a head without one is version 1. */
  v: number;
}

/** A W3C trace context (a `traceparent`'s fields): lower-case hex ids and the flags byte. */
export interface TraceContext {
  trace_id: string;
  span_id: string;
  flags: number;
}

export interface ExecutionContext {
  run: RunContext | null;
}

export type { StepError, StepState };
