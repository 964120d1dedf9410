import { applyStepOp, type RetryPolicy, type StepError, type StepState } from "../step/index.js";
import { mapItemInput, mapItems, resolveTemplate, type PlanNode } from "../workflow/index.js";
import { abortAttempts, fail, METRICS_CHANNEL, publish, scopeOf, STEP_EXECUTE, STEP_LAPSED, STEP_READY, succeed, type Draft } from "./draft.js";
import type { ExecuteRequest, ExecutionEvent, ReadyTicket, RunContext } from "./types.js";

/**
 * Attempts: how a ready step gets a worker (offered to the node's scheduler, or leased at
 * once), its lease and heartbeats, lease expiry, retries, and the fan-out of map items.
 */
export function ready(step: StepState, now: number): StepState {
  const r = applyStepOp(step, { op: "ready", now });
  return r.outcome === "moved" ? r.state : step;
}

export function policyOf(node: PlanNode): RetryPolicy {
  return "retry" in node ? node.retry : { max_attempts: 1, backoff_ms: 0, max_backoff_ms: 0, multiplier: 2 };
}

export function timerName(node: string, item: number | undefined): string {
  return `retry-${node}-${item ?? "x"}`;
}

/** Extra lease time past a node's timeout when the engine sets no lease TTL. */
export const LEASE_GRACE_MS = 5_000;

export function leaseTtl(d: Draft, node: PlanNode): number {
  return d.event.lease_ttl_ms ?? ("timeout_ms" in node ? node.timeout_ms : 30_000) + LEASE_GRACE_MS;
}

export function leaseTimer(d: Draft, node: PlanNode, holder: { step?: StepState; lease_expires_at?: number }, item: number | undefined): void {
  const s = holder.step!;
  d.effects.push({
    type: "runway.timer.set",
    name: `lease-${node.id}-${item ?? "x"}`,
    at: holder.lease_expires_at!,
    event: { type: "timer.fired", kind: "lease", node: node.id, ...(item !== undefined ? { item } : {}), attempt: s.attempt, lease_epoch: s.lease_epoch },
  });
}

export type Holder = { step?: StepState; lease_expires_at?: number; offered?: number; offered_at?: number; reoffered?: boolean };

/**
 * Makes a ready attempt run: offered to the node's fair scheduler when the engine schedules
 * (the scheduler answers with `step.lease`), leased at once otherwise. A step still in backoff
 * gets a retry timer instead.
 */
export function lease(d: Draft, node: PlanNode, holder: Holder, item: number | undefined, input: unknown): void {
  if (d.event.scheduled && (node.kind === "code" || node.kind === "map")) return offer(d, node, holder, item);
  leaseNow(d, node, holder, item, input);
}

export const DEFAULT_PRIORITY = 5;

/** Estimated cost of one attempt of `node` (what fair share counts); 1 when the node declares none. */
export function costOf(node: PlanNode): number {
  return (node.kind === "code" || node.kind === "map") && node.cost !== undefined ? node.cost : 1;
}

export function classOf(lane: RunContext["lane"]): "interactive" | "automation" | "migration" {
  return lane === "interactive" ? "interactive" : lane === "migration" ? "migration" : "automation";
}

export function offer(d: Draft, node: PlanNode, holder: Holder, item: number | undefined): void {
  const step = holder.step!;
  if (step.status !== "ready") return;
  if (step.not_before !== null && step.not_before > d.now) {
    d.effects.push({
      type: "runway.timer.set",
      name: timerName(node.id, item),
      at: step.not_before,
      event: { type: "timer.fired", kind: "retry", node: node.id, ...(item !== undefined ? { item } : {}) },
    });
    return;
  }
  const attempt = step.attempt + 1;
  if (holder.offered === attempt) return;
  holder.offered = attempt;
  holder.offered_at = d.now;
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
      project: r.project ?? "default",
      class: classOf(r.lane),
      priority: r.priority ?? DEFAULT_PRIORITY,
      deadline: r.deadline ?? null,
      cost: costOf(node),
      enqueued_at: d.now,
      ...("provider" in node && node.provider ? { provider_key: node.provider } : {}),
    },
  });
}

