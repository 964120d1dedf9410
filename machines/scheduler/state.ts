import { emptyLevel, indexOf, inserted, ticketsOf, without, type Level } from "./level.js";
import { addCount, own, withKey, withoutKey } from "./records.js";
import { MAX_PRIORITY, TICKET_CLASSES, type Ticket, type TicketClass, type TicketInput } from "./types.js";

/** A queued ticket with its enqueue sequence number (the final tie-break). */
export interface QueuedTicket {
  readonly ticket: Ticket;
  readonly seq: number;
}

/** One queue per priority (index = priority), each ordered oldest first: (enqueued_at, seq) (level.ts). */
export type PriorityLevels = readonly Level<QueuedTicket>[];

export type ClassCounts = Readonly<Record<TicketClass, number>>;

/** Everything the scheduler keeps for one tenant. */
export interface TenantQueue {
  /** Weighted-fair-share virtual time: advanced by `cost / weight` per lease. */
  readonly vtime: number;
  readonly queued: ClassCounts;
  readonly lanes: Readonly<Record<TicketClass, PriorityLevels>>;
  readonly running_by_project: Readonly<Record<string, number>>;
  /** The tenant's leased tickets (its running count is their number), so `release` is idempotent and exact. */
  readonly leased: readonly Ticket[];
}

/** Where a queued ticket sits. */
export interface TicketLocation {
  readonly id: string;
  readonly tenant: string;
  readonly cls: TicketClass;
  readonly priority: number;
}

/**
 * Queued ticket ids are indexed in this many shards (short arrays: copying and scanning one is
 * cheaper than copying a keyed object), so an update copies ~1/64 of the index.
 */
export const INDEX_SHARDS = 64;

/** FNV-1a of the id, modulo the shard count. */
export function indexShard(id: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), 0x01000193);
  return (h >>> 0) % INDEX_SHARDS;
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
  /** Every queued ticket's location, in shard `indexShard(id)`. */
  readonly index: readonly (readonly TicketLocation[])[];
  readonly running: number;
  readonly running_by_class: ClassCounts;
  /** Leases granted, all time. */
  readonly leases: number;
  /** Leases of tickets that had waited past the starvation threshold, all time. */
  readonly starvation_events: number;
}

const ZERO_COUNTS: ClassCounts = Object.freeze({ interactive: 0, approval_resume: 0, automation: 0, migration: 0 });
const EMPTY_LEVELS: PriorityLevels = Object.freeze(Array.from({ length: MAX_PRIORITY + 1 }, () => emptyLevel<QueuedTicket>()));
const EMPTY_LANES: TenantQueue["lanes"] = Object.freeze({
  interactive: EMPTY_LEVELS,
  approval_resume: EMPTY_LEVELS,
  automation: EMPTY_LEVELS,
  migration: EMPTY_LEVELS,
});

const EMPTY_INDEX: SchedulerState["index"] = Object.freeze(Array.from({ length: INDEX_SHARDS }, () => Object.freeze([] as TicketLocation[])));

export function emptyScheduler(): SchedulerState {
  return { seq: 0, vfloor: 0, tenants: {}, index: EMPTY_INDEX, running: 0, running_by_class: ZERO_COUNTS, leases: 0, starvation_events: 0 };
}

function emptyTenant(vtime: number): TenantQueue {
  return { vtime, queued: ZERO_COUNTS, lanes: EMPTY_LANES, running_by_project: {}, leased: [] };
}

function locate(state: SchedulerState, id: string): TicketLocation | undefined {
  return state.index[indexShard(id)]?.find((l) => l.id === id);
}

/** The index with `id` added (`location`) or dropped (undefined). */
function indexed(state: SchedulerState, id: string, location: TicketLocation | undefined): SchedulerState["index"] {
  const at = indexShard(id);
  const shard = (state.index[at] ?? []).filter((l) => l.id !== id);
  if (location) shard.push(location);
  const copy = state.index.slice();
  copy[at] = shard;
  return copy;
}

/** Priority clamped to an integer in 0..MAX_PRIORITY (a malformed one counts as 0). */
export function priorityLevel(priority: number): number {
  return Number.isFinite(priority) ? Math.min(MAX_PRIORITY, Math.max(0, Math.floor(priority))) : 0;
}

