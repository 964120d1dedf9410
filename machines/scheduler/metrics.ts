import { at } from "./level.js";
import type { SchedulerState } from "./state.js";
import { TICKET_CLASSES, type TicketClass } from "./types.js";

export interface SchedulerMetrics {
  /** Queued tickets per tenant and class (tenants with nothing queued are left out). */
  readonly queued_by_tenant_class: Readonly<Record<string, Readonly<Record<TicketClass, number>>>>;
  /** Wait of the oldest queued ticket per tenant and class, in ms at `now` (classes with none left out). */
  readonly oldest_wait_ms_by_tenant_class: Readonly<Record<string, Readonly<Partial<Record<TicketClass, number>>>>>;
  /** Leases held per tenant (tenants holding none left out). */
  readonly running_by_tenant: Readonly<Record<string, number>>;
  readonly running_by_class: Readonly<Record<TicketClass, number>>;
  readonly queued: number;
  readonly running: number;
  /** Leases granted, all time. */
  readonly leases: number;
  /** Leases of tickets that had waited past the starvation threshold, all time (each ticket counts once: it is leased once). */
  readonly starvation_events: number;
}

/**
 * A read-only summary at `now`. Cost is O(tenants × classes × priorities): the oldest ticket of
 * each priority level is its head, so no queue is scanned.
 */
export function metrics(state: SchedulerState, now: number): SchedulerMetrics {
  const queued: [string, Record<TicketClass, number>][] = [];
  const oldest: [string, Partial<Record<TicketClass, number>>][] = [];
  const running: [string, number][] = [];
  let total = 0;
  for (const [name, tenant] of Object.entries(state.tenants)) {
    if (tenant.leased.length > 0) running.push([name, tenant.leased.length]);
    const counts = { ...tenant.queued };
    const waits: Partial<Record<TicketClass, number>> = {};
    let any = false;
    for (const cls of TICKET_CLASSES) {
      if (counts[cls] === 0) continue;
      any = true;
      total += counts[cls];
      let first = Number.POSITIVE_INFINITY;
      for (const level of tenant.lanes[cls]) {
        const head = at(level, 0);
        if (head && head.ticket.enqueued_at < first) first = head.ticket.enqueued_at;
      }
      waits[cls] = Math.max(0, now - first);
    }
    if (any) {
      queued.push([name, counts]);
      oldest.push([name, waits]);
    }
  }
  return {
    queued_by_tenant_class: Object.fromEntries(queued),
    oldest_wait_ms_by_tenant_class: Object.fromEntries(oldest),
    running_by_tenant: Object.fromEntries(running),
    running_by_class: { ...state.running_by_class },
    queued: total,
    running: state.running,
    leases: state.leases,
    starvation_events: state.starvation_events,
  };
}
