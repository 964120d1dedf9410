import { addCount, own, withKey, withoutKey } from "./records.js";
import { MAX_PRIORITY, TICKET_CLASSES, type Ticket, type TicketClass, type TicketInput } from "./types.js";

/** A queued ticket with its enqueue sequence number (the final tie-break). */
export interface QueuedTicket {
  readonly ticket: Ticket;
  readonly seq: number;
}

/** One queue per priority (index = priority), each ordered oldest first: (enqueued_at, seq). */
export type PriorityLevels = readonly (readonly QueuedTicket[])[];

export type ClassCounts = Readonly<Record<TicketClass, number>>;

/** Everything the scheduler keeps for one tenant. */
export interface TenantQueue {
  /** Weighted-fair-share virtual time: advanced by `cost / weight` per lease. */
  readonly vtime: number;
  readonly queued: ClassCounts;
  readonly lanes: Readonly<Record<TicketClass, PriorityLevels>>;
  readonly running: number;
  readonly running_by_project: Readonly<Record<string, number>>;
  /** Leased tickets by id, so `release` is idempotent and exact. */
  readonly leased: Readonly<Record<string, Ticket>>;
}

/**
 * The scheduler's whole state: plain, JSON-serialisable data, never mutated (every function
 * returns a new state and shares what did not change). The counters are caches of what the
 * queues and `leased` hold; `schedulerViolations` recomputes and compares them.
 */
export interface SchedulerState {
  /** Next enqueue sequence number. */
  readonly seq: number;
  /** Monotone virtual-time floor: the smallest virtual time among schedulable backlogged tenants at the last decision. */
  readonly vfloor: number;
  readonly tenants: Readonly<Record<string, TenantQueue>>;
  readonly running: number;
  readonly running_by_class: ClassCounts;
  /** Leases granted, all time. */
  readonly leases: number;
  /** Leases of tickets that had waited past the starvation threshold, all time. */
  readonly starvation_events: number;
}

const ZERO_COUNTS: ClassCounts = Object.freeze({ interactive: 0, approval_resume: 0, automation: 0, migration: 0 });
const EMPTY_LEVELS: PriorityLevels = Object.freeze(Array.from({ length: MAX_PRIORITY + 1 }, () => Object.freeze([] as QueuedTicket[])));
const EMPTY_LANES: TenantQueue["lanes"] = Object.freeze({
  interactive: EMPTY_LEVELS,
  approval_resume: EMPTY_LEVELS,
  automation: EMPTY_LEVELS,
  migration: EMPTY_LEVELS,
});

export function emptyScheduler(): SchedulerState {
  return { seq: 0, vfloor: 0, tenants: {}, running: 0, running_by_class: ZERO_COUNTS, leases: 0, starvation_events: 0 };
}

function emptyTenant(vtime: number): TenantQueue {
  return { vtime, queued: ZERO_COUNTS, lanes: EMPTY_LANES, running: 0, running_by_project: {}, leased: {} };
}

/** Priority clamped to an integer in 0..MAX_PRIORITY (a malformed one counts as 0). */
export function priorityLevel(priority: number): number {
  return Number.isFinite(priority) ? Math.min(MAX_PRIORITY, Math.max(0, Math.floor(priority))) : 0;
}

function normalise(input: TicketInput): Ticket {
  const cost = input.cost !== undefined && Number.isFinite(input.cost) && input.cost > 0 ? input.cost : 1;
  const ticket: Ticket = { ...input, cost, priority: priorityLevel(input.priority), deadline: input.deadline ?? null };
  return ticket;
}

export function queuedTotal(tenant: TenantQueue): number {
  const q = tenant.queued;
  return q.interactive + q.approval_resume + q.automation + q.migration;
}

function bump(counts: ClassCounts, cls: TicketClass, delta: number): ClassCounts {
  return { ...counts, [cls]: counts[cls] + delta };
}

function findQueued(tenant: TenantQueue, id: string): { cls: TicketClass; priority: number; index: number } | undefined {
  for (const cls of TICKET_CLASSES) {
    if (tenant.queued[cls] === 0) continue;
    const levels = tenant.lanes[cls];
    for (let priority = 0; priority < levels.length; priority++) {
      const index = (levels[priority] ?? []).findIndex((q) => q.ticket.id === id);
      if (index >= 0) return { cls, priority, index };
    }
  }
  return undefined;
}

/** Insert keeping (enqueued_at, seq) order; a later seq goes after equal enqueue times. */
function insertByAge(level: readonly QueuedTicket[], entry: QueuedTicket): QueuedTicket[] {
  let lo = 0;
  let hi = level.length;
  const at = entry.ticket.enqueued_at;
  if (hi === 0 || (level[hi - 1]?.ticket.enqueued_at ?? at) <= at) return [...level, entry];
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((level[mid]?.ticket.enqueued_at ?? at) <= at) lo = mid + 1;
    else hi = mid;
  }
  return [...level.slice(0, lo), entry, ...level.slice(lo)];
}

function withLevel(tenant: TenantQueue, cls: TicketClass, priority: number, level: readonly QueuedTicket[], delta: number): TenantQueue {
  const levels = tenant.lanes[cls].slice();
  levels[priority] = level;
  return { ...tenant, lanes: { ...tenant.lanes, [cls]: levels }, queued: bump(tenant.queued, cls, delta) };
}

/** Put a tenant back, dropping it when it holds nothing and owes nothing (its vtime ≤ the floor). */
export function settleTenant(state: SchedulerState, name: string, tenant: TenantQueue): Readonly<Record<string, TenantQueue>> {
  const idle = tenant.running === 0 && queuedTotal(tenant) === 0 && tenant.vtime <= state.vfloor;
  return idle ? withoutKey(state.tenants, name) : withKey(state.tenants, name, tenant);
}