function normalise(input: TicketInput): Ticket {
  const cost = input.cost !== undefined && Number.isFinite(input.cost) && input.cost > 0 ? input.cost : 1;
  // The schema's fields only: a caller's ticket may carry more (the dispatcher's carries the attempt to run), which the queue need not copy.
  const ticket: Ticket = {
    id: input.id,
    tenant: input.tenant,
    project: input.project,
    class: input.class,
    priority: priorityLevel(input.priority),
    deadline: input.deadline ?? null,
    cost,
    enqueued_at: input.enqueued_at,
  };
  if (input.provider) ticket.provider = input.provider;
  return ticket;
}

export function queuedTotal(tenant: TenantQueue): number {
  const q = tenant.queued;
  return q.interactive + q.approval_resume + q.automation + q.migration;
}

/**
 * `counts` with `cls` moved by `delta`. Built key by key, as `withLane` is: a spread with a
 * computed key makes V8 build the object slowly on every call, and these run for every ticket.
 */
function bump(counts: ClassCounts, cls: TicketClass, delta: number): ClassCounts {
  const next = { interactive: counts.interactive, approval_resume: counts.approval_resume, automation: counts.automation, migration: counts.migration };
  next[cls] += delta;
  return next;
}

function withLane(lanes: TenantQueue["lanes"], cls: TicketClass, levels: PriorityLevels): TenantQueue["lanes"] {
  const next = { interactive: lanes.interactive, approval_resume: lanes.approval_resume, automation: lanes.automation, migration: lanes.migration };
  next[cls] = levels;
  return next;
}

function withLevel(tenant: TenantQueue, cls: TicketClass, priority: number, level: Level<QueuedTicket>, delta: number): TenantQueue {
  const levels = tenant.lanes[cls].slice();
  levels[priority] = level;
  return { ...tenant, lanes: withLane(tenant.lanes, cls, levels), queued: bump(tenant.queued, cls, delta) };
}

/** Put a tenant back, dropping it when it holds nothing and owes nothing (its vtime ≤ the floor). */
export function settleTenant(state: SchedulerState, name: string, tenant: TenantQueue): Readonly<Record<string, TenantQueue>> {
  const idle = tenant.leased.length === 0 && queuedTotal(tenant) === 0 && tenant.vtime <= state.vfloor;
  return idle ? withoutKey(state.tenants, name) : withKey(state.tenants, name, tenant);
}

/**
 * Queue a ready ticket. Idempotent by id: a ticket id already queued (for any tenant) or leased
 * by its tenant is ignored and the state returned as is. `cost` defaults to 1 (as does a
 * non-positive one); `priority` is clamped to 0..9. O(1): the ticket joins its level's end
 * without copying it, unless an older ticket of the level's was offered again (level.ts).
 */
export function enqueue(state: SchedulerState, input: TicketInput): SchedulerState {
  const ticket = normalise(input);
  if (locate(state, ticket.id)) return state;
  const existing = own(state.tenants, ticket.tenant);
  if (existing && existing.leased.some((t) => t.id === ticket.id)) return state;
  const tenant = existing ?? emptyTenant(state.vfloor);
  const level = tenant.lanes[ticket.class][ticket.priority] ?? emptyLevel<QueuedTicket>();
  const next = withLevel(tenant, ticket.class, ticket.priority, inserted(level, { ticket, seq: state.seq }), 1);
  return {
    ...state,
    seq: state.seq + 1,
    tenants: withKey(state.tenants, ticket.tenant, next),
    index: indexed(state, ticket.id, { id: ticket.id, tenant: ticket.tenant, cls: ticket.class, priority: ticket.priority }),
  };
}

/** Drop a queued ticket (a cancelled run). Unknown or already-leased ids leave the state as is. */
export function remove(state: SchedulerState, ticketId: string): SchedulerState {
  const at = locate(state, ticketId);
  const tenant = at && own(state.tenants, at.tenant);
  if (!at || !tenant) return state;
  const level = tenant.lanes[at.cls][at.priority] ?? emptyLevel<QueuedTicket>();
  const i = indexOf(level, ticketId);
  if (i < 0) return state;
  const next = withLevel(tenant, at.cls, at.priority, without(level, i), -1);
  return { ...state, tenants: settleTenant(state, at.tenant, next), index: indexed(state, ticketId, undefined) };
}