/** READY → LEASED with a new lease epoch; arms the lease timer and hands the attempt to the executor. */
export function leaseNow(d: Draft, node: PlanNode, holder: Holder, item: number | undefined, input: unknown, ticket?: string): void {
  const r = applyStepOp(holder.step!, { op: "lease", now: d.now });
  if (r.outcome !== "moved") {
    if (r.code === "not_before")
      d.effects.push({
        type: "runway.timer.set",
        name: timerName(node.id, item),
        at: r.not_before,
        event: { type: "timer.fired", kind: "retry", node: node.id, ...(item !== undefined ? { item } : {}) },
      });
    return;
  }
  const s = r.state;
  holder.step = s;
  delete holder.offered;
  delete holder.offered_at;
  delete holder.reoffered;
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
export function onLease(d: Draft, e: Extract<ExecutionEvent, { type: "step.lease" }>): void {
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
  if (!input.ok) return fail(d, node.id, { code: "reference_unreadable", message: `unreadable reference ${input.path}` });
  const ticket = `${d.run.id}/${e.node}${e.item !== undefined ? `[${e.item}]` : ""}/${e.attempt}`;
  leaseNow(d, node, holder, e.item, input.value, ticket);
  const s = holder.step!;
  d.effects.push({ type: "runway.answer", value: { outcome: "leased", attempt: s.attempt, lease_epoch: s.lease_epoch } });
}

/** Keeps up to `concurrency` items of a map in flight, in input order; settles the map when every item has. */
export function pumpMap(d: Draft, node: Extract<PlanNode, { kind: "map" }>): void {
  const n = d.run.nodes[node.id]!;
  const items = n.items!;
  let inFlight = items.filter(
    (i) => i.step.status === "leased" || i.step.status === "running" || (i.step.status === "ready" && i.offered !== undefined),
  ).length;
  const scope = scopeOf(d.run);
  const list = mapItems(node, scope);
  for (let i = 0; i < items.length && inFlight < node.concurrency; i++) {
    const it = items[i]!;
    if (it.step.status !== "ready" || it.offered !== undefined) continue;
    const input = list.ok ? mapItemInput(node, scope, list.items[i], i) : ({ ok: false, path: node.items } as const);
    if (!input.ok) return fail(d, node.id, { code: "reference_unreadable", message: `unreadable reference ${input.path}` });
    lease(d, node, it, i, input.value);
    if ((it.step.status as string) === "leased" || it.offered !== undefined) inFlight++;
  }
  if (items.every((i) => i.step.status === "succeeded" || i.step.status === "failed" || i.step.status === "cancelled")) {
    const failed = items.flatMap((it, i) => (it.step.status === "succeeded" ? [] : [i]));
    if (failed.length === 0)
      succeed(
        d,
        node.id,
        items.map((it) => it.output ?? null),
      );
    else {
      n.output = items.map((it) => it.output ?? null);
      fail(d, node.id, { code: "map_item_failed", message: `${failed.length} of ${items.length} items failed (first: #${failed[0]})` });
    }
  }
}

/** A lease past its expiry (at `judgedAt`, default now) is lost: the attempt fails `worker_lost` and the step retries under its policy. */
export function expireLease(d: Draft, node: PlanNode, item: number | undefined, judgedAt = d.now): void {
  const n = d.run.nodes[node.id]!;
  const holder = item === undefined ? n : n.items?.[item];
  if (!holder?.step || holder.lease_expires_at === undefined) return;
  if (judgedAt < holder.lease_expires_at) return leaseTimer(d, node, holder, item);
  const lost: StepError = { code: "worker_lost", message: "the attempt's lease expired without a heartbeat", retryable: true };
  const r = applyStepOp(holder.step, {
    op: "fail",
    now: d.now,
    attempt: holder.step.attempt,
    lease_epoch: holder.step.lease_epoch,
    error: lost,
    policy: policyOf(node),
  });
  if (r.outcome !== "moved") return;
  // The lapsed attempt may still be running here (a handler deaf to its heartbeat): stop it.
  abortAttempts(
    d,
    [{ node: node.id, ...(item !== undefined ? { item } : {}), attempt: holder.step.attempt, lease_epoch: holder.step.lease_epoch }],
    "lease_expired",
  );
  holder.step = r.state;
  delete holder.lease_expires_at;
  publish(d, "step_lease_expired", { node: node.id, ...(item !== undefined ? { item } : {}), attempt: r.state.attempt });
  d.effects.push({ type: "runway.local", channel: METRICS_CHANNEL, payload: { counter: "lease_expiries", tenant: d.run.tenant } });
  // The lost attempt's scheduler slot, if it still holds one, is free: its worker is gone or a zombie.
  d.effects.push({
    type: "runway.local",
    channel: STEP_LAPSED,
    payload: { ticket: `${d.run.id}/${node.id}${item !== undefined ? `[${item}]` : ""}/${r.state.attempt}` },
  });
  if (node.kind === "map") return pumpMap(d, node);
  if (r.state.status === "ready") {
    const input = resolveTemplate(("input" in node ? node.input : null) ?? null, scopeOf(d.run));
    lease(d, node, n, undefined, input.ok ? input.value : null);
  } else {
    fail(d, node.id, { code: "worker_lost", message: lost.message });
  }
}

export function onHeartbeat(d: Draft, e: Extract<ExecutionEvent, { type: "step.heartbeat" }>): void {
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

/** An attempt still executing in the process that claims its run's partition again. */
export type AliveAttempt = { node: string; item?: number; attempt: number; lease_epoch: number };

export function isAlive(alive: readonly AliveAttempt[], node: string, item: number | undefined, step: { attempt: number; lease_epoch: number }): boolean {
  return alive.some((a) => a.node === node && a.item === item && a.attempt === step.attempt && a.lease_epoch === step.lease_epoch);
}

/**
 * An offer made again by the sweep and still not leased a pass later: the attempt is minted (so
 * a grant still on its way is fenced) and fails `dispatch_lost`, retryable, under the step's own
 * policy. Judged at the sweeper's clock `at`.
 */
export function loseDispatch(d: Draft, node: PlanNode, item: number | undefined, at: number): void {
  const n = d.run.nodes[node.id]!;
  const holder: Holder | undefined = item === undefined ? n : n.items?.[item];
  if (!holder?.step || holder.step.status !== "ready") return;
  const minted = applyStepOp(holder.step, { op: "lease", now: Math.max(d.now, at) });
  if (minted.outcome !== "moved") return;
  const lost: StepError = { code: "dispatch_lost", message: "offered to the scheduler twice and never leased", retryable: true };
  const r = applyStepOp(minted.state, {
    op: "fail",
    now: d.now,
    attempt: minted.state.attempt,
    lease_epoch: minted.state.lease_epoch,
    error: lost,
    policy: policyOf(node),
  });
  if (r.outcome !== "moved") return;
  holder.step = r.state;
  delete holder.offered;
  delete holder.offered_at;
  delete holder.reoffered;
  d.effects.push({
    type: "runway.local",
    channel: STEP_LAPSED,
    payload: { ticket: `${d.run.id}/${node.id}${item !== undefined ? `[${item}]` : ""}/${minted.state.attempt}` },
  });
  if (node.kind === "map") return pumpMap(d, node);
  if (r.state.status === "ready") {
    publish(d, "step_retrying", { node: node.id, attempt: minted.state.attempt, error: lost, not_before: r.state.not_before });
    const input = resolveTemplate(("input" in node ? node.input : null) ?? null, scopeOf(d.run));
    lease(d, node, n, undefined, input.ok ? input.value : null);
  } else {
    fail(d, node.id, { code: "dispatch_lost", message: lost.message });
  }
}
