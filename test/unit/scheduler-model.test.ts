import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  emptyScheduler,
  enqueue,
  next,
  release,
  remove,
  schedulerViolations,
  tryTake,
  type SchedulerConfig,
  type SchedulerState,
  type TenantPolicy,
  type Ticket,
  type TicketClass,
  type TokenBucket,
} from "../../machines/scheduler/index.js";
import { T0 } from "./scheduler-support.js";

/**
 * Differential test: every `next` decision must equal the one a naive reference makes by
 * filtering and sorting every queued ticket (the policy of docs/ARCHITECTURE.md §3.4 written the slow,
 * obvious way), over random workloads with caps, quotas, kills, aging, removals and releases.
 */

const TENANTS = ["a", "b", "c", "d"] as const;
const CLASSES: readonly TicketClass[] = ["interactive", "approval_resume", "automation", "migration"];
const TIERS: readonly (readonly TicketClass[])[] = [["interactive", "approval_resume"], ["automation"], ["migration"]];

interface Queued {
  ticket: Ticket;
  seq: number;
}

interface Model {
  queued: Queued[];
  running: Ticket[];
  seq: number;
}

function reference(
  s: SchedulerState,
  m: Model,
  now: number,
  config: SchedulerConfig,
  policy: (t: string) => TenantPolicy | undefined,
  buckets: Record<string, TokenBucket>,
): Ticket | undefined {
  const free = config.slots - m.running.length;
  if (free <= 0) return undefined;
  const runningOf = (t: string) => m.running.filter((r) => r.tenant === t);
  const servable = (t: string): boolean => {
    const p = policy(t);
    return p !== undefined && !p.killed && !p.draining && p.weight > 0 && runningOf(t).length < p.max_concurrency;
  };
  const vt = (t: string): number => Math.max(s.tenants[t]?.vtime ?? s.vfloor, s.vfloor);
  const backlogged = [...new Set(m.queued.map((q) => q.ticket.tenant))].filter(servable);
  const floor = backlogged.length > 0 ? Math.max(s.vfloor, Math.min(...backlogged.map(vt))) : s.vfloor;
  const migrations = m.running.filter((r) => r.class === "migration").length;
  const leasable = (q: Queued, tier: number): boolean => {
    const { ticket } = q;
    if (!servable(ticket.tenant)) return false;
    if (tier > 0 && free <= config.interactive_reserve) return false;
    if (tier === 2 && migrations >= config.migration_cap) return false;
    const cap = policy(ticket.tenant)?.project_max_concurrency?.[ticket.project];
    if (cap !== undefined && runningOf(ticket.tenant).filter((r) => r.project === ticket.project).length >= cap) return false;
    const bucket = ticket.provider && buckets[ticket.provider.key];
    return !bucket || !ticket.provider || tryTake(bucket, ticket.provider.tokens, now).ok;
  };
  for (const [tier, classes] of TIERS.entries()) {
    const open = m.queued.filter((q) => classes.includes(q.ticket.class) && leasable(q, tier));
    if (open.length === 0) continue;
    const share = (t: string) => Math.max(vt(t), floor);
    const tenant = [...new Set(open.map((q) => q.ticket.tenant))].sort((x, y) => share(x) - share(y) || (x < y ? -1 : 1))[0];
    const eff = (q: Queued) => q.ticket.priority + Math.floor(Math.max(0, now - q.ticket.enqueued_at) / config.aging_ms);
    const order = open
      .filter((q) => q.ticket.tenant === tenant)
      .sort((x, y) => eff(y) - eff(x) || (x.ticket.deadline ?? Infinity) - (y.ticket.deadline ?? Infinity) || x.seq - y.seq);
    return order[0]?.ticket;
  }
  return undefined;
}

const ticketArb = fc.record({
  tenant: fc.oneof(fc.constant("a"), fc.constantFrom(...TENANTS)),
  project: fc.constantFrom("p0", "p1"),
  class: fc.constantFrom(...CLASSES),
  // Narrow choices half of the time, so that tickets often tie on effective priority.
  priority: fc.oneof(fc.constant(5), fc.integer({ min: 0, max: 9 })),
  deadline: fc.option(fc.integer({ min: 0, max: 5 }), { nil: null }),
  cost: fc.integer({ min: 1, max: 4 }),
  backdate: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 5_000 })),
  provider: fc.option(fc.record({ key: fc.constantFrom("m1", "m2"), tokens: fc.integer({ min: 0, max: 3 }) }), { nil: undefined }),
});

