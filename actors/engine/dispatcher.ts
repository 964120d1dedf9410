import {
  emptyScheduler,
  enqueue,
  next,
  release,
  removeTicket,
  schedulerMetrics,
  ticketId,
  type AbortRequest,
  type AliveAttempt,
  type ExecuteRequest,
  type ReadyTicket,
  type SchedulerConfig,
  type SchedulerState,
  type TenantPolicy,
  type Ticket,
  type TokenBucket,
} from "../../machines/index.js";
import type { Clock, Logger } from "../../runtime/index.js";
import type { QuotaGate, QuotaLimits } from "../tenant/index.js";
import { Ring } from "./ring.js";

export const DEFAULT_SCHEDULER: SchedulerConfig = { slots: 16, interactive_reserve: 2, migration_cap: 4, aging_ms: 10_000 };

/** A lease decision as kept for tests and audits: its tenant and class, its decision number, and the decision number at its offer. */
export interface LeaseDecision {
  tenant: string;
  class: string;
  seq: number;
  offered_seq: number;
}

/** An offered ticket and the decision number at its offer. */
interface Offer {
  ticket: ReadyTicket;
  seq: number;
}

/** A granted ticket until its attempt ended; `freed` once its handler returned (its slot is free, its report is being committed). */
interface Lease {
  ticket: Ticket;
  /** The offer it was granted from: the attempt it runs. */
  offered: ReadyTicket;
  granted_at: number;
  freed: boolean;
  /** An agent's attempt: it gave its slot back as it was granted (it never holds a worker) and counts nothing while it commits. */
  io?: true;
}

/** The service attempts of one tenant and class got here. */
interface Served {
  tenant: string;
  class: string;
  count: number;
  wait_ms: number;
  slowdown: number;
}

/** A grant of a quota-bound attempt: tenant, provider and the quota window it was counted in. */
export interface QuotaGrant {
  tenant: string;
  provider: string;
  window: number;
}

/**
 * The node's fair scheduler at work: run actors offer ready attempts (tickets), `machines/scheduler`
 * picks which gets a free slot, and the winner runs at once (the grant writes nothing). The slot is
 * held until the handler returns, the ticket until its report is committed. Tickets live in memory:
 * after a crash, recovery offers the ready attempts again, and a run that moved on refuses its ticket.
 */
export class Dispatcher {
  private state: SchedulerState = emptyScheduler();
  private buckets: Record<string, TokenBucket> = {};
  /** Granted tickets until their attempt ended. */
  private readonly leased = new Map<string, Lease>();
  /** Per tenant, then class: attempts that ended after a lease here, their summed queue wait and slowdown. */
  private readonly served = new Map<string, Map<string, Served>>();
  private readonly offered = new Map<string, Offer>();
  /** Tickets off the queue until their provider's next quota window (offered again then, unless dropped meanwhile). */
  private readonly quotaWaiting = new Map<string, ReadyTicket>();
  private decisions = 0;
  private wake: NodeJS.Timeout | undefined;
  /** Tenant policies change elsewhere (resume, new weights): queued work is looked at again periodically. */
  private readonly tick: NodeJS.Timeout;
  private pumping = false;
  /** Leased attempts whose slot was freed (see `free`) and whose report is still being committed. */
  private committing = 0;
  /** Leases granted per tenant (one entry per tenant), for tests and metrics. */
  readonly leasesByTenant = new Map<string, number>();
  /** Tickets passed over for their provider quota (they held no slot while they waited). */
  quotaWaits = 0;
  /** The last grants of quota-bound attempts (bounded: `quotaGrantLimit`). */
  private readonly grants: Ring<QuotaGrant>;
  /** The last lease decisions (bounded: `recentLimit`), each with the decision number at which its ticket was offered. */
  private readonly recent: Ring<LeaseDecision>;

  constructor(
    private readonly deps: {
      /** Runs a granted attempt (the node's step executor). */
      execute(request: ExecuteRequest): void;
      clock: Clock;
      logger: Logger;
      config: SchedulerConfig;
      policy(tenant: string): TenantPolicy | undefined;
      /** Per-window request and token quota of a tenant's provider, if it has one. */
      quotaOf?(tenant: string, provider: string): QuotaLimits | undefined;
      quota?: QuotaGate;
      /** Lease decisions kept for `recentSince` (default 10,000). */
      recentLimit?: number;
      /** Quota grants kept for `quotaGrants` (default 1,024). */
      quotaGrantLimit?: number;
    },
  ) {
    this.recent = new Ring(deps.recentLimit ?? 10_000);
    this.grants = new Ring(deps.quotaGrantLimit ?? 1_024);
    this.tick = setInterval(() => this.offered.size > 0 && this.pump(), 250);
    this.tick.unref();
  }

