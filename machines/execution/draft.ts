import { applyRunOp, type RunLifecycle, type RunOpEvent } from "../run/index.js";
import { stopsRun, type NodeState, type Plan, type PlanNode, type Scope } from "../workflow/index.js";
import type { ItemRun, NodeRun, RunContext, RunError, RunFact, RunMemory, TaskRef } from "./types.js";
import type { ExecuteRequest, ExecutionEvent, ReadyTicket } from "./requests.js";
import { liveItems } from "./items.js";
import type { CreateRefusal } from "./create.js";

/**
 * The working state of one reduction (the run being changed, its plan, the event, the
 * effects decided so far) and the small edits every part of the reducer makes on it.
 */
/** Deepest allowed run tree (a top-level run is depth 0). */
export const MAX_DEPTH = 5;

/** How long past its last wake-up a parked run may sit before the wait sweep ends it. */
export const WAIT_GRACE_MS = 60_000;

/** Local effect channel: a ready attempt offered to the node's fair scheduler. */
export const STEP_READY = "step.ready";

/**
 * Local effect channel: attempts that must stop now (their run was cancelled or stopped, their
 * node settled without them, their lease lapsed): the executor aborts their handlers' signals,
 * so a stopped run holds no worker. Payload {@link AbortRequest}.
 */
export const STEP_ABORT = "step.abort";

/** Local effect channel: ask the MCP server how a task a step waits on is doing. Payload {@link TaskPoll}. */
export const TASK_POLL = "task.poll";

export type TaskPoll = Pick<ExecuteRequest, "run" | "root" | "tenant" | "node" | "item" | "attempt" | "lease_epoch" | "cancellation_epoch"> & { task: TaskRef };

export interface AbortRequest {
  run: string;
  /** `task`: the attempt waits on an MCP task (nothing runs here): stopping it cancels the task. */
  attempts: { node: string; item?: number; attempt: number; lease_epoch: number; task?: { server: string; tool: string; id: string; wire: string } }[];
  reason: string;
}

/**
 * The attempts of `holders` that may be running now: leased or running, or offered (granted in
 * memory, running under the next attempt number and lease epoch until its result is stored).
 */
export function liveAttempts(node: string, holders: Iterable<[number | undefined, ItemRun | NodeRun]>): AbortRequest["attempts"] {
  const out: AbortRequest["attempts"] = [];
  for (const [item, h] of holders) {
    const step = h.step;
    if (!step) continue;
    const at = item !== undefined ? { item } : {};
    const task = h.task ? { task: { server: h.task.server, tool: h.task.tool, id: h.task.id, wire: h.task.wire } } : {};
    if (step.status === "leased" || step.status === "running") out.push({ node, ...at, attempt: step.attempt, lease_epoch: step.lease_epoch, ...task });
    else if (step.status === "ready" && h.offered !== undefined) out.push({ node, ...at, attempt: h.offered, lease_epoch: step.lease_epoch + 1 });
  }
  return out;
}

/** A node's attempt holders: the node itself, or a map's items in flight (by index). */
export function holdersOf(n: NodeRun): [number | undefined, ItemRun | NodeRun][] {
  if (n.map) return liveItems(n.map).map(([i, it]) => [Number(i), it]);
  return n.step ? [[undefined, n]] : [];
}

/** Asks this node's executor to abort `attempts` (nothing when there are none). */
export function abortAttempts(d: Draft, attempts: AbortRequest["attempts"], reason: string): void {
  if (attempts.length > 0) d.effects.push({ type: "runway.local", channel: STEP_ABORT, payload: <AbortRequest>{ run: d.run.id, attempts, reason } });
}

/** Local effect channel: an attempt's lease lapsed; its scheduler slot (if any) is free. */
export const STEP_LAPSED = "step.lapsed";
/** Local effect channel for node metrics the machine alone can see (e.g. a lease that lapsed). */
export const METRICS_CHANNEL = "metrics";