const action = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant("submit" as const), t: ticketArb }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("release" as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("remove" as const), pick: fc.nat() }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("policy" as const),
      tenant: fc.constantFrom(...TENANTS),
      killed: fc.boolean(),
      draining: fc.boolean(),
      max: fc.integer({ min: 0, max: 6 }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("tick" as const), ms: fc.integer({ min: 1, max: 3_000 }) }) },
  { weight: 5, arbitrary: fc.record({ kind: fc.constant("decide" as const) }) },
);

const policyArb = fc.record({
  weight: fc.integer({ min: 1, max: 4 }),
  max_concurrency: fc.integer({ min: 0, max: 6 }),
  project_max_concurrency: fc.option(fc.record({ p0: fc.integer({ min: 0, max: 3 }) }), { nil: undefined }),
});

const configArb = fc.record({
  slots: fc.integer({ min: 1, max: 10 }),
  interactive_reserve: fc.integer({ min: 0, max: 3 }),
  migration_cap: fc.integer({ min: 0, max: 3 }),
  aging_ms: fc.constantFrom(500, 1_000, 4_000),
});

describe("next against a naive reference", () => {
  it("leases exactly the ticket the reference picks, or is idle exactly when the reference finds none (property)", () => {
    fc.assert(
      fc.property(
        configArb,
        fc.array(policyArb, { minLength: 4, maxLength: 4 }),
        fc.array(action, { maxLength: 300, size: "max" }),
        (config, initial, actions) => {
          const policies = new Map<string, TenantPolicy>(TENANTS.map((t, i) => [t, initial[i] as TenantPolicy]));
          const policy = (t: string) => policies.get(t);
          let buckets: Record<string, TokenBucket> = { m1: { capacity: 3, refill_per_ms: 0.001, tokens: 3, updated_at: T0 } };
          let s = emptyScheduler();
          const m: Model = { queued: [], running: [], seq: 0 };
          let now = T0;
          let id = 0;
          for (const act of actions) {
            switch (act.kind) {
              case "submit": {
                const { backdate, ...rest } = act.t;
                const input = { ...rest, id: `t${id++}`, enqueued_at: now - backdate };
                s = enqueue(s, input);
                m.queued.push({ ticket: { ...input, cost: input.cost }, seq: m.seq++ });
                break;
              }
              case "release": {
                if (m.running.length === 0) break;
                const [done] = m.running.splice(act.pick % m.running.length, 1);
                s = release(s, done as Ticket);
                break;
              }
              case "remove": {
                if (m.queued.length === 0) break;
                const [gone] = m.queued.splice(act.pick % m.queued.length, 1);
                s = remove(s, (gone as Queued).ticket.id);
                break;
              }
              case "policy": {
                const p = policies.get(act.tenant) as TenantPolicy;
                policies.set(act.tenant, { ...p, killed: act.killed && act.draining, draining: act.draining && !act.killed, max_concurrency: act.max });
                break;
              }
              case "tick":
                now += act.ms;
                break;
              case "decide": {
                const want = reference(s, m, now, config, policy, buckets);
                const d = next(s, { now, config, tenants: policy, buckets });
                expect(d.decision === "lease" ? d.ticket.id : undefined).toBe(want?.id);
                if (d.decision === "lease") {
                  const before = Math.max(s.tenants[d.ticket.tenant]?.vtime ?? 0, d.state.vfloor);
                  const w = (policy(d.ticket.tenant) as TenantPolicy).weight;
                  expect(d.state.tenants[d.ticket.tenant]?.vtime).toBeCloseTo(before + d.ticket.cost / w, 9);
                  m.queued = m.queued.filter((q) => q.ticket.id !== d.ticket.id);
                  m.running.push(d.ticket);
                }
                s = d.state;
                buckets = { ...d.buckets };
                break;
              }
            }
          }
          expect(schedulerViolations(s)).toEqual([]);
        },
      ),
      { numRuns: 300 },
    );
  });
});