/** Take the ticket at (cls, priority, index) out of the queue and record it as leased. */
export function leaseAt(
  state: SchedulerState,
  name: string,
  tenant: TenantQueue,
  cls: TicketClass,
  priority: number,
  index: number,
  vtime: number,
): { state: SchedulerState; ticket: Ticket } | undefined {
  const level = tenant.lanes[cls][priority] ?? emptyLevel<QueuedTicket>();
  const entry = level.items[level.head + index];
  if (!entry || index < 0 || index >= level.size) return undefined;
  const { ticket } = entry;
  const dequeued = withLevel(tenant, cls, priority, without(level, index), -1);
  const next: TenantQueue = {
    ...dequeued,
    vtime,
    running_by_project: addCount(tenant.running_by_project, ticket.project, 1),
    leased: [...tenant.leased, ticket],
  };
  return {
    ticket,
    state: {
      ...state,
      tenants: withKey(state.tenants, name, next),
      index: indexed(state, ticket.id, undefined),
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
  const i = tenant ? tenant.leased.findIndex((t) => t.id === ticket.id) : -1;
  const leased = tenant?.leased[i];
  if (!tenant || !leased) return state;
  const next: TenantQueue = {
    ...tenant,
    running_by_project: addCount(tenant.running_by_project, leased.project, -1),
    leased: [...tenant.leased.slice(0, i), ...tenant.leased.slice(i + 1)],
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
  let queued = 0;
  const byClass: Record<TicketClass, number> = { ...ZERO_COUNTS };
  for (const [name, tenant] of Object.entries(state.tenants)) {
    for (const cls of TICKET_CLASSES) {
      let count = 0;
      tenant.lanes[cls].forEach((level, priority) => {
        const tickets = ticketsOf(level);
        count += tickets.length;
        if (tickets.length !== level.size) out.push(`${name}/${cls}/${priority}: level size ${level.size} but holds ${tickets.length}`);
        if (level.deadlines !== tickets.filter((q) => q.ticket.deadline !== null).length) out.push(`${name}/${cls}/${priority}: deadline count drifted`);
        tickets.forEach((q, i) => {
          const { ticket } = q;
          if (ticket.tenant !== name || ticket.class !== cls || ticket.priority !== priority) out.push(`${ticket.id}: misplaced`);
          const where = locate(state, ticket.id);
          if (!where || where.tenant !== name || where.cls !== cls || where.priority !== priority) out.push(`${ticket.id}: index disagrees`);
          const prev = tickets[i - 1];
          const late = prev && (prev.ticket.enqueued_at > ticket.enqueued_at || (prev.ticket.enqueued_at === ticket.enqueued_at && prev.seq >= q.seq));
          if (late) out.push(`${ticket.id}: out of order`);
          if (level.bySeq && prev && prev.seq >= q.seq) out.push(`${ticket.id}: level marked in seq order but is not`);
          if (q.seq >= state.seq) out.push(`${ticket.id}: seq ahead of counter`);
        });
      });
      queued += count;
      if (count !== tenant.queued[cls]) out.push(`${name}/${cls}: queued ${tenant.queued[cls]} but holds ${count}`);
    }
    const byProject = new Map<string, number>();
    for (const t of tenant.leased) {
      if (t.tenant !== name) out.push(`${t.id}: leased under the wrong tenant`);
      byProject.set(t.project, (byProject.get(t.project) ?? 0) + 1);
      byClass[t.class] += 1;
    }
    running += tenant.leased.length;
    const projects = new Set([...byProject.keys(), ...Object.keys(tenant.running_by_project)]);
    for (const p of projects) {
      if (byProject.get(p) !== own(tenant.running_by_project, p)) out.push(`${name}/${p}: project count drifted`);
    }
  }
  const indexed = state.index.reduce((n, shard) => n + shard.length, 0);
  if (state.index.length !== INDEX_SHARDS || indexed !== queued) out.push(`index holds ${indexed} ids for ${queued} queued tickets`);
  if (running !== state.running) out.push(`running ${state.running} but ${running} leased`);
  for (const cls of TICKET_CLASSES) if (byClass[cls] !== state.running_by_class[cls]) out.push(`running ${cls} drifted`);
  return out;
}