/**
 * Every value the run machine answers a command with (its `runway.answer`), closed: the run
 * actor's protocol (`actors/run-protocol.ts`) picks each command's answers from it, so what the
 * machine answers and what callers branch on agree at compile time.
 */
export type RunAnswer =
  /** A report or effect from an attempt the run no longer takes: a newer lease, or a cancel since it began. */
  | { outcome: "stale_lease" }
  | { outcome: "stale_cancel_epoch" }
  /** `error_code`: a child its start gate refused was created already failed, under this code (C048). */
  | { outcome: "started"; run: ReturnType<typeof runSummary>; error_code?: string }
  | CreateRefusal
  | { outcome: "cancelled" | "cancel_requested"; run: ReturnType<typeof runSummary> & { cancel: RunContext["cancel"] } }
  | { outcome: "delivered"; nodes: string[] }
  | { outcome: "run_not_waiting" | "approval_expired" | "already_decided" | "not_reconciling" }
  /** A command the run cannot take as given (a signal's data that fits no waiting node, a create of the wrong shape). */
  | { outcome: "invalid_input"; reason?: string }
  | { outcome: "decided"; approval: string; decision: "approved" | "edited" | "rejected" }
  | { outcome: "settled"; decision: "done" | "retry" | "abandon"; node: string; item?: number }
  /** The intent (or a receipt) is recorded: call the tool, with a person's answers when it asked for input. */
  | { outcome: "recorded"; input?: { responses: Record<string, unknown>; state?: string } }
  /** A completed claim: its stored response, no call. */
  | { outcome: "observed"; value: unknown }
  /** An earlier attempt's call, outcome unknown: ask the server's lookup tool, or reconcile. */
  | { outcome: "lookup"; tool: string; input?: { responses: Record<string, unknown>; state?: string } }
  /** Call again (the same key): with a person's answers when the lost attempt's call carried them. */
  | { outcome: "reconcile"; input?: { responses: Record<string, unknown>; state?: string } }
  | { outcome: "in_flight" | "needs_approval" | "limit_reached" | "budget_exhausted" | "parked" | "waiting" | "let_finish" }
  | { outcome: "approved"; arguments: unknown }
  /** An agent's gated proposal a person rejected: the model is told so (as the call's result) and goes on. */
  | { outcome: "rejected"; by: string | null; reason?: string }
  | { outcome: "awaiting_approval"; approval: string }
  /** An agent's subagent call the run cannot make (not a subagent of the node, too deep, another one pending). */
  | { outcome: "refused"; code: string; message: string }
  /** An agent's subagent call: its child run runs and the step is parked until it ends. */
  | { outcome: "awaiting_subagent"; child: string };

/** A counter the machine alone can see, counted by the node (its metrics channel). */
export type MachineCounter = { counter: "lease_expiries"; tenant: string } | { counter: "sweep_actions"; tenant: string; action: string };

/**
 * The run's `runway.local` channels and what each carries: the machine sends on them and the
 * node receives (`cluster/runway-node.ts`), both typed by this one map.
 */
export interface RunLocalChannels {
  [STEP_READY]: ReadyTicket;
  [STEP_LAPSED]: { ticket: string };
  [STEP_ABORT]: AbortRequest;
  [TASK_POLL]: TaskPoll;
  [METRICS_CHANNEL]: MachineCounter;
}

/** A `runway.local` effect on one of {@link RunLocalChannels}, its payload that channel's. */
export type LocalEffect = { [C in keyof RunLocalChannels]: { type: "runway.local"; channel: C; payload: RunLocalChannels[C] } }[keyof RunLocalChannels];

/**
 * The most a map's items may return in all (inline; a result over 32 KiB is stored by reference
 * and counts only its reference). Item outputs live in the run's journal, not its head, but a
 * map's output is one value (`\${steps.<map>.output}`, the run's result) held in memory whole, so
 * a map that would pass this fails `fanout_output_too_large` instead.
 */
