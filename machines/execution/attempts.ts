import { applyStepOp, type RetryPolicy, type StepError, type StepState } from "../step/index.js";
import { isPlatformStop, mapItemInput, mapItems, resolveTemplate, WIDE_APPROVAL_STOP, type PlanNode } from "../workflow/index.js";
import { settleStop, stopMapIdle } from "./ceilings.js";
import { gateRuleOf, withinScope } from "./gates.js";
import { addItem, hasLive, itemLoad, liveItem, liveItems, removeItem } from "./items.js";
import {
  abortAttempts,
  fail,
  holdersOf,
  liveAttempts,
  MAP_OUTPUT_LIMIT,
  PLATFORM_RETRIES,
  publish,
  recordItem,
  scopeOf,
  STEP_LAPSED,
  STEP_READY,
  succeed,
  type Draft,
} from "./draft.js";
import type { ItemRun, NodeRun, RunContext } from "./types.js";
import type { ExecuteRequest, ReadyTicket } from "./requests.js";

/**
 * Attempts: offers, retries, map fan-out (their leases: leases.ts). The scheduler's grant is not written:
 * an attempt runs under the attempt number and lease epoch its offer named, fenced by them. A short
 * step's result is its one write (lease and settle together); only one that outlives
 * `lease_after_ms` is leased durably, by a heartbeat.
 */
export function ready(step: StepState, now: number): StepState {
  const r = applyStepOp(step, { op: "ready", now });
  return r.outcome === "moved" ? r.state : step;
}

/**
 * The node's retry policy; a step that parked an attempt on its gated call's approval gets that
 * attempt back (it made no call), an agent each attempt it parked (one per gated proposal asked).
 */
export function policyOf(node: PlanNode, holder?: Holder): RetryPolicy {
  const own = "retry" in node ? node.retry : { max_attempts: 1, backoff_ms: 0, max_backoff_ms: 0, multiplier: 2 };
  if (!holder || !("approval" in holder) || !holder.approval) return own;
  return { ...own, max_attempts: own.max_attempts + Math.max(1, holder.parks ?? 0) };
}

/** An attempt stopped because its node no longer surely held the run's partition (see `failurePolicy`). */
export const LEASE_LAPSED = "lease_lapsed";
/** An attempt that ended with nothing its run took: a write of its journal was refused (see `failurePolicy`). */
export const ATTEMPT_INTERRUPTED = "attempt_interrupted";

/**
 * The retry policy a failure is judged under: the node's own, but an attempt that stopped because
 * its node no longer surely held the run's partition (`lease_lapsed`, reported by that node) is the
 * platform's failure, as a lost worker is (`onRecover`): retried at once, outside the node's
 * retries. One whose worker thread died under it (`worker_crashed`: also a node stopping, which
 * destroys its pool) is retried after the node's backoff, also outside its retries.
 */
export function failurePolicy(node: PlanNode, holder: Holder, error: StepError): RetryPolicy {
  const own = policyOf(node, holder);
  if (error.code === LEASE_LAPSED || error.code === ATTEMPT_INTERRUPTED) return { ...own, backoff_ms: 0, max_attempts: own.max_attempts + PLATFORM_RETRIES };
  return error.code === "worker_crashed" ? { ...own, max_attempts: own.max_attempts + PLATFORM_RETRIES } : own;
}

export function timerName(node: string, item: number | undefined): string {
  return `retry-${node}-${item ?? "x"}`;
}

/** Extra lease time past a node's timeout when the engine sets no lease TTL. */
export const LEASE_GRACE_MS = 5_000;
/** A running attempt is leased durably once it has run this long (or a third of its lease, if shorter). */
export const LEASE_AFTER_MS = 5_000;

export function leaseTtl(d: Draft, node: PlanNode): number {
  return d.event.lease_ttl_ms ?? ("timeout_ms" in node ? node.timeout_ms : 30_000) + LEASE_GRACE_MS;
}

export type Holder = ItemRun | NodeRun;

/** The holder of a node's attempt: the node, or a map item in flight. */
export function holderOf(n: NodeRun, item: number | undefined): Holder | undefined {
  if (item === undefined) return n.step ? n : undefined;
  return n.map ? liveItem(n.map, String(item)) : undefined;
}