  /** Something the policy depends on changed (a tenant's view arrived): look at the queue again. */
  policyChanged(): void {
    if (this.offered.size > 0) this.pump();
  }

  offer(ticket: ReadyTicket): void {
    if (this.offered.has(ticket.id) || this.leased.has(ticket.id)) return;
    this.offered.set(ticket.id, { ticket, seq: this.decisions });
    this.state = enqueue(this.state, ticket);
    this.pump();
  }

  /**
   * The attempt leased under `ticketId` needs its worker no more (its handler returned): its slot
   * is free again, so the next attempt starts while this one's report is being committed. The
   * ticket stays held (see `held`) until `done`. At most `slots` attempts at once commit without a
   * slot: a slow store still holds back new work (what a crash can leave run but unrecorded stays bounded).
   */
  free(ticketId: string): void {
    const t = this.leased.get(ticketId);
    if (!t || t.freed || this.committing >= this.deps.config.slots) return;
    t.freed = true;
    this.committing++;
    this.freeSlot(t);
  }

  /** Frees a lease's slot, counting its service: slowdown = (queue wait + time holding the slot) / time holding the slot. */
  private freeSlot(lease: Lease): void {
    const t = lease.ticket;
    const now = this.deps.clock.now();
    const wait = Math.max(0, lease.granted_at - t.enqueued_at);
    const held = Math.max(1, now - lease.granted_at);
    let byClass = this.served.get(t.tenant);
    if (!byClass) this.served.set(t.tenant, (byClass = new Map()));
    let s = byClass.get(t.class);
    if (!s) byClass.set(t.class, (s = { tenant: t.tenant, class: t.class, count: 0, wait_ms: 0, slowdown: 0 }));
    s.count++;
    s.wait_ms += wait;
    s.slowdown += (wait + held) / held;
    this.state = release(this.state, t);
    this.pump();
  }

  /** The attempt leased under `ticketId` ended (or will never start): its slot is free, and it is held no more. */
  done(ticketId: string): void {
    const t = this.leased.get(ticketId);
    if (!t) return;
    this.leased.delete(ticketId);
    if (t.io) return;
    if (t.freed) this.committing--;
    else this.freeSlot(t);
  }

  metrics(now: number) {
    return schedulerMetrics(this.state, now);
  }

  /** How many lease decisions this dispatcher has made: a mark for {@link recentSince}. */
  get decisionCount(): number {
    return this.decisions;
  }

  /** The lease decisions made after decision `mark`, oldest first, as far back as the bound keeps them. */
  recentSince(mark: number): LeaseDecision[] {
    return this.recent.toArray().filter((d) => d.seq > mark);
  }

  /** The last grants of quota-bound attempts, oldest first (the same objects on every call, while kept). */
  get quotaGrants(): QuotaGrant[] {
    return this.grants.toArray();
  }

  /** Mean queue wait and mean slowdown of the attempts served here, by tenant and class. */
  service(): { tenant: string; class: string; count: number; mean_wait_ms: number; mean_slowdown: number }[] {
    return [...this.served.values()]
      .flatMap((byClass) => [...byClass.values()])
      .map((s) => ({
        tenant: s.tenant,
        class: s.class,
        count: s.count,
        mean_wait_ms: s.wait_ms / s.count,
        mean_slowdown: s.slowdown / s.count,
      }));
  }

  private pump(): void {
    if (this.pumping) return;
    this.pumping = true;
    try {
      // Every queued ticket is an offered one (`drop` takes both back): nothing offered, nothing to lease or wait for.
      while (this.offered.size > 0) {
        const decision = next(this.state, { now: this.deps.clock.now(), config: this.deps.config, tenants: this.deps.policy, buckets: this.buckets });
        this.state = decision.state;
        // `next` is pure: it returns the buckets it was given, or new ones.
        this.buckets = decision.buckets;
        if (decision.decision === "idle") {
          if (decision.wake_at !== undefined) this.arm(decision.wake_at);
          return;
        }
        const offer = this.offered.get(decision.ticket.id);
        this.offered.delete(decision.ticket.id);
        if (!offer) {
          this.state = release(this.state, decision.ticket);
          continue;
        }
        const offered = offer.ticket;
        this.leased.set(offered.id, { ticket: decision.ticket, offered, granted_at: this.deps.clock.now(), freed: false });
        this.leasesByTenant.set(offered.tenant, (this.leasesByTenant.get(offered.tenant) ?? 0) + 1);
        this.recent.push({ tenant: offered.tenant, class: offered.class, seq: ++this.decisions, offered_seq: offer.seq });
        this.gateThenGrant(offered);
      }
    } finally {
      this.pumping = false;
    }
  }

