import { tryTake, type TokenBucket } from "./bucket.js";
import { own, withKey } from "./records.js";
import { leaseAt, queuedTotal, type QueuedTicket, type SchedulerState, type TenantQueue } from "./state.js";
import { MAX_PRIORITY, STARVATION_AGING_MULTIPLE, type SchedulerConfig, type TenantPolicy, type Ticket, type TicketClass } from "./types.js";

/** What one decision needs besides the state; time arrives here, never from a clock. */
export interface ScheduleContext {
  readonly now: number;
  readonly config: SchedulerConfig;
  /** The tenant's current policy; `undefined` (an unknown tenant) leases nothing. */
  readonly tenants: (tenant: string) => TenantPolicy | undefined;
  /** Provider buckets by `ticket.provider.key`; a key with no bucket is not rate-limited. */
  readonly buckets: Readonly<Record<string, TokenBucket>>;
}

/** A ticket that would have been leased but for its provider quota: it stays queued and holds no slot. */
export interface QuotaWait {
  readonly ticket: Ticket;
  readonly not_before: number;
}

export type IdleReason = "no_free_slot" | "nothing_queued" | "nothing_leasable";

export type Decision =
  | { decision: "lease"; ticket: Ticket; state: SchedulerState; buckets: Readonly<Record<string, TokenBucket>> }
  | {
      decision: "idle";
      reason: IdleReason;
      state: SchedulerState;
      buckets: Readonly<Record<string, TokenBucket>>;
      /** The earliest `not_before` in `wait_quota`, when finite: decide again then (or on any release/enqueue). */
      wake_at?: number;
      /** Tickets passed over only for their provider quota (`wait_quota`). */
      wait_quota: readonly QuotaWait[];
    };

interface Tier {
  readonly classes: readonly TicketClass[];
  /** May this tier use the last `interactive_reserve` free slots? */
  readonly reserved: boolean;
}

/** Seed 000's hierarchy: reserved interactive capacity first, then automation, then migration on idle capacity. */
const TIERS: readonly Tier[] = [
  { classes: ["interactive", "approval_resume"], reserved: true },
  { classes: ["automation"], reserved: false },
  { classes: ["migration"], reserved: false },
];

/** Levels gained by waiting `age` ms: floor(age / aging_ms), never negative. */
export function agingBoost(age: number, aging_ms: number): number {
  return age > 0 && aging_ms > 0 ? Math.floor(age / aging_ms) : 0;
}

/** `priority + floor((now − enqueued_at) / aging_ms)`. */
export function effectivePriority(ticket: Pick<Ticket, "priority" | "enqueued_at">, now: number, aging_ms: number): number {
  return ticket.priority + agingBoost(now - ticket.enqueued_at, aging_ms);
}

interface Candidate {
  readonly name: string;
  readonly tenant: TenantQueue;
  readonly policy: TenantPolicy;
  /** Virtual time clamped to the floor: an idle or capped tenant cannot bank credit. */
  readonly vtime: number;
}

interface Found {
  readonly entry: QueuedTicket;
  readonly eff: number;
  readonly cls: TicketClass;
  readonly priority: number;
  readonly index: number;
  readonly bucket: TokenBucket | undefined;
}

/** Is `a` ahead of `b` at the same effective priority: earlier deadline (null last), then enqueue order? */
function ahead(a: QueuedTicket, b: QueuedTicket): boolean {
  const da = a.ticket.deadline ?? Number.POSITIVE_INFINITY;
  const db = b.ticket.deadline ?? Number.POSITIVE_INFINITY;
  return da !== db ? da < db : a.seq < b.seq;
}

function schedulable(policy: TenantPolicy | undefined, tenant: TenantQueue): policy is TenantPolicy {
  return policy !== undefined && !policy.killed && !policy.draining && policy.weight > 0 && tenant.leased.length < policy.max_concurrency;
}