/**
 * Queue a ready ticket. Idempotent by id: a ticket already queued or leased for its tenant is
 * ignored (the state is returned as is). `cost` defaults to 1, `priority` is clamped to 0..9.
 */
export function enqueue(state: SchedulerState, input: TicketInput): SchedulerState {
  const ticket = normalise(input);
  const existing = own(state.tenants, ticket.tenant);
  if (existing && (own(existing.leased, ticket.id) !== undefined || findQueued(existing, ticket.id))) return state;
  const tenant = existing ?? emptyTenant(state.vfloor);
  const level = tenant.lanes[ticket.class][ticket.priority] ?? [];
  const next = withLevel(tenant, ticket.class, ticket.priority, insertByAge(level, { ticket, seq: state.seq }), 1);
  return { ...state, seq: state.seq + 1, tenants: withKey(state.tenants, ticket.tenant, next) };
}

/** Drop a queued ticket (a cancelled run). Unknown or already-leased ids leave the state as is. */
export function remove(state: SchedulerState, ticketId: string): SchedulerState {
  for (const [name, tenant] of Object.entries(state.tenants)) {
    const at = findQueued(tenant, ticketId);
    if (!at) continue;
    const level = tenant.lanes[at.cls][at.priority] ?? [];
    const next = withLevel(tenant, at.cls, at.priority, [...level.slice(0, at.index), ...level.slice(at.index + 1)], -1);
    return { ...state, tenants: settleTenant(state, name, next) };
  }
  return state;
}

/** Take the ticket at (cls, priority, index) out of the queue and record it as leased. */
export function leaseAt(state: SchedulerState, name: string, tenant: TenantQueue, cls: TicketClass, priority: number, index: number, vtime: number): { state: SchedulerState; ticket: Ticket } | undefined {
  const level = tenant.lanes[cls][priority] ?? [];
  const entry = level[index];
  if (!entry) return undefined;
  const { ticket } = entry;
  const dequeued = withLevel(tenant, cls, priority, [...level.slice(0, index), ...level.slice(index + 1)], -1);
  const next: TenantQueue = {
    ...dequeued,
    vtime,
    running: tenant.running + 1,
    running_by_project: addCount(tenant.running_by_project, ticket.project, 1),
    leased: withKey(tenant.leased, ticket.id, ticket),
  };
  return {
    ticket,
    state: {
      ...state,
      tenants: withKey(state.tenants, name, next),
      running: state.running + 1,
      running_by_class: bump(state.running_by_class, cls, 1),
      leases: state.leases + 1,
    },
  };
}

/**
 * A leased ticket's attempt ended: free its slot and its tenant, project and class counts.
 * Idempotent: releasing a ticket that is not leased (never, or already released) is a no-op.
 */
export function release(state: SchedulerState, ticket: Pick<Ticket, "id" | "tenant">): SchedulerState {
  const tenant = own(state.tenants, ticket.tenant);
  const leased = tenant && own(tenant.leased, ticket.id);
  if (!tenant || !leased) return state;
  const next: TenantQueue = {
    ...tenant,
    running: tenant.running - 1,
    running_by_project: addCount(tenant.running_by_project, leased.project, -1),
    leased: withoutKey(tenant.leased, leased.id),
  };
  return {
    ...state,
    tenants: settleTenant(state, ticket.tenant, next),
    running: state.running - 1,
    running_by_class: bump(state.running_by_class, leased.class, -1),
  };
}

/**
 * Every way the cached counters disagree with the queues and leases they count, plus queue
 * order and placement errors. Empty for every state the functions of this module produce.
 */
export function schedulerViolations(state: SchedulerState): string[] {
  const out: string[] = [];
  let running = 0;
  const byClass: Record<TicketClass, number> = { ...ZERO_COUNTS };
  for (const [name, tenant] of Object.entries(state.tenants)) {
    for (const cls of TICKET_CLASSES) {
      let count = 0;
      tenant.lanes[cls].forEach((level, priority) => {
        count += level.length;
        level.forEach((q, i) => {
          if (q.ticket.tenant !== name || q.ticket.class !== cls || q.ticket.priority !== priority) out.push(`${q.ticket.id}: misplaced`);
          const prev = level[i - 1];
          const late = prev && (prev.ticket.enqueued_at > q.ticket.enqueued_at || (prev.ticket.enqueued_at === q.ticket.enqueued_at && prev.seq >= q.seq));
          if (late) out.push(`${q.ticket.id}: out of order`);
          if (q.seq >= state.seq) out.push(`${q.ticket.id}: seq ahead of counter`);
        });
      });
      if (count !== tenant.queued[cls]) out.push(`${name}/${cls}: queued ${tenant.queued[cls]} but holds ${count}`);
    }
    const leased = Object.values(tenant.leased);
    const byProject = new Map<string, number>();
    for (const t of leased) {
      byProject.set(t.project, (byProject.get(t.project) ?? 0) + 1);
      byClass[t.class] += 1;
    }
    running += leased.length;
    if (leased.length !== tenant.running) out.push(`${name}: running ${tenant.running} but holds ${leased.length}`);
    const projects = new Set([...byProject.keys(), ...Object.keys(tenant.running_by_project)]);
    for (const p of projects) {
      if (byProject.get(p) !== own(tenant.running_by_project, p)) out.push(`${name}/${p}: project count drifted`);
    }
  }
  if (running !== state.running) out.push(`running ${state.running} but ${running} leased`);
  for (const cls of TICKET_CLASSES) if (byClass[cls] !== state.running_by_class[cls]) out.push(`running ${cls} drifted`);
  return out;
}