  private arm(at: number): void {
    if (this.wake) clearTimeout(this.wake);
    this.wake = setTimeout(
      () => {
        this.wake = undefined;
        this.pump();
      },
      Math.max(1, at - this.deps.clock.now()),
    );
    this.wake.unref();
  }

  /** A step drawing on a provider quota is granted only if the cluster-wide window has room; any other at once. */
  private gateThenGrant(t: ReadyTicket): void {
    const provider = t.provider_key;
    const limits = provider ? this.deps.quotaOf?.(t.tenant, provider) : undefined;
    if (provider && limits !== undefined && this.deps.quota) void this.gateOnQuota(t, provider, limits, this.deps.quota);
    else this.grant(t);
  }

  private async gateOnQuota(t: ReadyTicket, provider: string, limits: QuotaLimits, quota: QuotaGate): Promise<void> {
    const taken = await quota.take(t.tenant, provider, limits, t.cost, this.deps.clock.now());
    if (!taken.ok) {
      // Give the slot back at once; the ticket waits off the queue until the next window.
      this.quotaWaits++;
      this.done(t.id);
      this.quotaWaiting.set(t.id, t);
      const retry = setTimeout(() => this.quotaWaiting.delete(t.id) && this.offer(t), Math.max(1, taken.retry_at - this.deps.clock.now()));
      retry.unref();
      return;
    }
    this.grants.push({ tenant: t.tenant, provider, window: taken.window });
    this.grant(t);
  }

  /**
   * The grant writes nothing: the executor runs the attempt the ticket names at once, and its
   * result (or the heartbeat of a long attempt) is what the run stores. A ticket whose run moved
   * on meanwhile runs for nothing: its report is refused, and a cancel aborts it.
   */
  private grant(t: ReadyTicket): void {
    // An agent's attempt waits on its model and its tools, on the event loop, never on a worker:
    // its slot goes back at once, so thousands wait on their models while code steps keep the pool.
    // Its provider's quota (above) and its tenant's run caps are what bound how many run at once.
    const lease = t.request.agent ? this.leased.get(t.id) : undefined;
    if (lease && !lease.freed) {
      lease.freed = true;
      lease.io = true;
      this.freeSlot(lease);
    }
    this.deps.execute(t.request);
  }

  /** Tickets of `run` this scheduler holds (queued, granted, or waiting for a quota window): offers that are not lost. */
  held(run: string): string[] {
    return this.heldTickets(run).map((t) => t.id);
  }

  /** The attempts of `run` this scheduler holds, as the executor would name them (for recovery in this process). */
  alive(run: string): AliveAttempt[] {
    return this.heldTickets(run).map((t) => ({
      node: t.node,
      ...(t.item !== undefined ? { item: t.item } : {}),
      attempt: t.request.attempt,
      lease_epoch: t.request.lease_epoch,
    }));
  }

  private heldTickets(run: string): ReadyTicket[] {
    const out: ReadyTicket[] = [];
    for (const o of this.offered.values()) if (o.ticket.run === run) out.push(o.ticket);
    // A granted ticket whose attempt has not reached the executor yet (its quota being taken) is held here alone.
    for (const l of this.leased.values()) if (l.offered.run === run) out.push(l.offered);
    for (const t of this.quotaWaiting.values()) if (t.run === run) out.push(t);
    return out;
  }

  /** Queued tickets of attempts their run stopped (cancelled, settled without them) are dropped before they take a slot. */
  drop(request: AbortRequest): void {
    for (const a of request.attempts) {
      const id = ticketId(request.run, a.node, a.item, a.attempt);
      this.quotaWaiting.delete(id);
      if (this.offered.delete(id)) this.state = removeTicket(this.state, id);
    }
  }

  stop(): void {
    if (this.wake) clearTimeout(this.wake);
    clearInterval(this.tick);
  }
}
