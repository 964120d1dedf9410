import { bound } from "../bound.js";
import { applyRunOp, isTerminal, queuedLifecycle, type RunOpEvent } from "../run/index.js";
import { applyStepOp, pendingStep, type RetryPolicy, type StepError, type StepState } from "../step/index.js";
import {
  evaluateCondition,
  joinOutcome,
  mapItemInput,
  mapItems,
  readiness,
  resolveTemplate,
  runOutcome,
  runResult,
  validateAgainstSchema,
  type NodeState,
  type Plan,
  type PlanNode,
  type Scope,
} from "../workflow/index.js";
import type { ExecuteRequest, ExecutionContext, ExecutionEvent, NodeRun, ReadyTicket, RunContext, RunError } from "./types.js";

/** Deepest allowed run tree (a top-level run is depth 0). */
export const MAX_DEPTH = 5;
/** How long past its last wake-up a parked run may sit before the wait sweep ends it. */
export const WAIT_GRACE_MS = 60_000;
export const STEP_EXECUTE = "step.execute";
/** Local effect channel: a ready attempt offered to the node's fair scheduler. */
export const STEP_READY = "step.ready";
/** Local effect channel for node metrics the machine alone can see (e.g. a lease that lapsed). */
export const METRICS_CHANNEL = "metrics";
/** Extra attempts a step gets for attempts lost with their worker (crash, takeover). */
export const PLATFORM_RETRIES = 3;

export type Effect =
  | { type: "runway.send"; to: { kind: string; id: string }; event: { type: string } & Record<string, unknown> }
  | { type: "runway.publish"; subject: string; data: unknown }
  | { type: "runway.timer.set"; name: string; at: number; event: { type: string } & Record<string, unknown> }
  | { type: "runway.answer"; value: unknown }
  | { type: "runway.local"; channel: string; payload: unknown };

interface Draft {
  run: RunContext;
  plan: Plan;
  byId: Map<string, PlanNode>;
  now: number;
  event: ExecutionEvent;
  effects: Effect[];
}

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
      onRecover(d);
      break;
    case "step.heartbeat":
      onHeartbeat(d, event);
      break;
    case "step.lease":
      onLease(d, event);
      advance(d);
      break;
  }
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
  return { ...seed, lifecycle: queuedLifecycle(), created_at: event.now, cancellation_epoch: 0, nodes, result: null, result_truncated: false, error: null, cancel: null };
}

// ---- lifecycle --------------------------------------------------------------------------------

function move(d: Draft, op: RunOpEvent["op"], extra: Partial<RunOpEvent> = {}): boolean {
  const r = applyRunOp(d.run.lifecycle, { op, now: d.now, ...extra } as RunOpEvent);
  if (r.outcome !== "moved") return false;
  d.run.lifecycle = r.state;
  return true;
}

