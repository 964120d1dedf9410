import {
  type AdmitAnswer,
  type CreateAnswer,
  type LiveTenantState,
  type PromoteAnswer,
  type PutAnswer,
  type RecheckAnswer,
  type RunEndedAnswer,
  type StateAnswer,
  type TenantAudit,
  type TenantView,
} from "./events.js";
import { changedSettings, mergeSettings, TenantSettingsSchema } from "./settings.js";
import type { Decision, TenantContext, TenantContextV1 } from "./context.js";
import { budgetKey, endedKey, FactReader, memberKey, type BudgetReservation, type Member, type StoreOp } from "./members.js";
import { capOf, capReached, countRunning, dropSlot, enqueue, MAX_QUEUED, positionOf, promote } from "./queue.js";
import { legacyLeft, upgrade } from "./migrate.js";

export type { Decision, TenantContext, TenantContextV1 } from "./context.js";
export { MAX_QUEUED } from "./queue.js";

export const DAY_MS = 86_400_000;

/** 'YYYY-MM-DD' of the UTC day containing `now` (ms since the epoch). */
export function utcDay(now: number): string {
  return new Date(now).toISOString().slice(0, 10);
}

/** The first instant (ms) of the UTC day after the one containing `now`. */
export function nextUtcDay(now: number): number {
  return (Math.floor(now / DAY_MS) + 1) * DAY_MS;
}

export function newTenant(id: string): TenantContext {
  return {
    v: 2,
    id,
    settings: TenantSettingsSchema.parse({}),
    state: "new",
    state_reason: null,
    day: "",
    starts_today: 0,
    active_runs: 0,
    active_by_project: {},
    queued_runs: 0,
    active_descendants: 0,
    q_next: 0,
    lanes: {},
    created_at: 0,
    updated_at: 0,
  };
}

/**
 * A tenant as answers show it, from its stored context (either form). Given `now`, seen at that
 * day as `atDay` rolls it: a record last written on an earlier UTC day shows today with no starts
 * and no reservations, not the figures of the day it was written.
 */
export function tenantView(stored: TenantContext | TenantContextV1, now?: number): TenantView {
  const c = now === undefined ? upgrade(stored) : atDay(upgrade(stored), now);
  return {
    id: c.id,
    state: c.state,
    state_reason: c.state_reason,
    settings: c.settings,
    day: c.day,
    starts_today: c.starts_today,
    reserved_cents: c.reserved_cents ?? 0,
    active_runs: c.active_runs,
    active_by_project: c.active_by_project,
    queued_runs: c.queued_runs,
    active_descendants: c.active_descendants,
    migrating: legacyLeft(c.legacy),
    created_at: c.created_at,
    updated_at: c.updated_at,
  };
}

/**
 * `context` seen at `now`: when `now` falls in a later UTC day than `context.day`, the window
 * rolls over and `starts_today` and `reserved_cents` restart at 0 (a reservation counts on the
 * day it was made). An earlier `now` (another node's clock) never
 * moves the window back. Returns the same object when nothing rolls.
 */
export function atDay(context: TenantContext, now: number): TenantContext {
  const today = utcDay(now);
  return today > context.day ? { ...context, day: today, starts_today: 0, reserved_cents: 0 } : context;
}

/** Where a decision reads membership and what it writes back. */
export interface Io {
  facts: FactReader;
  store: StoreOp[];
  retentionMs: number;
}

/**
 * Whether a run may start now, in this order: a run id seen before answers `duplicate`; a new,
 * killed or draining tenant refuses; the day cap and the day budget refuse until the next UTC day;
 * the tenant's then the project's concurrency cap answer `queued` (wait, not fail). It reads two
 * keys and writes the run's member key, so it costs the same whatever the tenant's population.
 * Every refusal returns the context it was given.
 */
export function admitDecision(
  context: TenantContext,
  run: { run_id: string; project: string; reserve_cents?: number; fresh?: boolean },
  now: number,
  io: Io,
): Decision<AdmitAnswer> {
  const { run_id, project } = run;
  const again = admittedBefore(context, run, now, io);
  if (again) return again;
  if (context.state !== "active") {
    const outcome = context.state === "killed" ? "tenant_killed" : context.state === "draining" ? "tenant_draining" : "tenant_not_found";
    return { context, answer: { outcome, run_id } };
  }
  const s = context.settings;
  const rolled = atDay(context, now);
  if (rolled.starts_today >= s.day_cap) {
    return { context, answer: { outcome: "day_cap_reached", run_id, day: rolled.day, day_cap: s.day_cap, resets_at: nextUtcDay(now) } };
  }
  const reserve = s.day_budget_cents == null ? 0 : (run.reserve_cents ?? s.run_reservation_cents);
  const overBudget = budgetRefusal(rolled, run_id, reserve, now, io);
  if (overBudget) return { context, answer: overBudget };
  const blocked = capReached(context, project);
  if (blocked && context.queued_runs >= MAX_QUEUED)
    return { context, answer: { outcome: "queue_full", run_id, queued: context.queued_runs, limit: MAX_QUEUED } };
  if (reserve > 0) io.store.push({ key: budgetKey(run_id), value: { c: reserve, d: rolled.day } satisfies BudgetReservation });
  const counted = { ...rolled, starts_today: rolled.starts_today + 1, reserved_cents: (rolled.reserved_cents ?? 0) + reserve, updated_at: now };
  if (blocked) {
    // Accepted: it counts as a start today, and waits (never fails) for a slot.
    const next = enqueue(counted, run_id, project, io.store);
    return {
      context: next,
      answer: {
        outcome: "queued",
        run_id,
        reason: blocked.reason,
        project,
        active: blocked.active,
        limit: blocked.limit,
        position: context.queued_runs,
        duplicate: false,
      },
    };
  }
  io.store.push({ key: memberKey(run_id), value: { s: "r", p: project, ...(run.fresh ? { f: 1 } : {}) } satisfies Member });
  const next = countRunning(counted, project, 1);
  return { context: next, answer: { outcome: "admitted", run_id, duplicate: false, starts_today: next.starts_today, active_runs: next.active_runs } };
}