export const MAP_OUTPUT_LIMIT = 16 * 1024 * 1024;

/** Extra attempts a step gets for attempts lost with their worker (crash, takeover). */
export const PLATFORM_RETRIES = 3;

export type Effect =
  | { type: "runway.send"; to: { kind: string; id: string }; event: { type: string } & Record<string, unknown>; last?: true }
  | { type: "runway.event"; subject: string; data: unknown }
  | { type: "runway.timer.set"; name: string; at: number; event: { type: string } & Record<string, unknown> }
  | { type: "runway.answer"; value: RunAnswer | null | undefined }
  | LocalEffect
  | { type: "runway.journal"; data: RunFact };

export interface Draft {
  run: RunContext;
  /**
   * The run's lifecycle as this decision sees it: the machine's at the start, moved by each op
   * the decision takes ({@link move}). The run's own `lifecycle` is the machine's to write, by the
   * transition each op is (machine.ts): the decision never writes it.
   */
  lifecycle: RunLifecycle;
  /** The lifecycle ops this decision took, in order: the machine takes each as a transition. */
  moves: RunOpEvent[];
  plan: Plan;
  byId: ReadonlyMap<string, PlanNode>;
  now: number;
  event: ExecutionEvent;
  effects: Effect[];
  /** The first platform stop of this reduction: the run ends at once (see `workflow/stops.ts`). */
  stop?: { node: string; error: RunError };
  /** The run's input and the outputs stored before this reduction. */
  memory: RunMemory;
  /** Outputs recorded by this reduction (journal facts not yet stored), by node and by `node[i]`. */
  fresh: Map<string, unknown>;
}

/**
 * Takes lifecycle op `op` if the run table allows it from where the decision stands: the
 * decision's view moves, and the op is handed to the machine (an op that names no status, like
 * `advance`, is a check only). False when the table refuses it.
 */
export function move(d: Draft, op: RunOpEvent["op"], extra: Partial<RunOpEvent> = {}): boolean {
  const e = { op, now: d.now, ...extra } as RunOpEvent;
  const r = applyRunOp(d.lifecycle, e);
  if (r.outcome !== "moved") return false;
  if (r.state !== d.lifecycle) {
    d.lifecycle = r.state;
    d.moves.push(e);
  }
  return true;
}

/** A progress event: best effort (`runway.event`), so an events outage never holds the run. */
export function publish(d: Draft, type: string, data: Record<string, unknown> = {}): void {
  const r = d.run;
  d.effects.push({
    type: "runway.event",
    subject: `rw.evt.${r.tenant}.${r.root_run_id}.${r.id}.${type}`,
    data: { type, run: r.id, tenant: r.tenant, at: d.now, ...data },
  });
}

/** A run as answers show it; `lifecycle` is the run's own unless a decision's view is given. */
export function runSummary(r: RunContext, lifecycle: RunLifecycle = r.lifecycle) {
  return {
    id: r.id,
    tenant: r.tenant,
    status: lifecycle.status,
    definition: r.definition,
    root_run_id: r.root_run_id,
    parent_run_id: r.parent_run_id,
    created_at: r.created_at,
    started_at: lifecycle.started_at,
    ended_at: lifecycle.ended_at,
  };
}

/** A stored output, or one recorded by this reduction. */
function itemOutput(d: Draft, node: string, i: number): unknown {
  const key = `${node}[${i}]`;
  return d.fresh.has(key) ? d.fresh.get(key) : d.memory.item(node, i);
}

/**
 * What a node produced, as templates and the run's result see it: a work node's output (from the
 * journal), a branch's `{taken}`, a map's item outputs in input order (null for an item with
 * none; a map a ceiling stopped: the prefix before its stopping position). `undefined` when the
 * node has none.
 */
