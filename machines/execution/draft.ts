import { applyRunOp, type RunOpEvent } from "../run/index.js";
import { isPlatformStop, type NodeState, type Plan, type PlanNode, type Scope } from "../workflow/index.js";
import type { ExecutionEvent, RunContext, RunError } from "./types.js";

/**
 * The working state of one reduction (the run being changed, its plan, the event, the
 * effects decided so far) and the small edits every part of the reducer makes on it.
 */
/** Deepest allowed run tree (a top-level run is depth 0). */
export const MAX_DEPTH = 5;

/** How long past its last wake-up a parked run may sit before the wait sweep ends it. */
export const WAIT_GRACE_MS = 60_000;

export const STEP_EXECUTE = "step.execute";

/** Local effect channel: a ready attempt offered to the node's fair scheduler. */
export const STEP_READY = "step.ready";

/**
 * Local effect channel: attempts that must stop now (their run was cancelled or stopped, their
 * node settled without them, their lease lapsed): the executor aborts their handlers' signals,
 * so a stopped run holds no worker. Payload {@link AbortRequest}.
 */
export const STEP_ABORT = "step.abort";

export interface AbortRequest {
  run: string;
  attempts: { node: string; item?: number; attempt: number; lease_epoch: number }[];
  reason: string;
}

/** The attempts of `holders` that hold a lease now (leased or running). */
export function liveAttempts(
  node: string,
  holders: { step?: { status: string; attempt: number; lease_epoch: number } }[],
  itemized: boolean,
): AbortRequest["attempts"] {
  const out: AbortRequest["attempts"] = [];
  holders.forEach((h, i) => {
    if (h.step && (h.step.status === "leased" || h.step.status === "running"))
      out.push({ node, ...(itemized ? { item: i } : {}), attempt: h.step.attempt, lease_epoch: h.step.lease_epoch });
  });
  return out;
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
 * The most a map's items may return in all (inline; a result over 32 KiB is stored by reference
 * and counts only its reference). A run's record holds every item output (and the map's output
 * once it settles) and must stay well under NATS's 1 MiB message limit, so a map that would pass
 * this fails `fanout_output_too_large` instead of writing a record the store would refuse.
 */
export const MAP_OUTPUT_LIMIT = 256 * 1024;

/** Extra attempts a step gets for attempts lost with their worker (crash, takeover). */
export const PLATFORM_RETRIES = 3;

export type Effect =
  | { type: "runway.send"; to: { kind: string; id: string }; event: { type: string } & Record<string, unknown> }
  | { type: "runway.event"; subject: string; data: unknown }
  | { type: "runway.timer.set"; name: string; at: number; event: { type: string } & Record<string, unknown> }
  | { type: "runway.answer"; value: unknown }
  | { type: "runway.local"; channel: string; payload: unknown };

export interface Draft {
  run: RunContext;
  plan: Plan;
  byId: Map<string, PlanNode>;
  now: number;
  event: ExecutionEvent;
  effects: Effect[];
  /** The first platform stop of this reduction: the run ends at once (see `workflow/stops.ts`). */
  stop?: { node: string; error: RunError };
}

export function move(d: Draft, op: RunOpEvent["op"], extra: Partial<RunOpEvent> = {}): boolean {
  const r = applyRunOp(d.run.lifecycle, { op, now: d.now, ...extra } as RunOpEvent);
  if (r.outcome !== "moved") return false;
  d.run.lifecycle = r.state;
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

export function runSummary(r: RunContext) {
  return {
    id: r.id,
    tenant: r.tenant,
    status: r.lifecycle.status,
    definition: r.definition,
    root_run_id: r.root_run_id,
    parent_run_id: r.parent_run_id,
    created_at: r.created_at,
    started_at: r.lifecycle.started_at,
    ended_at: r.lifecycle.ended_at,
  };
}

export function states(run: RunContext): Record<string, NodeState> {
  const out: Record<string, NodeState> = {};
  for (const [id, n] of Object.entries(run.nodes))
    out[id] = { status: n.s, ...(n.output !== undefined ? { output: n.output } : {}), ...(n.taken ? { taken: n.taken } : {}) };
  return out;
}

export function scopeOf(run: RunContext): Scope {
  const steps: Scope["steps"] = {};
  for (const [id, n] of Object.entries(run.nodes))
    (steps as Record<string, unknown>)[id] = { status: n.s, ...(n.output !== undefined ? { output: n.output } : {}) };
  return { input: run.input, steps };
}

/** A node fails; a platform stop code (never a flag: the code carries the rule) also stops the run. */
export function fail(d: Draft, id: string, error: RunError): void {
  const n = d.run.nodes[id]!;
  n.s = "failed";
  n.error = error;
  if (isPlatformStop(error.code)) d.stop ??= { node: id, error };
  publish(d, "step_failed", { node: id, error });
}

export function succeed(d: Draft, id: string, output?: unknown): void {
  const n = d.run.nodes[id]!;
  n.s = "succeeded";
  if (output !== undefined) n.output = output;
  publish(d, "step_succeeded", { node: id });
}
