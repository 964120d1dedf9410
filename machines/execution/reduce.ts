import { queuedLifecycle } from "../run/index.js";
import { applyStepOp, type StepError } from "../step/index.js";
import { isPlatformStop, resolveTemplate, utf8Length, validateAgainstSchema } from "../workflow/index.js";
import { expireLease, isAlive, lease, loseDispatch, onHeartbeat, onLease, policyOf, pumpMap, type AliveAttempt } from "./attempts.js";
import {
  abortAttempts,
  fail,
  liveAttempts,
  MAP_OUTPUT_LIMIT,
  METRICS_CHANNEL,
  move,
  PLATFORM_RETRIES,
  publish,
  runSummary,
  scopeOf,
  succeed,
  type Draft,
  type Effect,
} from "./draft.js";
import { admitItems, askExpansion, releaseExpansions } from "./expansion.js";
import { advance, finish, notifyParent, stopNodes } from "./progression.js";
import { sweepPlan } from "./sweep.js";
import type { ExecutionContext, ExecutionEvent, NodeRun, RunContext } from "./types.js";

export {
  MAX_DEPTH,
  MAP_OUTPUT_LIMIT,
  WAIT_GRACE_MS,
  STEP_ABORT,
  STEP_EXECUTE,
  STEP_READY,
  STEP_LAPSED,
  type AbortRequest,
  METRICS_CHANNEL,
  PLATFORM_RETRIES,
  runSummary,
  type Effect,
} from "./draft.js";
export { LEASE_GRACE_MS } from "./attempts.js";

/**
 * The run's decision function: given its state and one event (with `now` and the pinned plan),
 * the next state and the effects to perform after it is stored. Pure; the XState machine in
 * `machine.ts` calls it, the actor host does the I/O.
 */
export function reduce(context: ExecutionContext, event: ExecutionEvent): { context: ExecutionContext; effects: Effect[] } {
  const run = event.type === "run.create" ? create(event) : copyForWrite(context.run!);
  const d: Draft = { run, plan: event.plan, byId: new Map(event.plan.nodes.map((n) => [n.id, n])), now: event.now, event, effects: [] };
  switch (event.type) {
    case "run.create":
      onCreate(d);
      break;
    case "step.result":
      onResult(d, event);
      break;
    case "timer.fired":
      onTimer(d, event);
      break;
    case "child.settled":
      onChild(d, event);
      break;
    case "run.cancel":
      onCancel(d, event.reason, event.by);
      break;
    case "run.recover":
      onRecover(d, event.alive ?? []);
      break;
    case "step.heartbeat":
      onHeartbeat(d, event);
      break;
    case "step.lease":
      onLease(d, event);
      advance(d);
      break;
    case "run.admitted":
      begin(d);
      break;
    case "run.sweep":
      onSweep(d, event.at);
      break;
    case "run.parent_gone":
      onParentGone(d, event.parent_status);
      break;
    case "expansion.admitted":
      admitItems(d, event.node);
      advance(d);
      break;
    case "expansion.refused":
      fail(d, event.node, { code: event.code, message: event.message });
      advance(d);
      break;
  }
  releaseExpansions(d);
  return { context: { run: d.run }, effects: d.effects };
}

/**
 * A copy the reducer may change without touching the previous snapshot: the reducer only ever
 * assigns properties of the run, of its nodes and of their items (step states, errors and
 * outputs are replaced, never edited), so copying those three levels is enough and costs far
 * less than a deep clone of a run with a wide map.
 */
function copyForWrite(run: RunContext): RunContext {
  const nodes: Record<string, NodeRun> = {};
  for (const [id, n] of Object.entries(run.nodes)) nodes[id] = n.items ? { ...n, items: n.items.map((it) => ({ ...it })) } : { ...n };
  return { ...run, nodes };
}

function create(event: Extract<ExecutionEvent, { type: "run.create" }>): RunContext {
  const seed = event.run;
  const nodes: Record<string, NodeRun> = {};
  for (const n of event.plan.nodes) nodes[n.id] = { s: "pending" };
  return {
    ...seed,
    lifecycle: queuedLifecycle(),
    created_at: event.now,
    cancellation_epoch: 0,
    nodes,
    result: null,
    result_truncated: false,
    error: null,
    cancel: null,
  };
}

function onCreate(d: Draft): void {
  if (d.run.admission === "queued") {
    // Behind its tenant's caps: it starts on `run.admitted`. Its slot may already have been
    // given (the tenant may have admitted it before this create was stored): ask once now.
    publish(d, "run_queued", { definition: d.run.definition });
    d.effects.push({ type: "runway.send", to: { kind: "tenant", id: d.run.tenant }, event: { type: "tenant.recheck", run_id: d.run.id } });
  } else {
    begin(d);
  }
  d.effects.push({ type: "runway.answer", value: { outcome: "started", run: runSummary(d.run) } });
}