export function outputOf(d: Draft, id: string): unknown {
  const n = d.run.nodes[id];
  if (!n) return undefined;
  if (n.map && n.s !== "active" && n.s !== "pending") return Array.from({ length: n.map.stopped_at ?? n.map.total }, (_, i) => itemOutput(d, id, i) ?? null);
  if (n.taken) return { taken: n.taken };
  if (!n.out) return undefined;
  return d.fresh.has(id) ? d.fresh.get(id) : d.memory.output(id);
}

/** Node states for the walk; outputs are read only when a template or condition asks for them. */
export function states(d: Draft): Record<string, NodeState> {
  const out: Record<string, NodeState> = {};
  for (const id in d.run.nodes) {
    const n = d.run.nodes[id]!;
    out[id] = hasOutput(n) ? lazyOutput(d, id, n.s, n.taken) : n.taken ? { status: n.s, taken: n.taken } : { status: n.s };
  }
  return out;
}

export function scopeOf(d: Draft): Scope {
  const steps: Record<string, { status: NodeState["status"]; output?: unknown }> = {};
  for (const id in d.run.nodes) {
    const n = d.run.nodes[id]!;
    steps[id] = hasOutput(n) ? lazyOutput(d, id, n.s, undefined) : { status: n.s };
  }
  return { input: d.memory.input, steps };
}

function hasOutput(n: NodeRun): boolean {
  return !!n.out || !!n.taken || (!!n.map && n.s !== "active" && n.s !== "pending");
}

/**
 * A node's state with a lazy `output` (computed once, on first read): most transitions never
 * read an output. A class, so that building one per node and transition costs a plain
 * allocation (an object with its own accessor, or one defined on it afterwards, cost a few
 * percent of a step's CPU); its draft and id are private fields, invisible to anything that
 * enumerates or serialises it.
 */
class LazyNodeState {
  declare readonly taken?: NodeRun["taken"];
  readonly #draft: Draft;
  readonly #id: string;
  #cached: { value: unknown } | undefined;

  constructor(
    readonly status: NodeRun["s"],
    draft: Draft,
    id: string,
    taken: NodeRun["taken"],
  ) {
    if (taken) this.taken = taken;
    this.#draft = draft;
    this.#id = id;
  }

  get output(): unknown {
    return (this.#cached ??= { value: outputOf(this.#draft, this.#id) }).value;
  }
}

function lazyOutput(d: Draft, id: string, status: NodeRun["s"], taken: NodeRun["taken"]): LazyNodeState {
  return new LazyNodeState(status, d, id, taken);
}

/**
 * Records an output once, as a journal fact (stored with this transition, never in the head).
 * `receipt`: the output is the value of that observed receipt, journaled in this same write: the
 * fact names it instead of holding a second copy.
 */
export function recordOutput(d: Draft, id: string, value: unknown, receipt?: string): void {
  d.run.nodes[id]!.out = true;
  d.fresh.set(id, value);
  d.effects.push({ type: "runway.journal", data: receipt !== undefined ? { t: "output", node: id, receipt } : { t: "output", node: id, value } });
}

export function recordItem(d: Draft, id: string, i: number, value: unknown): void {
  d.fresh.set(`${id}[${i}]`, value);
  d.effects.push({ type: "runway.journal", data: { t: "item", node: id, i, value } });
}

/** A node fails; a code that stops its run (never a flag: the code carries the rule; `stopsRun`) also stops the run. */
export function fail(d: Draft, id: string, error: RunError): void {
  const n = d.run.nodes[id]!;
  n.s = "failed";
  n.error = error;
  if (stopsRun(error.code)) d.stop ??= { node: id, error };
  publish(d, "step_failed", { node: id, error });
}

/** A node succeeds; a work node's output (if any) becomes a journal fact. */
export function succeed(d: Draft, id: string, output?: unknown, attempt?: number, receipt?: string): void {
  const n = d.run.nodes[id]!;
  n.s = "succeeded";
  if (output !== undefined) recordOutput(d, id, output, receipt);
  publish(d, "step_succeeded", { node: id, ...(attempt !== undefined ? { attempt } : {}) });
}