type QuotaCheck = { ok: true; bucket: TokenBucket | undefined } | { ok: false; ready_at: number };

/**
 * Can `ticket` take its provider tokens now? `refilled` caches each bucket refilled to `now` for
 * one decision (a local memo, never part of the state); the take itself is applied only to the
 * ticket actually leased.
 */
function checkQuota(ticket: Ticket, buckets: Readonly<Record<string, TokenBucket>>, refilled: Map<string, TokenBucket>, now: number): QuotaCheck {
  const provider = ticket.provider;
  if (!provider) return { ok: true, bucket: undefined };
  const bucket = refilled.get(provider.key) ?? own(buckets, provider.key);
  if (!bucket) return { ok: true, bucket: undefined };
  const result = tryTake(bucket, provider.tokens, now);
  if (!result.ok) {
    refilled.set(provider.key, result.bucket);
    return { ok: false, ready_at: result.ready_at };
  }
  return { ok: true, bucket: result.bucket };
}

/**
 * The tenant's best ticket of the tier's classes: highest effective priority, then earliest
 * deadline, then enqueue order — skipping a class at the tenant's share of it, tickets whose project is at its cap or whose provider
 * quota is empty (those are recorded in `waits`). Each priority level is oldest-first, so
 * effective priority never rises along it and the scan of a level stops at the first ticket
 * below the best found; only ties at the best effective priority are scanned in full.
 */
function bestTicket(c: Candidate, tier: Tier, ctx: ScheduleContext, refilled: Map<string, TokenBucket>, waits: QuotaWait[]): Found | undefined {
  const caps = c.policy.project_max_concurrency;
  const shares = c.policy.class_shares;
  let best: Found | undefined;
  for (const cls of tier.classes) {
    if (c.tenant.queued[cls] === 0) continue;
    const share = shares ? own(shares, cls) : undefined;
    if (share !== undefined && c.tenant.leased.filter((t) => t.class === cls).length >= Math.max(1, Math.ceil(share * ctx.config.slots))) continue;
    const levels = c.tenant.lanes[cls];
    for (let priority = MAX_PRIORITY; priority >= 0; priority--) {
      const level = levels[priority];
      if (!level) continue;
      // No deadline here and seq in level order: a later ticket at the same effective priority is never ahead of an earlier one.
      const firstIsBest = level.deadlines === 0 && level.bySeq;
      for (let index = 0; index < level.size; index++) {
        const entry = level.items[level.head + index]!;
        const eff = priority + agingBoost(ctx.now - entry.ticket.enqueued_at, ctx.config.aging_ms);
        if (best && (eff < best.eff || (eff === best.eff && !ahead(entry, best.entry)))) {
          if (eff < best.eff || firstIsBest) break;
          continue;
        }
        const cap = caps ? own(caps, entry.ticket.project) : undefined;
        if (cap !== undefined && (own(c.tenant.running_by_project, entry.ticket.project) ?? 0) >= cap) continue;
        const q = checkQuota(entry.ticket, ctx.buckets, refilled, ctx.now);
        if (!q.ok) {
          waits.push({ ticket: entry.ticket, not_before: q.ready_at });
          continue;
        }
        best = { entry, eff, cls, priority, index, bucket: q.bucket };
        if (firstIsBest) break;
      }
    }
  }
  return best;
}

function tierOpen(tier: Tier, free: number, state: SchedulerState, config: SchedulerConfig): boolean {
  if (tier.reserved) return free >= 1;
  if (free <= config.interactive_reserve) return false;
  return !tier.classes.includes("migration") || state.running_by_class.migration < config.migration_cap;
}

function before(a: Candidate, b: Candidate): boolean {
  return a.vtime !== b.vtime ? a.vtime < b.vtime : a.name < b.name;
}