export const DEFAULT_PRIORITY = 5;

/** Estimated cost of one attempt of `node` (what fair share counts); 1 when the node declares none. */
export function costOf(node: PlanNode): number {
  return (node.kind === "code" || node.kind === "map") && node.cost !== undefined ? node.cost : 1;
}

export function classOf(lane: RunContext["lane"] | undefined): "interactive" | "automation" | "migration" {
  return lane === "interactive" ? "interactive" : lane === "migration" ? "migration" : "automation";
}

export function ticketId(run: string, node: string, item: number | undefined, attempt: number): string {
  return `${run}/${node}${item !== undefined ? `[${item}]` : ""}/${attempt}`;
}

/** The input of a node's attempt (a map item's, with `item` and `index` bound), resolved now. */
function inputOf(d: Draft, node: PlanNode, item: number | undefined): { ok: true; value: unknown } | { ok: false; path: string } {
  const scope = scopeOf(d);
  if (node.kind === "map") {
    const list = mapItems(node, scope);
    return list.ok ? mapItemInput(node, scope, list.items[item ?? 0], item ?? 0) : { ok: false, path: node.items };
  }
  return resolveTemplate(("input" in node ? node.input : null) ?? null, scope);
}

/**
 * Offers a ready attempt to the node's scheduler (a step still in backoff gets a retry timer
 * instead). The ticket carries the attempt the grant runs: the next attempt number and lease
 * epoch, and the input resolved now. An unreadable input is a platform stop of the node.
 */
export function offer(d: Draft, node: PlanNode, holder: Holder, item: number | undefined): void {
  const step = holder.step!;
  // A step held for reconciliation, or on its gated call's pending approval, is offered to nobody
  // until a person settles its intent or decides. Under a cancel or a ceiling nothing new runs.
  if (step.status !== "ready" || holder.reconcile || d.run.cancel || d.run.ceiling || (node.kind !== "code" && node.kind !== "map")) return;
  if ("approval" in holder && holder.approval?.state === "pending") return;
  // An agent waiting on its subagent's child run: the child's end offers it again.
  if ("subagent" in holder && holder.subagent) return;
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
  const input = inputOf(d, node, item);
  if (!input.ok) return fail(d, node.id, { code: "reference_unreadable", message: `unreadable reference ${input.path}` });
  holder.offered = attempt;
  holder.offered_at = d.now;
  const r = d.run;
  const id = ticketId(r.id, node.id, item, attempt);
  const ttl = leaseTtl(d, node);
  const request = executeRequest(d, node, item, attempt, step.lease_epoch + 1, input.value, id, ttl);
  d.effects.push({
    type: "runway.local",
    channel: STEP_READY,
    payload: <ReadyTicket>{
      id,
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
      request,
    },
  });
}

/** What the worker runs for an offered attempt: its number and lease epoch, its input resolved now, and the run's fences. */
function executeRequest(
  d: Draft,
  node: Extract<PlanNode, { kind: "code" | "map" }>,
  item: number | undefined,
  attempt: number,
  leaseEpoch: number,
  input: unknown,
  ticket: string,
  ttl: number,
): ExecuteRequest {
  const r = d.run;
  const gate = gateRuleOf(d.plan, node, r);
  return {
    run: r.id,
    root: r.root_run_id,
    tenant: r.tenant,
    node: node.id,
    ...(item !== undefined ? { item } : {}),
    attempt,
    lease_epoch: leaseEpoch,
    handler: node.handler,
    input,
    ...(node.kind === "code" && node.tool ? { tool: node.tool } : {}),
    // Under a tool scope, the model sees only its tools within it.
    ...(node.kind === "code" && node.agent
      ? { agent: r.tool_scope ? { ...node.agent, tools: withinScope(node.agent.tools ?? [], r.tool_scope) } : node.agent }
      : {}),
    ...(gate ? { gate } : {}),
    ...(r.replay_of ? { replay_of: r.replay_of } : {}),
    ...(r.cost_ceiling_cents !== undefined ? { cost_ceiling_cents: r.cost_ceiling_cents } : {}),
    ...(r.tool_scope ? { tool_scope: r.tool_scope } : {}),
    ...(r.trace ? { trace: r.trace.trace_id } : {}),
    timeout_ms: node.timeout_ms,
    cancellation_epoch: r.cancellation_epoch,
    ticket,
    lease_after_ms: Math.min(LEASE_AFTER_MS, Math.floor(ttl / 3)),
  };
}