/** The run starts: queued → running, its input checked against the definition's schema, its first nodes started. */
function begin(d: Draft): void {
  move(d, "claim");
  publish(d, "run_started", { definition: d.run.definition, parent: d.run.parent_run_id });
  const schema = d.plan.input_schema;
  const checked = schema ? validateAgainstSchema(schema, d.run.input) : ({ ok: true } as const);
  if (!checked.ok) {
    finish(d, "failed", { code: "invalid_input", message: checked.errors.map((e) => `${e.path}: ${e.message}`).join("; ") });
  } else {
    advance(d);
  }
}

function onResult(d: Draft, e: Extract<ExecutionEvent, { type: "step.result" }>): void {
  const node = d.byId.get(e.node)!;
  const n = d.run.nodes[e.node]!;
  const holder = e.item === undefined ? n : n.items![e.item]!;
  const step = holder.step!;
  const error: StepError = e.error ?? { code: "handler_error", message: "failed", retryable: true };
  const r =
    e.outcome === "succeeded"
      ? applyStepOp(step, { op: "succeed", now: d.now, attempt: e.attempt, lease_epoch: e.lease_epoch })
      : applyStepOp(step, { op: "fail", now: d.now, attempt: e.attempt, lease_epoch: e.lease_epoch, error, policy: policyOf(node) });
  if (r.outcome !== "moved") return;
  holder.step = r.state;
  if (e.outcome === "succeeded") holder.output = e.output === undefined ? null : e.output;
  if (node.kind === "map" && e.outcome === "succeeded" && outgrows(n, holder.output)) {
    stopItems(d, e.node);
    fail(d, e.node, {
      code: "fanout_output_too_large",
      message: `the items' combined output would exceed ${MAP_OUTPUT_LIMIT} bytes (larger results are stored by reference; make items return less or split the map)`,
    });
  } else if (node.kind === "map") {
    if (r.state.status === "ready") publish(d, "step_retrying", { node: e.node, item: e.item, attempt: e.attempt, error });
    pumpMap(d, node);
  } else if (r.state.status === "succeeded") {
    succeed(d, e.node, holder.output);
  } else if (r.state.status === "ready") {
    publish(d, "step_retrying", { node: e.node, attempt: e.attempt, error, not_before: r.state.not_before });
    const input = resolveTemplate(("input" in node ? node.input : null) ?? null, scopeOf(d.run));
    lease(d, node, holder, undefined, input.ok ? input.value : null);
  } else {
    fail(d, e.node, { code: error.code, message: error.message, retryable: false });
  }
  advance(d);
}

/** Adds an item's output to its map's combined size; true when the combined output would pass the bound. */
function outgrows(n: NodeRun, output: unknown): boolean {
  n.output_bytes = (n.output_bytes ?? 0) + utf8Length(JSON.stringify(output) ?? "null");
  return n.output_bytes > MAP_OUTPUT_LIMIT;
}

/** A map that stops early: its unfinished items are cancelled (a running attempt's late report is then refused). */
function stopItems(d: Draft, id: string): void {
  abortAttempts(d, liveAttempts(id, d.run.nodes[id]!.items ?? [], true), "fanout_output_too_large");
  for (const it of d.run.nodes[id]!.items ?? []) {
    const r = applyStepOp(it.step, { op: "cancel", now: d.now });
    if (r.outcome === "moved") it.step = r.state;
    delete it.output;
  }
}

function onTimer(d: Draft, e: Extract<ExecutionEvent, { type: "timer.fired" }>): void {
  const node = d.byId.get(e.node);
  const n = d.run.nodes[e.node];
  if (e.kind === "wait") {
    // One expiry clock per wait: a run still parked past its deadline and grace is abandoned.
    const lc = d.run.lifecycle;
    if (lc.status === "waiting" && lc.waiting_expires_at !== null && d.now >= lc.waiting_expires_at) {
      finish(d, "failed", { code: "wait_abandoned", message: `waiting on ${lc.waiting_on} past ${new Date(lc.waiting_expires_at).toISOString()}` });
    }
    return;
  }
  if (!node || !n) return;
  if (e.kind === "sleep") {
    succeed(d, e.node);
  } else if (e.kind === "lease") {
    expireLease(d, node, e.item);
  } else if (node.kind === "map") {
    pumpMap(d, node);
  } else {
    const input = resolveTemplate(("input" in node ? node.input : null) ?? null, scopeOf(d.run));
    lease(d, node, n, undefined, input.ok ? input.value : null);
  }
  advance(d);
}

/** A child's end settles its node. A child that ended under a platform stop carries its code across: its parent stops too. */
function onChild(d: Draft, e: Extract<ExecutionEvent, { type: "child.settled" }>): void {
  if (e.status === "succeeded") succeed(d, e.node, e.result ?? null);
  else if (e.status === "failed" && isPlatformStop(e.error?.code))
    fail(d, e.node, { code: e.error!.code, message: `child run ${e.child}: ${e.error!.message}` });
  else
    fail(d, e.node, { code: e.status === "cancelled" ? "child_cancelled" : "child_failed", message: e.error?.message ?? `child run ${e.child} ${e.status}` });
  advance(d);
}