/** A run id admitted before (running, queued, or ended within the retention) is answered again as it was, `duplicate`, and counted once. */
function admittedBefore(context: TenantContext, run: { run_id: string; fresh?: boolean }, now: number, io: Io): Decision<AdmitAnswer> | undefined {
  const { run_id } = run;
  // A run id made up for this start has no keys yet: nothing to read.
  const member = run.fresh ? null : io.facts.member(run_id);
  if (member?.s === "q") {
    const blocked = capReached(context, member.p);
    return {
      context,
      answer: {
        outcome: "queued",
        run_id,
        reason: blocked?.reason ?? "concurrency_cap_reached",
        project: member.p,
        active: blocked?.active ?? context.active_runs,
        limit: blocked?.limit ?? context.settings.max_concurrency,
        position: positionOf(context, member.g),
        duplicate: true,
      },
    };
  }
  if (member?.s === "r" || (!run.fresh && io.facts.ended(run_id))) {
    return {
      context,
      answer: { outcome: "admitted", run_id, duplicate: true, starts_today: atDay(context, now).starts_today, active_runs: context.active_runs },
    };
  }
  return undefined;
}

/** The day budget (money) refuses the run: spent today (read from the meter) plus live reservations plus this run's would pass it. */
function budgetRefusal(rolled: TenantContext, run_id: string, reserve: number, now: number, io: Io): AdmitAnswer | undefined {
  const budget = rolled.settings.day_budget_cents;
  if (budget == null) return undefined;
  const spent = io.facts.spentOn(rolled.day);
  const reserved = rolled.reserved_cents ?? 0;
  if (spent < budget && spent + reserved + reserve <= budget) return undefined;
  const answer = { outcome: "budget_exhausted" as const, run_id, day: rolled.day, day_budget_cents: budget, resets_at: nextUtcDay(now) };
  return { ...answer, spent_cents: spent, reserved_cents: reserved, reserve_cents: reserve };
}

/**
 * A run admitted here has ended: it stops counting (under the project it was admitted with,
 * whatever project the event names), and its slot goes to the oldest queued run that fits. A
 * queued run that ended (cancelled while it waited) gives up its place. Its mark is kept for the
 * ended-run retention. Idempotent per run id: a run with no member key is answered
 * `not_running` and changes nothing. Accepted in every live state (a killed tenant's runs end too).
 */
export function runEndedDecision(context: TenantContext, run: { run_id: string; withdrawn?: boolean }, now: number, io: Io): Decision<RunEndedAnswer> {
  const { run_id } = run;
  const member = io.facts.member(run_id);
  if (!member) return { context, answer: { outcome: "not_running", run_id } };
  io.store.push({ key: memberKey(run_id), value: null });
  // A run admitted fresh cannot be admitted again: nothing to remember it by.
  if (member.s === "q" || member.f !== 1) io.store.push({ key: endedKey(run_id), value: { at: now }, ttl_ms: io.retentionMs });
  const budgeted = releaseBudget(atDay(context, now), run_id, io);
  // A start that made no run (its create refused, its early admission given back) is not one of today's starts.
  const released = run.withdrawn ? { ...budgeted, starts_today: Math.max(0, budgeted.starts_today - 1) } : budgeted;
  if (member.s === "q") {
    const next = dropSlot({ ...released, queued_runs: context.queued_runs - 1, updated_at: now }, member.l, member.n, io.facts, io.store);
    return { context: next, answer: { outcome: "ended", run_id, active_runs: next.active_runs } };
  }
  const p = promote(countRunning({ ...released, updated_at: now }, member.p, -1), io.facts, io.store);
  return { context: p.context, answer: { outcome: "ended", run_id, active_runs: p.context.active_runs }, admitted: p.admitted, ...more(p.more) };
}

/**
 * A run that ends gives back what it reserved of the day budget (settled: what it spent is on the
 * meter already). A reservation of an earlier day was dropped when the day rolled over.
 */