/** The offered attempt `attempt` is the holder's next one (granted in memory, not yet written). */
export function isOffered(holder: Holder | undefined, attempt: number, leaseEpoch: number): boolean {
  return !!holder?.step && holder.step.status === "ready" && holder.offered === attempt && holder.step.lease_epoch + 1 === leaseEpoch;
}

/** The attempt holds a lease: leased, or running. */
export function isLeased(holder: Holder | undefined, attempt: number, leaseEpoch: number): boolean {
  const s = holder?.step;
  return !!s && (s.status === "leased" || s.status === "running") && s.attempt === attempt && s.lease_epoch === leaseEpoch;
}

/** Writes the lease a granted offer ran under (READY → LEASED: the attempt number and lease epoch the offer named). */
export function takeOffer(d: Draft, holder: Holder): void {
  const r = applyStepOp(holder.step!, { op: "lease", now: d.now });
  if (r.outcome !== "moved") return;
  holder.step = r.state;
  delete holder.offered;
  delete holder.offered_at;
  delete holder.reoffered;
}

/**
 * The current attempt ends, parked: its step goes back to ready with `error`, held until
 * something outside the run moves it (a decision, a settled intent). The parked attempt does
 * not count against the node's retries. Answers the parked attempt's number.
 */
export function parkAttempt(d: Draft, holder: Holder, node: PlanNode, error: StepError): number {
  if (holder.step!.status === "ready") takeOffer(d, holder);
  const s = holder.step!;
  const r = applyStepOp(s, {
    op: "fail",
    now: d.now,
    attempt: s.attempt,
    lease_epoch: s.lease_epoch,
    error,
    policy: { ...policyOf(node), backoff_ms: 0, max_attempts: s.attempt + 1 },
  });
  if (r.outcome === "moved") holder.step = r.state;
  delete holder.lease_expires_at;
  return s.attempt;
}

/**
 * Keeps up to `concurrency` items of a map in flight, in input order: items waiting to retry are
 * offered again, new ones made from the list. Settles the map when every item has.
 */
export function pumpMap(d: Draft, node: Extract<PlanNode, { kind: "map" }>): void {
  const n = d.run.nodes[node.id]!;
  const map = n.map!;
  if (map.stop || d.run.ceiling) {
    if (n.s === "active") stopMapIdle(d, node);
    return;
  }
  // Counted once and kept up to date here (an offer makes one more); carried from the last
  // decision through the items it reached (items.ts), not recounted over every live item.
  const load = itemLoad(map);
  let inFlight = load.inFlight;
  if (load.waiting > 0) {
    for (const i in map.live) {
      if (n.s !== "active") return;
      if (inFlight >= node.concurrency) break;
      const seen = map.live[i]!;
      if (seen.step.status === "ready" && seen.offered === undefined) {
        const it = liveItem(map, i)!;
        offer(d, node, it, Number(i));
        if (it.offered !== undefined) inFlight++;
      }
    }
  }
  while (n.s === "active" && map.next < map.total && inFlight < node.concurrency) {
    const i = map.next++;
    const it: ItemRun = {
      step: ready({ status: "pending", attempt: 0, lease_epoch: 0, not_before: null, last_error: null, started_at: null, ended_at: null }, d.now),
    };
    addItem(map, String(i), it);
    offer(d, node, it, i);
    if (it.offered !== undefined) inFlight++;
  }
  if (n.s !== "active" || map.next < map.total || hasLive(map)) return;
  if (map.failed === 0) succeed(d, node.id);
  else fail(d, node.id, { code: "map_item_failed", message: `${map.failed} of ${map.total} items failed (first: #${map.first_failed})` });
}

/**
 * An item whose attempt ended for good leaves the map's live set: a success records its output
 * (a journal fact); a map whose outputs together would pass {@link MAP_OUTPUT_LIMIT} fails
 * `fanout_output_too_large` and stops its other items. `outputBytes`: the output's JSON size, as
 * the host measured it (`Prepared.output_bytes`).
 */