/** The tier's tenants in fair-share order: smallest virtual time first (name breaks ties). */
function* inShareOrder(cands: readonly Candidate[], tier: Tier): Generator<Candidate> {
  const inTier = cands.filter((c) => tier.classes.some((cls) => c.tenant.queued[cls] > 0));
  if (inTier.length === 0) return;
  // Almost every decision leases from the first tenant: find it in O(tenants), sort only on a miss.
  let first = inTier[0] as Candidate;
  for (const c of inTier) if (before(c, first)) first = c;
  yield first;
  const rest = inTier.filter((c) => c !== first).sort((a, b) => (before(a, b) ? -1 : 1));
  yield* rest;
}

/**
 * Chooses the next ticket to lease, or says why none: interactive and approval-resume first (with a
 * reserve no other class takes), then the tenant with the smallest virtual time (weighted fair share
 * by cost), skipping tenants or projects at their caps, then effective priority, deadline and
 * enqueue order; migration only on idle capacity. A ticket whose provider bucket is short stays
 * queued and shows in `wait_quota` / `wake_at`. Pure: the caller commits the returned state.
 */
export function next(state: SchedulerState, ctx: ScheduleContext): Decision {
  const { config } = ctx;
  const free = config.slots - state.running;
  if (free <= 0) return { decision: "idle", reason: "no_free_slot", state, buckets: ctx.buckets, wait_quota: [] };

  const cands: Candidate[] = [];
  let anyQueued = false;
  let floor = Number.POSITIVE_INFINITY;
  for (const [name, tenant] of Object.entries(state.tenants)) {
    if (queuedTotal(tenant) === 0) continue;
    anyQueued = true;
    const policy = ctx.tenants(name);
    if (!schedulable(policy, tenant)) continue;
    const vtime = Math.max(tenant.vtime, state.vfloor);
    floor = Math.min(floor, vtime);
    cands.push({ name, tenant, policy, vtime });
  }
  // The floor only rises: a tenant that was idle, capped or killed re-enters at the current minimum.
  // (Every candidate's vtime is already ≥ the new floor: the floor is their minimum.)
  const base: SchedulerState = floor < Number.POSITIVE_INFINITY && floor > state.vfloor ? { ...state, vfloor: floor } : state;

  const refilled = new Map<string, TokenBucket>();
  const waits: QuotaWait[] = [];
  for (const tier of TIERS) {
    if (!tierOpen(tier, free, base, config)) continue;
    for (const c of inShareOrder(cands, tier)) {
      const found = bestTicket(c, tier, ctx, refilled, waits);
      if (found) return lease(base, c, found, ctx);
    }
  }
  let wake_at: number | undefined;
  for (const w of waits) if (Number.isFinite(w.not_before) && (wake_at === undefined || w.not_before < wake_at)) wake_at = w.not_before;
  const reason: IdleReason = anyQueued ? "nothing_leasable" : "nothing_queued";
  return { decision: "idle", reason, state: base, buckets: ctx.buckets, wait_quota: waits, ...(wake_at !== undefined ? { wake_at } : {}) };
}

function lease(state: SchedulerState, c: Candidate, found: Found, ctx: ScheduleContext): Decision {
  const { ticket } = found.entry;
  const vtime = c.vtime + ticket.cost / c.policy.weight;
  const leased = leaseAt(state, c.name, c.tenant, found.cls, found.priority, found.index, vtime);
  if (!leased) throw new Error("scheduler: lease position vanished"); // unreachable: found was read from this state
  const threshold = ctx.config.starvation_after_ms ?? STARVATION_AGING_MULTIPLE * ctx.config.aging_ms;
  const starved = ctx.now - ticket.enqueued_at > threshold;
  const next = starved ? { ...leased.state, starvation_events: leased.state.starvation_events + 1 } : leased.state;
  const buckets = found.bucket && ticket.provider ? withKey(ctx.buckets, ticket.provider.key, found.bucket) : ctx.buckets;
  return { decision: "lease", ticket, state: next, buckets };
}
