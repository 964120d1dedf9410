import { applyStepOp, type StepError } from "../step/index.js";
import type { PlanNode } from "../workflow/index.js";
import { holderOf, LEASE_AFTER_MS, LEASE_GRACE_MS, leaseTtl, policyOf, retryOrFail, takeOffer, ticketId, type Holder } from "./attempts.js";
import { abortAttempts, METRICS_CHANNEL, publish, STEP_LAPSED, type Draft } from "./draft.js";

/**
 * An attempt's lease: a short step runs unwritten under its offer; one that outlives
 * `lease_after_ms`, or records a call's intent, is leased, renewed by its heartbeats, and lost
 * at the lease's end (`worker_lost`). After a hand-over the previous owner's attempts are leased
 * here; after a claim, those still executing in the claiming process are alive.
 */

export function leaseTimer(d: Draft, node: PlanNode, holder: Holder, item: number | undefined): void {
  const s = holder.step!;
  d.effects.push({
    type: "runway.timer.set",
    name: `lease-${node.id}-${item ?? "x"}`,
    at: holder.lease_expires_at!,
    event: { type: "timer.fired", kind: "lease", node: node.id, ...(item !== undefined ? { item } : {}), attempt: s.attempt, lease_epoch: s.lease_epoch },
  });
}

/**
 * A heartbeat. From an offered attempt (a long one, or one whose handler beats): it is leased
 * (`durable`: with a lease its heartbeats renew) now, RUNNING with a lease the heartbeats renew. From a leased one: its lease is renewed.
 */
export function onHeartbeat(
  d: Draft,
  e: { node: string; item?: number; attempt: number; lease_epoch: number },
  { durable }: { durable: boolean } = { durable: true },
): void {
  const node = d.byId.get(e.node)!;
  const holder = holderOf(d.run.nodes[e.node]!, e.item)!;
  if (holder.step!.status === "ready") {
    takeOffer(d, holder);
    publish(d, "step_started", { node: node.id, ...(e.item !== undefined ? { item: e.item } : {}), attempt: holder.step!.attempt });
  }
  // Not durable (an intent's write): the attempt holds its lease as a short one does, fenced by the
  // partition's epoch; but an attempt that wrote, then went silent with its node still serving the
  // run (a write it could not make), would hold it for ever: it gets a lease once, renewed only by heartbeats.
  if (!durable) {
    if (holder.lease_expires_at !== undefined) return;
    holder.lease_expires_at = d.now + leaseTtl(d, node);
    return leaseTimer(d, node, holder, e.item);
  }
  holder.lease_expires_at = d.now + leaseTtl(d, node);
  if (holder.step!.status === "leased") {
    const r = applyStepOp(holder.step!, { op: "start", now: d.now, attempt: e.attempt, lease_epoch: e.lease_epoch });
    if (r.outcome === "moved") holder.step = r.state;
  }
  leaseTimer(d, node, holder, e.item);
}

/**
 * An attempt of a previous owner that handed the partition over alive (it may be running there):
 * a durable lease stands, kept by that owner's heartbeats through the mailbox. One offered there
 * (running unwritten, as a short attempt does) or leased without a lease (by its tool call's
 * intent) is leased here under its attempt and lease epoch until its first heartbeat is due
 * (after `lease_after_ms`), plus the grace: running, it beats and reports here; never run there,
 * it lapses then, `worker_lost`.
 */
export function leaseHandedOver(d: Draft, node: PlanNode, holder: Holder, item: number | undefined): void {
  if (holder.step!.status === "ready") takeOffer(d, holder);
  if (holder.lease_expires_at !== undefined) return;
  const ttl = leaseTtl(d, node);
  holder.lease_expires_at = d.now + Math.min(ttl, Math.min(LEASE_AFTER_MS, Math.floor(ttl / 3)) + LEASE_GRACE_MS);
  leaseTimer(d, node, holder, item);
}

/** A lease past its expiry (at `judgedAt`, default now) is lost: the attempt fails `worker_lost` and the step retries under its policy. */
export function expireLease(d: Draft, node: PlanNode, item: number | undefined, judgedAt = d.now): void {
  const n = d.run.nodes[node.id]!;
  const holder = holderOf(n, item);
  if (!holder?.step || holder.lease_expires_at === undefined) return;
  if (judgedAt < holder.lease_expires_at) return leaseTimer(d, node, holder, item);
  const lost: StepError = { code: "worker_lost", message: "the attempt's lease expired without a heartbeat", retryable: true };
  const r = applyStepOp(holder.step, {
    op: "fail",
    now: d.now,
    attempt: holder.step.attempt,
    lease_epoch: holder.step.lease_epoch,
    error: lost,
    policy: policyOf(node, holder),
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
  d.effects.push({ type: "runway.local", channel: STEP_LAPSED, payload: { ticket: ticketId(d.run.id, node.id, item, r.state.attempt) } });
  retryOrFail(d, node, item, lost);
}

/** An attempt still executing in the process that claims its run's partition again. */
export type AliveAttempt = { node: string; item?: number; attempt: number; lease_epoch: number };

export function isAlive(alive: readonly AliveAttempt[], node: string, item: number | undefined, attempt: { attempt: number; lease_epoch: number }): boolean {
  return alive.some((a) => a.node === node && a.item === item && a.attempt === attempt.attempt && a.lease_epoch === attempt.lease_epoch);
}