export function settleItem(d: Draft, node: Extract<PlanNode, { kind: "map" }>, i: number, output: unknown, outputBytes = 0): void {
  const n = d.run.nodes[node.id]!;
  const map = n.map!;
  const it = map.live[String(i)];
  if (!it) return;
  if (it.step.status === "succeeded") {
    // Under a held platform stop the map fails whatever its items return: no output is kept.
    if (map.stop) return removeItem(map, String(i));
    const value = output === undefined ? null : output;
    map.output_bytes += outputBytes;
    if (map.output_bytes > MAP_OUTPUT_LIMIT) {
      removeItem(map, String(i));
      stopItems(d, node.id, "fanout_output_too_large");
      return fail(d, node.id, {
        code: "fanout_output_too_large",
        message: `the items' combined output would exceed ${MAP_OUTPUT_LIMIT} bytes (results over 32 KiB are stored by reference; make items return less or split the map)`,
      });
    }
    map.succeeded++;
    recordItem(d, node.id, i, value);
  } else if (it.step.status === "failed") {
    const error = it.step.last_error;
    if (error?.code === "tool_needs_approval") {
      // An approval is not one failed item (C067): the item cannot wait for a person, so the
      // batch is cancelled now and the map fails under a code its run does not tolerate. It spent
      // no retry (the failure is not retryable); a platform stop held for earlier items still wins.
      removeItem(map, String(i));
      stopItems(d, node.id, WIDE_APPROVAL_STOP);
      return fail(d, node.id, map.stop?.error ?? { code: WIDE_APPROVAL_STOP, message: `item #${i}: ${error.message}` });
    }
    if (isPlatformStop(error?.code)) {
      // A platform stop wins over everything else in the batch, a ceiling included, at any input
      // position; among several, the lowest position's (ceilings.ts `settleStop`).
      removeItem(map, String(i));
      if (map.stop === undefined || i < map.stop.at) map.stop = { at: i, error: { code: error.code, message: `item #${i}: ${error.message}` } };
      return settleStop(d, node);
    }
    map.failed++;
    map.first_failed = Math.min(map.first_failed ?? i, i);
  } else return;
  removeItem(map, String(i));
}

/** A map that stops early: its items in flight are aborted and cancelled (a late report is then refused). */
export function stopItems(d: Draft, id: string, reason: string): void {
  const n = d.run.nodes[id]!;
  abortAttempts(d, liveAttempts(id, holdersOf(n)), reason);
  for (const [, it] of n.map ? liveItems(n.map) : []) {
    const r = applyStepOp(it.step, { op: "cancel", now: d.now });
    if (r.outcome === "moved") it.step = r.state;
  }
}

/** After an attempt failed under a retry policy: offer the step again, or (no attempt left) settle it failed. */
export function retryOrFail(d: Draft, node: PlanNode, item: number | undefined, error: StepError): void {
  const n = d.run.nodes[node.id]!;
  if (node.kind === "map") {
    if (item !== undefined) settleItem(d, node, item, undefined);
    return pumpMap(d, node);
  }
  if (n.step!.status === "ready") offer(d, node, n, undefined);
  else fail(d, node.id, { code: error.code, message: error.message });
}

/**
 * An offer made again by the sweep and still not leased a pass later: the attempt is minted (so
 * a grant still on its way is fenced) and fails `dispatch_lost`, retryable, under the step's own
 * policy. Judged at the sweeper's clock `at`.
 */
export function loseDispatch(d: Draft, node: PlanNode, item: number | undefined, at: number): void {
  const n = d.run.nodes[node.id]!;
  const holder = holderOf(n, item);
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
    policy: policyOf(node, holder),
  });
  if (r.outcome !== "moved") return;
  holder.step = r.state;
  delete holder.offered;
  delete holder.offered_at;
  delete holder.reoffered;
  d.effects.push({ type: "runway.local", channel: STEP_LAPSED, payload: { ticket: ticketId(d.run.id, node.id, item, minted.state.attempt) } });
  if (r.state.status === "ready")
    publish(d, "step_retrying", {
      node: node.id,
      ...(item !== undefined ? { item } : {}),
      attempt: minted.state.attempt,
      error: lost,
      not_before: r.state.not_before,
    });
  retryOrFail(d, node, item, lost);
}