/** Cancellation: the status first, then no further scheduling; active children are cancelled too. */
function onCancel(d: Draft, reason: string, by: string): void {
  if (!move(d, "cancel")) return;
  d.run.cancel = { reason, by, at: d.now };
  stopNodes(d, "parent_cancelled");
  publish(d, "run_cancelled", { reason, by });
  notifyParent(d);
}

/**
 * The sweep's repairs (see `sweep.ts`), decided again here on the run as it is now. They are
 * judged at the sweeper's clock `at` (so a test or an operator can sweep "three days later") and
 * stamped with the actor's own clock (a retry's backoff counts from now).
 */
function onSweep(d: Draft, at: number): void {
  const maps = new Set<string>();
  for (const a of sweepPlan(d.run, at)) {
    if (a.action === "recheck_admission") continue;
    d.effects.push({ type: "runway.local", channel: METRICS_CHANNEL, payload: { counter: "sweep_actions", tenant: d.run.tenant, action: a.action } });
    if (a.action === "wait_abandoned") {
      const lc = d.run.lifecycle;
      finish(d, "failed", {
        code: "wait_abandoned",
        message: `waiting on ${lc.waiting_on} past ${new Date(lc.waiting_expires_at ?? d.now).toISOString()} (recovery sweep)`,
      });
      return;
    }
    const node = d.byId.get(a.node);
    const n = d.run.nodes[a.node];
    if (!node || !n) continue;
    if (a.action === "recheck_expansion") {
      askExpansion(d, a.node, n.expansion!.children);
    } else if (a.action === "expire_lease") {
      expireLease(d, node, a.item, at);
    } else if (a.action === "dispatch_lost") {
      loseDispatch(d, node, a.item, at);
    } else if (a.item !== undefined) {
      const it = n.items![a.item]!;
      delete it.offered;
      it.reoffered = true;
      maps.add(a.node);
    } else {
      delete n.offered;
      const input = resolveTemplate(("input" in node ? node.input : null) ?? null, scopeOf(d.run));
      lease(d, node, n, undefined, input.ok ? input.value : null);
      if (n.step?.status === "ready") n.reoffered = true;
    }
  }
  for (const id of maps) {
    const node = d.byId.get(id)!;
    if (node.kind === "map" && d.run.nodes[id]!.s === "active") pumpMap(d, node);
  }
  advance(d);
}

/** A child whose parent ended (or stopped waiting on it): it ends `parent_gone`, and its own children are told the same. */
function onParentGone(d: Draft, parentStatus: string): void {
  stopNodes(d, "parent_gone");
  d.effects.push({ type: "runway.local", channel: METRICS_CHANNEL, payload: { counter: "sweep_actions", tenant: d.run.tenant, action: "parent_gone" } });
  finish(d, "failed", { code: "parent_gone", message: `parent run ${d.run.parent_run_id} is ${parentStatus} (recovery sweep)` });
}

/** After a restart or takeover: attempts that lived in the lost process fail as `worker_lost` and retry now. */
function onRecover(d: Draft, alive: readonly AliveAttempt[]): void {
  // Offers to the lost process's scheduler are gone too: offer again.
  for (const holder of Object.values(d.run.nodes).flatMap((n) => [n, ...(n.items ?? [])])) {
    delete holder.offered;
    delete holder.reoffered;
  }
  for (const node of d.plan.nodes) {
    const n = d.run.nodes[node.id]!;
    if (n.s !== "active") continue;
    if (node.kind === "code" && n.step?.status === "ready") lease(d, node, n, undefined, null);
  }
  const lost: StepError = { code: "worker_lost", message: "the node running this attempt stopped", retryable: true };
  for (const node of d.plan.nodes) {
    const n = d.run.nodes[node.id]!;
    if (n.s !== "active") continue;
    // A lost worker is the platform's failure, not the handler's: it is retried at once and
    // does not use up the node's own retry budget.
    const own = policyOf(node);
    const policy = { ...own, backoff_ms: 0, max_attempts: own.max_attempts + PLATFORM_RETRIES };
    if (node.kind === "code" && n.step && (n.step.status === "leased" || n.step.status === "running") && !isAlive(alive, node.id, undefined, n.step)) {
      const r = applyStepOp(n.step, { op: "fail", now: d.now, attempt: n.step.attempt, lease_epoch: n.step.lease_epoch, error: lost, policy });
      if (r.outcome !== "moved") continue;
      if (r.state.status === "ready") {
        n.step = r.state;
        const input = resolveTemplate(node.input ?? null, scopeOf(d.run));
        lease(d, node, n, undefined, input.ok ? input.value : null);
      } else {
        n.step = r.state;
        fail(d, node.id, { code: "worker_lost", message: lost.message });
      }
    } else if (node.kind === "map" && n.items) {
      for (const [i, it] of n.items.entries()) {
        if ((it.step.status !== "leased" && it.step.status !== "running") || isAlive(alive, node.id, i, it.step)) continue;
        const r = applyStepOp(it.step, { op: "fail", now: d.now, attempt: it.step.attempt, lease_epoch: it.step.lease_epoch, error: lost, policy });
        if (r.outcome === "moved") it.step = r.state;
      }
      pumpMap(d, node);
    }
  }
  advance(d);
}