function releaseBudget(context: TenantContext, run_id: string, io: Io): TenantContext {
  if (!context.reserved_cents && context.settings.day_budget_cents == null) return context;
  const held = io.facts.get<BudgetReservation>(budgetKey(run_id));
  if (!held) return context;
  io.store.push({ key: budgetKey(run_id), value: null });
  return held.d === context.day ? { ...context, reserved_cents: Math.max(0, (context.reserved_cents ?? 0) - held.c) } : context;
}

const more = (go: boolean): Pick<Decision<unknown>, "self"> => (go ? { self: [{ type: "tenant.promote" }] } : {});

/**
 * A queued run asks where it stands (its sweep, or its own create, which may have raced the
 * slot it was given). A run holding a slot is told `run.admitted` again; a queued one waits.
 */
export function recheckDecision(context: TenantContext, run: { run_id: string }, io: Io): Decision<RecheckAnswer> {
  const { run_id } = run;
  const member = io.facts.member(run_id);
  if (member?.s === "r") return { context, answer: { outcome: "admitted", run_id }, admitted: [run_id] };
  if (member?.s === "q") return { context, answer: { outcome: "queued", run_id, position: positionOf(context, member.g) } };
  return { context, answer: { outcome: "unknown", run_id } };
}

/** Starts queued runs that fit (the tenant's own `tenant.promote`, after a transition that hit its batch). */
export function promoteDecision(context: TenantContext, now: number, io: Io): Decision<PromoteAnswer> {
  const p = promote(context, io.facts, io.store);
  if (p.context === context) return { context, answer: { outcome: "promoted", admitted: 0 } };
  return { context: { ...p.context, updated_at: now }, answer: { outcome: "promoted", admitted: p.admitted.length }, admitted: p.admitted, ...more(p.more) };
}

/** Creates the tenant (`new` → `active`); a tenant that exists answers `exists` and stays as it is. */
export function createDecision(context: TenantContext, settings: unknown, now: number): Decision<CreateAnswer> {
  if (context.state !== "new") return { context, answer: { outcome: "exists", tenant: tenantView(context) } };
  if (!context.id) return { context, answer: { outcome: "invalid_input", reason: "tenant id missing: create the machine with input { id }" } };
  const merged = mergeSettings(undefined, settings);
  if (!merged.ok) return { context, answer: { outcome: "invalid_input", reason: merged.reason } };
  const next: TenantContext = { ...newTenant(context.id), settings: merged.settings, state: "active", day: utcDay(now), created_at: now, updated_at: now };
  return {
    context: next,
    answer: { outcome: "created", tenant: tenantView(next) },
    audit: { type: "tenant.created", tenant: next.id, at: now, settings: next.settings },
  };
}

/**
 * Applies a settings patch; invalid input changes nothing. A patch that changes nothing is
 * answered `updated` with `changed: []` and not audited. A project that gains a cap is counted
 * from the tenant's member keys (one listing, the only decision whose reads grow with the
 * tenant's population, and only when caps are added); raised caps start queued runs at once.
 */
export function settingsDecision(context: TenantContext, patch: unknown, now: number, io: Io): Decision<PutAnswer> {
  const merged = mergeSettings(context.settings, patch);
  if (!merged.ok) return { context, answer: { outcome: "invalid_input", reason: merged.reason } };
  const changed = changedSettings(context.settings, merged.settings);
  if (changed.length === 0) return { context, answer: { outcome: "updated", changed, tenant: tenantView(context) } };
  const byProject: Record<string, number> = {};
  for (const project of Object.keys(merged.settings.project_max_concurrency)) {
    const n = capOf(context, project) !== undefined ? (context.active_by_project[project] ?? 0) : io.facts.runningIn(project);
    if (n > 0) byProject[project] = n;
  }
  const p = promote({ ...atDay(context, now), settings: merged.settings, active_by_project: byProject, updated_at: now }, io.facts, io.store);
  const audit: TenantAudit = { type: "tenant.settings_updated", tenant: context.id, at: now, changed, previous: context.settings, settings: merged.settings };
  return { context: p.context, answer: { outcome: "updated", changed, tenant: tenantView(p.context) }, audit, admitted: p.admitted, ...more(p.more) };
}

/**
 * Kill, drain or resume. Moving to the state the tenant is already in changes nothing (the
 * first reason stays) and is not audited. Running work is not touched here: a kill only stops
 * admissions; fencing running work is the engine's decision.
 */
export function stateDecision(context: TenantContext, to: LiveTenantState, reason: string | undefined, now: number, io: Io): Decision<StateAnswer> {
  const previous = context.state;
  if (previous === to) return { context, answer: { outcome: to, previous, changed: false, tenant: tenantView(context) } };
  // A resumed tenant starts the runs that queued meanwhile.
  const p = promote({ ...atDay(context, now), state: to, state_reason: to === "active" ? null : (reason ?? null), updated_at: now }, io.facts, io.store);
  const next = p.context;
  const audit: TenantAudit = {
    type: "tenant.state_changed",
    tenant: context.id,
    at: now,
    from: previous,
    to,
    reason: reason ?? null,
    active_runs: next.active_runs,
  };
  return { context: next, answer: { outcome: to, previous, changed: true, tenant: tenantView(next) }, audit, admitted: p.admitted, ...more(p.more) };
}