function publish(d: Draft, type: string, data: Record<string, unknown> = {}): void {
  const r = d.run;
  d.effects.push({ type: "runway.publish", subject: `rw.evt.${r.tenant}.${r.root_run_id}.${r.id}.${type}`, data: { type, run: r.id, tenant: r.tenant, at: d.now, ...data } });
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

function onCreate(d: Draft): void {
  move(d, "claim");
  publish(d, "run_started", { definition: d.run.definition, parent: d.run.parent_run_id });
  const schema = d.plan.input_schema;
  const checked = schema ? validateAgainstSchema(schema, d.run.input) : ({ ok: true } as const);
  if (!checked.ok) {
    finish(d, "failed", { code: "invalid_input", message: checked.errors.map((e) => `${e.path}: ${e.message}`).join("; ") });
  } else {
    advance(d);
  }
  d.effects.push({ type: "runway.answer", value: { outcome: "started", run: runSummary(d.run) } });
}

// ---- the walk ---------------------------------------------------------------------------------

function states(run: RunContext): Record<string, NodeState> {
  const out: Record<string, NodeState> = {};
  for (const [id, n] of Object.entries(run.nodes)) out[id] = { status: n.s, ...(n.output !== undefined ? { output: n.output } : {}), ...(n.taken ? { taken: n.taken } : {}) };
  return out;
}

function scopeOf(run: RunContext): Scope {
  const steps: Scope["steps"] = {};
  for (const [id, n] of Object.entries(run.nodes)) (steps as Record<string, unknown>)[id] = { status: n.s, ...(n.output !== undefined ? { output: n.output } : {}) };
  return { input: run.input, steps };
}

/** Starts every node that became ready and skips every node that never will, until nothing changes; then settles the run. */
function advance(d: Draft): void {
  for (let guard = 0; guard < d.plan.nodes.length * 4 + 8; guard++) {
    const { ready, skip } = readiness(d.plan, states(d.run));
    if (ready.length === 0 && skip.length === 0) break;
    for (const id of skip) {
      d.run.nodes[id] = { s: "skipped" };
      publish(d, "step_skipped", { node: id });
    }
    for (const id of ready) start(d, d.byId.get(id)!);
  }
  settleRun(d);
}

function fail(d: Draft, id: string, error: RunError, fatal = false): void {
  const n = d.run.nodes[id]!;
  n.s = "failed";
  n.error = error;
  if (fatal) n.fatal = true;
  publish(d, "step_failed", { node: id, error });
}

function succeed(d: Draft, id: string, output?: unknown): void {
  const n = d.run.nodes[id]!;
  n.s = "succeeded";
  if (output !== undefined) n.output = output;
  publish(d, "step_succeeded", { node: id });
}

function start(d: Draft, node: PlanNode): void {
  const n = d.run.nodes[node.id]!;
  const scope = scopeOf(d.run);
  switch (node.kind) {
    case "code": {
      const input = resolveTemplate(node.input ?? null, scope);
      if (!input.ok) return fail(d, node.id, { code: "reference_unreadable", message: `unreadable reference ${input.path}` }, true);
      n.s = "active";
      n.step = ready(pendingStep(), d.now);
      lease(d, node, n, undefined, input.value);
      return;
    }
    case "map": {
      const items = mapItems(node, scope);
      if (!items.ok) return fail(d, node.id, { code: items.code, message: items.detail }, items.code === "reference_unreadable");
      if (items.items.length === 0) return succeed(d, node.id, []);
      n.s = "active";
      n.items = items.items.map(() => ({ step: ready(pendingStep(), d.now) }));
      pumpMap(d, node);
      return;
    }
    case "subworkflow": {
      const child = d.event.child_ids?.[node.id];
      const definition = d.event.child_definitions?.[node.workflow];
      if (d.run.depth + 1 > MAX_DEPTH) return fail(d, node.id, { code: "depth_exceeded", message: `a child would be at depth ${d.run.depth + 1}; the limit is ${MAX_DEPTH}` });
      if (!child || !definition) return fail(d, node.id, { code: "definition_not_found", message: `workflow ${node.workflow} is not published` });
      const input = resolveTemplate(node.input ?? null, scope);
      if (!input.ok) return fail(d, node.id, { code: "reference_unreadable", message: `unreadable reference ${input.path}` }, true);
      n.s = "active";
      n.child = child;
      const r = d.run;
      d.effects.push({
        type: "runway.send",
        to: { kind: "run", id: child },
        event: {
          type: "run.create",
          run: { id: child, tenant: r.tenant, root_run_id: r.root_run_id, parent_run_id: r.id, parent_node: node.id, depth: r.depth + 1, definition, source: "workflow_step", start_key: `${r.id}:${node.id}`, lane: "batch", input: input.value },
        },
      });
      publish(d, "step_started", { node: node.id, child });
      return;
    }
    case "sleep": {
      n.s = "active";
      n.wake_at = d.now + node.duration_ms;
      d.effects.push({ type: "runway.timer.set", name: `sleep-${node.id}`, at: n.wake_at, event: { type: "timer.fired", kind: "sleep", node: node.id } });
      publish(d, "step_started", { node: node.id, wake_at: n.wake_at });
      return;
    }
    case "branch": {
      const c = evaluateCondition(node.condition, scope);
      if (!c.ok) return fail(d, node.id, { code: "condition_unreadable", message: `unreadable condition ${c.path}` }, true);
      n.taken = c.value ? "then" : "else";
      return succeed(d, node.id, { taken: n.taken });
    }
    case "parallel":
    case "branch_end": {
      const outcome = joinOutcome(d.plan, node.id, states(d.run));
      return outcome === "succeeded" ? succeed(d, node.id) : fail(d, node.id, { code: "branch_failed", message: `a member of ${node.id} failed` });
    }
  }
}

// ---- attempts ---------------------------------------------------------------------------------

function ready(step: StepState, now: number): StepState {
  const r = applyStepOp(step, { op: "ready", now });
  return r.outcome === "moved" ? r.state : step;
}

function policyOf(node: PlanNode): RetryPolicy {
  return "retry" in node ? node.retry : { max_attempts: 1, backoff_ms: 0, max_backoff_ms: 0, multiplier: 2 };
}

function timerName(node: string, item: number | undefined): string {
  return `retry-${node}-${item ?? "x"}`;
}

/** Extra lease time past a node's timeout when the engine sets no lease TTL. */
export const LEASE_GRACE_MS = 5_000;

function leaseTtl(d: Draft, node: PlanNode): number {
  return d.event.lease_ttl_ms ?? ("timeout_ms" in node ? node.timeout_ms : 30_000) + LEASE_GRACE_MS;
}

function leaseTimer(d: Draft, node: PlanNode, holder: { step?: StepState; lease_expires_at?: number }, item: number | undefined): void {
  const s = holder.step!;
  d.effects.push({
    type: "runway.timer.set",
    name: `lease-${node.id}-${item ?? "x"}`,
    at: holder.lease_expires_at!,
    event: { type: "timer.fired", kind: "lease", node: node.id, ...(item !== undefined ? { item } : {}), attempt: s.attempt, lease_epoch: s.lease_epoch },
  });
}

type Holder = { step?: StepState; lease_expires_at?: number; offered?: number };

/**
 * Makes a ready attempt run: offered to the node's fair scheduler when the engine schedules
 * (the scheduler answers with `step.lease`), leased at once otherwise. A step still in backoff
 * gets a retry timer instead.
 */
function lease(d: Draft, node: PlanNode, holder: Holder, item: number | undefined, input: unknown): void {
  if (d.event.scheduled && (node.kind === "code" || node.kind === "map")) return offer(d, node, holder, item);
  leaseNow(d, node, holder, item, input);
}

function classOf(lane: RunContext["lane"]): "interactive" | "automation" | "migration" {
  return lane === "interactive" ? "interactive" : lane === "migration" ? "migration" : "automation";
}

function offer(d: Draft, node: PlanNode, holder: Holder, item: number | undefined): void {
  const step = holder.step!;
  if (step.status !== "ready") return;
  if (step.not_before !== null && step.not_before > d.now) {
    d.effects.push({ type: "runway.timer.set", name: timerName(node.id, item), at: step.not_before, event: { type: "timer.fired", kind: "retry", node: node.id, ...(item !== undefined ? { item } : {}) } });
    return;
  }
  const attempt = step.attempt + 1;
  if (holder.offered === attempt) return;
  holder.offered = attempt;
  const r = d.run;
  d.effects.push({
    type: "runway.local",
    channel: STEP_READY,
    payload: <ReadyTicket>{
      id: `${r.id}/${node.id}${item !== undefined ? `[${item}]` : ""}/${attempt}`,
      run: r.id,
      node: node.id,
      ...(item !== undefined ? { item } : {}),
      attempt,
      tenant: r.tenant,
      project: "default",
      class: classOf(r.lane),
      priority: 5,
      deadline: null,
      cost: 1,
      enqueued_at: d.now,
      ...("provider" in node && node.provider ? { provider_key: node.provider } : {}),
    },
  });
}

/** READY → LEASED with a new lease epoch; arms the lease timer and hands the attempt to the executor. */
function leaseNow(d: Draft, node: PlanNode, holder: Holder, item: number | undefined, input: unknown, ticket?: string): void {
  const r = applyStepOp(holder.step!, { op: "lease", now: d.now });
  if (r.outcome !== "moved") {
    if (r.code === "not_before") d.effects.push({ type: "runway.timer.set", name: timerName(node.id, item), at: r.not_before, event: { type: "timer.fired", kind: "retry", node: node.id, ...(item !== undefined ? { item } : {}) } });
    return;
  }
  const s = r.state;
  holder.step = s;
  delete holder.offered;
  if (node.kind !== "code" && node.kind !== "map") return;
  holder.lease_expires_at = d.now + leaseTtl(d, node);
  leaseTimer(d, node, holder, item);
  d.effects.push({
    type: "runway.local",
    channel: STEP_EXECUTE,
    payload: <ExecuteRequest>{
      run: d.run.id,
      tenant: d.run.tenant,
      node: node.id,
      ...(item !== undefined ? { item } : {}),
      attempt: s.attempt,
      lease_epoch: s.lease_epoch,
      handler: node.handler,
      input,
      timeout_ms: node.timeout_ms,
      cancellation_epoch: d.run.cancellation_epoch,
      lease_expires_at: holder.lease_expires_at,
      ...(ticket ? { ticket } : {}),
    },
  });
  publish(d, "step_started", { node: node.id, ...(item !== undefined ? { item } : {}), attempt: s.attempt });
}

/** The scheduler's grant for an offered attempt. */
function onLease(d: Draft, e: Extract<ExecutionEvent, { type: "step.lease" }>): void {
  const node = d.byId.get(e.node)!;
  const n = d.run.nodes[e.node]!;
  const holder = e.item === undefined ? n : n.items![e.item]!;
  const scope = scopeOf(d.run);
  let input: { ok: true; value: unknown } | { ok: false; path: string };
  if (node.kind === "map") {
    const list = mapItems(node, scope);
    input = list.ok ? mapItemInput(node, scope, list.items[e.item ?? 0], e.item ?? 0) : { ok: false, path: node.items };
  } else {
    input = resolveTemplate(("input" in node ? node.input : null) ?? null, scope);
  }
  if (!input.ok) return fail(d, node.id, { code: "reference_unreadable", message: `unreadable reference ${input.path}` }, true);
  const ticket = `${d.run.id}/${e.node}${e.item !== undefined ? `[${e.item}]` : ""}/${e.attempt}`;
  leaseNow(d, node, holder, e.item, input.value, ticket);
  const s = holder.step!;
  d.effects.push({ type: "runway.answer", value: { outcome: "leased", attempt: s.attempt, lease_epoch: s.lease_epoch } });
}

/** Keeps up to `concurrency` items of a map in flight, in input order; settles the map when every item has. */
function pumpMap(d: Draft, node: Extract<PlanNode, { kind: "map" }>): void {
  const n = d.run.nodes[node.id]!;
  const items = n.items!;
  let inFlight = items.filter((i) => i.step.status === "leased" || i.step.status === "running" || (i.step.status === "ready" && i.offered !== undefined)).length;
  const scope = scopeOf(d.run);
  const list = mapItems(node, scope);
  for (let i = 0; i < items.length && inFlight < node.concurrency; i++) {
    const it = items[i]!;
    if (it.step.status !== "ready" || it.offered !== undefined) continue;
    const input = list.ok ? mapItemInput(node, scope, list.items[i], i) : ({ ok: false, path: node.items } as const);
    if (!input.ok) return fail(d, node.id, { code: "reference_unreadable", message: `unreadable reference ${input.path}` }, true);
    lease(d, node, it, i, input.value);
    if ((it.step.status as string) === "leased" || it.offered !== undefined) inFlight++;
  }
  if (items.every((i) => i.step.status === "succeeded" || i.step.status === "failed" || i.step.status === "cancelled")) {
    const failed = items.flatMap((it, i) => (it.step.status === "succeeded" ? [] : [i]));
    if (failed.length === 0) succeed(d, node.id, items.map((it) => it.output ?? null));
    else {
      n.output = items.map((it) => it.output ?? null);
      fail(d, node.id, { code: "map_item_failed", message: `${failed.length} of ${items.length} items failed (first: #${failed[0]})` });
    }
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
  if (node.kind === "map") {
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

/** A lease past its expiry is lost: the attempt fails `worker_lost` and the step retries under its policy. */
function expireLease(d: Draft, node: PlanNode, item: number | undefined): void {
  const n = d.run.nodes[node.id]!;
  const holder = item === undefined ? n : n.items?.[item];
  if (!holder?.step || holder.lease_expires_at === undefined) return;
  if (d.now < holder.lease_expires_at) return leaseTimer(d, node, holder, item);
  const lost: StepError = { code: "worker_lost", message: "the attempt's lease expired without a heartbeat", retryable: true };
  const r = applyStepOp(holder.step, { op: "fail", now: d.now, attempt: holder.step.attempt, lease_epoch: holder.step.lease_epoch, error: lost, policy: policyOf(node) });
  if (r.outcome !== "moved") return;
  holder.step = r.state;
  delete holder.lease_expires_at;
  publish(d, "step_lease_expired", { node: node.id, ...(item !== undefined ? { item } : {}), attempt: r.state.attempt });
  d.effects.push({ type: "runway.local", channel: METRICS_CHANNEL, payload: { counter: "lease_expiries", tenant: d.run.tenant } });
  if (node.kind === "map") return pumpMap(d, node);
  if (r.state.status === "ready") {
    const input = resolveTemplate(("input" in node ? node.input : null) ?? null, scopeOf(d.run));
    lease(d, node, n, undefined, input.ok ? input.value : null);
  } else {
    fail(d, node.id, { code: "worker_lost", message: lost.message });
  }
}

function onHeartbeat(d: Draft, e: Extract<ExecutionEvent, { type: "step.heartbeat" }>): void {
  const node = d.byId.get(e.node)!;
  const n = d.run.nodes[e.node]!;
  const holder = e.item === undefined ? n : n.items![e.item]!;
  holder.lease_expires_at = d.now + leaseTtl(d, node);
  if (holder.step!.status === "leased") {
    const r = applyStepOp(holder.step!, { op: "start", now: d.now, attempt: e.attempt, lease_epoch: e.lease_epoch });
    if (r.outcome === "moved") holder.step = r.state;
  }
  leaseTimer(d, node, holder, e.item);
}

function onChild(d: Draft, e: Extract<ExecutionEvent, { type: "child.settled" }>): void {
  if (e.status === "succeeded") succeed(d, e.node, e.result ?? null);
  else fail(d, e.node, { code: e.status === "cancelled" ? "child_cancelled" : "child_failed", message: e.error?.message ?? `child run ${e.child} ${e.status}` });
  advance(d);
}

/** Cancellation: the status first, then no further scheduling; active children are cancelled too. */
function onCancel(d: Draft, reason: string, by: string): void {
  if (!move(d, "cancel")) return;
  d.run.cancel = { reason, by, at: d.now };
  d.run.cancellation_epoch++;
  for (const [id, n] of Object.entries(d.run.nodes)) {
    if (n.s !== "pending" && n.s !== "active") continue;
    n.s = "cancelled";
    if (n.step && !["succeeded", "failed", "skipped", "cancelled"].includes(n.step.status)) {
      const r = applyStepOp(n.step, { op: "cancel", now: d.now });
      if (r.outcome === "moved") n.step = r.state;
    }
    for (const it of n.items ?? []) {
      const r = applyStepOp(it.step, { op: "cancel", now: d.now });
      if (r.outcome === "moved") it.step = r.state;
    }
    if (n.child) d.effects.push({ type: "runway.send", to: { kind: "run", id: n.child }, event: { type: "run.cancel", reason: "parent_cancelled", by: d.run.id } });
    void id;
  }
  publish(d, "run_cancelled", { reason, by });
  notifyParent(d);
}

/** After a restart or takeover: attempts that lived in the lost process fail as `worker_lost` and retry now. */
function onRecover(d: Draft): void {
  // Offers to the lost process's scheduler are gone too: offer again.
  for (const n of Object.values(d.run.nodes)) {
    if (n.offered !== undefined) delete n.offered;
    for (const it of n.items ?? []) if (it.offered !== undefined) delete it.offered;
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
    if (node.kind === "code" && n.step && (n.step.status === "leased" || n.step.status === "running")) {
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
      for (const it of n.items) {
        if (it.step.status !== "leased" && it.step.status !== "running") continue;
        const r = applyStepOp(it.step, { op: "fail", now: d.now, attempt: it.step.attempt, lease_epoch: it.step.lease_epoch, error: lost, policy });
        if (r.outcome === "moved") it.step = r.state;
      }
      pumpMap(d, node);
    }
  }
  advance(d);
}

// ---- settling the run -------------------------------------------------------------------------

function settleRun(d: Draft): void {
  if (isTerminal(d.run.lifecycle.status)) return;
  const outcome = runOutcome(d.plan, states(d.run));
  if (!outcome.done) {
    parkOrRun(d);
    return;
  }
  const fatal = Object.entries(d.run.nodes).filter(([, n]) => n.s === "failed" && n.fatal).map(([id]) => id);
  if (fatal.length > 0) {
    const first = d.run.nodes[fatal[0]!]!.error!;
    return finish(d, "failed", { code: first.code, message: first.message, nodes: fatal });
  }
  if (outcome.status === "failed") {
    const first = d.run.nodes[outcome.failed[0]!]?.error;
    return finish(d, "failed", { code: "node_failed", message: first ? `${outcome.failed[0]}: ${first.message}` : "a node failed", nodes: outcome.failed });
  }
  finish(d, "succeeded");
}

/** A run whose only pending work is timers holds no worker: it is `waiting` on a delay. */
function parkOrRun(d: Draft): void {
  const active = d.plan.nodes.filter((n) => d.run.nodes[n.id]!.s === "active");
  const sleeping = active.filter((n) => n.kind === "sleep");
  const lc = d.run.lifecycle;
  if (active.length > 0 && sleeping.length === active.length) {
    const expires = Math.max(...sleeping.map((n) => d.run.nodes[n.id]!.wake_at ?? d.now)) + WAIT_GRACE_MS;
    if (lc.status !== "waiting" || lc.waiting_expires_at !== expires) {
      move(d, "mark_waiting", { on: "delay", ref: sleeping[0]!.id, expires_at: expires } as Partial<RunOpEvent>);
      d.effects.push({ type: "runway.timer.set", name: "wait-deadline", at: expires, event: { type: "timer.fired", kind: "wait", node: sleeping[0]!.id } });
      publish(d, "run_waiting", { on: "delay", until: expires - WAIT_GRACE_MS });
    }
  } else if (lc.status === "waiting") {
    move(d, "resume");
  }
}

function finish(d: Draft, status: "succeeded" | "failed", error?: RunError): void {
  if (d.run.lifecycle.status === "waiting") move(d, "resume");
  if (!move(d, status === "succeeded" ? "succeed" : "fail")) return;
  const result = runResult(d.plan, states(d.run), scopeOf(d.run));
  if (result.ok) {
    const b = bound(result.value);
    d.run.result = b.value;
    d.run.result_truncated = b.truncated;
  }
  d.run.error = error ?? null;
  publish(d, status === "succeeded" ? "run_succeeded" : "run_failed", error ? { error } : {});
  notifyParent(d);
}

function notifyParent(d: Draft): void {
  const r = d.run;
  if (!r.parent_run_id || !r.parent_node) {
    // A top-level run was admitted by its tenant: give the slot back.
    d.effects.push({ type: "runway.send", to: { kind: "tenant", id: r.tenant }, event: { type: "tenant.run_ended", run_id: r.id, project: "default" } });
    return;
  }
  const status = r.lifecycle.status as "succeeded" | "failed" | "cancelled";
  d.effects.push({
    type: "runway.send",
    to: { kind: "run", id: r.parent_run_id },
    event: { type: "child.settled", node: r.parent_node, child: r.id, status, ...(status === "succeeded" ? { result: r.result } : { error: r.error ?? { code: status, message: `child ${status}` } }) },
  });
}
