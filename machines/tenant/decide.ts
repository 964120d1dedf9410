import {
  auditSubject,
  type AdmitAnswer,
  type ExpansionReply,
  type CreateAnswer,
  type LiveTenantState,
  type PutAnswer,
  type QueueReason,
  type RecheckAnswer,
  type RunEndedAnswer,
  type TenantAnswer,
  type StateAnswer,
  type TenantAudit,
  type TenantEffect,
  type TenantEvent,
  type TenantView,
} from "./events.js";
import { changedSettings, mergeSettings, TenantSettingsSchema } from "./settings.js";
import { STATE_COMMANDS } from "./table.js";
import type { Decision, TenantContext } from "./context.js";
import { admitExpansionDecision, releaseExpansionDecision } from "./expansion.js";

export type { Decision, TenantContext } from "./context.js";

/** How many ended run ids a tenant remembers, so a late duplicate admission is not counted twice. */
export const RECENT_ENDED = 1_000;
/**
 * How many runs may wait behind a tenant's concurrency caps; a start beyond it is refused
 * `queue_full`. The queue lives in the tenant's record, which must stay under NATS's 1 MiB
 * message limit with 10,000 running ids beside it: measured 893 KB (msgpack) at 10,000 running,
 * 5,000 queued and 1,000 recently ended ids.
 */
export const MAX_QUEUED = 5_000;
export const DAY_MS = 86_400_000;

/** 'YYYY-MM-DD' of the UTC day containing `now` (ms since the epoch). */
export function utcDay(now: number): string {
  return new Date(now).toISOString().slice(0, 10);
}

/** The first instant (ms) of the UTC day after the one containing `now`. */
export function nextUtcDay(now: number): number {
  return (Math.floor(now / DAY_MS) + 1) * DAY_MS;
}

const own = <T>(record: Record<string, T>, key: string): T | undefined => (Object.hasOwn(record, key) ? record[key] : undefined);

export function newTenant(id: string): TenantContext {
  return {
    id,
    settings: TenantSettingsSchema.parse({}),
    state: "new",
    state_reason: null,
    day: "",
    starts_today: 0,
    active_runs: 0,
    active_by_project: {},
    running: {},
    queue: [],
    ended: [],
    created_at: 0,
    updated_at: 0,
  };
}

export function tenantView(c: TenantContext): TenantView {
  const { running: _running, ended: _ended, queue, descendants: _descendants, ...view } = c;
  return { ...view, queued_runs: (queue ?? []).length, active_descendants: c.active_descendants ?? 0 };
}

/**
 * `context` seen at `now`: when `now` falls in a later UTC day than `context.day`, the window
 * rolls over and `starts_today` restarts at 0. An earlier `now` (another node's clock) never
 * moves the window back. Returns the same object when nothing rolls.
 */
export function atDay(context: TenantContext, now: number): TenantContext {
  const today = utcDay(now);
  return today > context.day ? { ...context, day: today, starts_today: 0 } : context;
}

/** `context` with a new `running` map and the counters recomputed from it. */
function withRunning(context: TenantContext, running: Record<string, string>): TenantContext {
  const byProject = new Map<string, number>();
  for (const project of Object.values(running)) byProject.set(project, (byProject.get(project) ?? 0) + 1);
  return { ...context, running, active_runs: Object.keys(running).length, active_by_project: Object.fromEntries(byProject) };
}

function queueOf(context: TenantContext): [string, string][] {
  return context.queue ?? [];
}

/** Which cap keeps a run of `project` from starting now, if any. */
function capReached(context: TenantContext, project: string): { reason: QueueReason; active: number; limit: number } | undefined {
  const s = context.settings;
  if (context.active_runs >= s.max_concurrency) return { reason: "concurrency_cap_reached", active: context.active_runs, limit: s.max_concurrency };
  const cap = own(s.project_max_concurrency, project);
  const inProject = own(context.active_by_project, project) ?? 0;
  if (cap !== undefined && inProject >= cap) return { reason: "project_cap_reached", active: inProject, limit: cap };
  return undefined;
}

/**
 * Queued runs that fit under the caps now start, oldest first; a run held by its project's cap
 * does not hold back another project's. Only an active tenant starts queued runs (a draining or
 * killed one keeps them queued until it is resumed).
 */
function promote(context: TenantContext, now: number): { context: TenantContext; admitted: string[] } {
  const queue = queueOf(context);
  if (context.state !== "active" || queue.length === 0) return { context, admitted: [] };
  let next = context;
  const admitted: string[] = [];
  const left: [string, string][] = [];
  for (const entry of queue) {
    if (next.active_runs >= next.settings.max_concurrency || capReached(next, entry[1])) {
      left.push(entry);
      continue;
    }
    next = withRunning(next, { ...next.running, [entry[0]]: entry[1] });
    admitted.push(entry[0]);
  }
  if (admitted.length === 0) return { context, admitted };
  return { context: { ...next, queue: left, updated_at: now }, admitted };
}

/**
 * Whether a run may start now. Checked in this order: a run id admitted before (still running
 * or among the last {@link RECENT_ENDED} ended) is answered `admitted` again with `duplicate`
 * and counted once; a new, killed or draining tenant refuses; the day cap refuses until the next
 * UTC day (`resets_at`); the tenant's and then the project's concurrency cap answer `queued`
 * (wait, do not fail): the run joins the tenant's queue and is told `run.admitted` when a slot
 * frees. Admission and queueing change the context (starts_today, active counts, queue);
 * every refusal returns the context it was given.
 */
export function admitDecision(context: TenantContext, run: { run_id: string; project: string }, now: number): Decision<AdmitAnswer> {
  const { run_id, project } = run;
  if (Object.hasOwn(context.running, run_id) || context.ended.includes(run_id)) {
    return {
      context,
      answer: { outcome: "admitted", run_id, duplicate: true, starts_today: atDay(context, now).starts_today, active_runs: context.active_runs },
    };
  }
  const waiting = queueOf(context).findIndex(([id]) => id === run_id);
  if (waiting >= 0)
    return {
      context,
      answer: {
        outcome: "queued",
        run_id,
        reason: "concurrency_cap_reached",
        project,
        active: context.active_runs,
        limit: context.settings.max_concurrency,
        position: waiting,
        duplicate: true,
      },
    };
  if (context.state !== "active") {
    const outcome = context.state === "killed" ? "tenant_killed" : context.state === "draining" ? "tenant_draining" : "tenant_not_found";
    return { context, answer: { outcome, run_id } };
  }
  const s = context.settings;
  const rolled = atDay(context, now);
  if (rolled.starts_today >= s.day_cap) {
    return { context, answer: { outcome: "day_cap_reached", run_id, day: rolled.day, day_cap: s.day_cap, resets_at: nextUtcDay(now) } };
  }
  const blocked = capReached(context, project);
  if (blocked) {
    const queue = queueOf(context);
    if (queue.length >= MAX_QUEUED) return { context, answer: { outcome: "queue_full", run_id, queued: queue.length, limit: MAX_QUEUED } };
    // Accepted: it counts as a start today, and waits (never fails) for a slot.
    const next: TenantContext = { ...rolled, starts_today: rolled.starts_today + 1, queue: [...queue, [run_id, project]], updated_at: now };
    return {
      context: next,
      answer: {
        outcome: "queued",
        run_id,
        reason: blocked.reason,
        project,
        active: blocked.active,
        limit: blocked.limit,
        position: queue.length,
        duplicate: false,
      },
    };
  }
  const next = withRunning({ ...rolled, starts_today: rolled.starts_today + 1, updated_at: now }, { ...context.running, [run_id]: project });
  return { context: next, answer: { outcome: "admitted", run_id, duplicate: false, starts_today: next.starts_today, active_runs: next.active_runs } };
}

/**
 * A run admitted here has ended: it stops counting (under the project it was admitted with,
 * whatever project the event names). Idempotent per run id; counts never go below 0, since only
 * a run in `running` is uncounted. Accepted in every live state (a killed tenant's runs end too).
 */
export function runEndedDecision(context: TenantContext, run: { run_id: string }, now: number): Decision<RunEndedAnswer> {
  const { run_id } = run;
  const queue = queueOf(context);
  if (queue.some(([id]) => id === run_id)) {
    // A queued run that ended (cancelled while it waited) gives up its place.
    const next: TenantContext = {
      ...atDay(context, now),
      queue: queue.filter(([id]) => id !== run_id),
      ended: [...context.ended, run_id].slice(-RECENT_ENDED),
      updated_at: now,
    };
    return { context: next, answer: { outcome: "ended", run_id, active_runs: next.active_runs } };
  }
  if (!Object.hasOwn(context.running, run_id)) return { context, answer: { outcome: "not_running", run_id } };
  const running = Object.fromEntries(Object.entries(context.running).filter(([id]) => id !== run_id));
  const ended = [...context.ended, run_id].slice(-RECENT_ENDED);
  const p = promote(withRunning({ ...atDay(context, now), ended, updated_at: now }, running), now);
  return { context: p.context, answer: { outcome: "ended", run_id, active_runs: p.context.active_runs }, admitted: p.admitted };
}

/**
 * A queued run asks where it stands (its sweep, or its own create, which may have raced the
 * slot it was given). A run holding a slot is told `run.admitted` again; a queued one waits.
 */
export function recheckDecision(context: TenantContext, run: { run_id: string }): Decision<RecheckAnswer> {
  const { run_id } = run;
  if (Object.hasOwn(context.running, run_id)) return { context, answer: { outcome: "admitted", run_id }, admitted: [run_id] };
  const position = queueOf(context).findIndex(([id]) => id === run_id);
  if (position >= 0) return { context, answer: { outcome: "queued", run_id, position } };
  return { context, answer: { outcome: "unknown", run_id } };
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

/** Applies a settings patch; invalid input changes nothing. A patch that changes nothing is answered `updated` with `changed: []` and not audited. */
export function settingsDecision(context: TenantContext, patch: unknown, now: number): Decision<PutAnswer> {
  const merged = mergeSettings(context.settings, patch);
  if (!merged.ok) return { context, answer: { outcome: "invalid_input", reason: merged.reason } };
  const changed = changedSettings(context.settings, merged.settings);
  if (changed.length === 0) return { context, answer: { outcome: "updated", changed, tenant: tenantView(context) } };
  // Raised caps start queued runs at once.
  const p = promote({ ...atDay(context, now), settings: merged.settings, updated_at: now }, now);
  const audit: TenantAudit = { type: "tenant.settings_updated", tenant: context.id, at: now, changed, previous: context.settings, settings: merged.settings };
  return { context: p.context, answer: { outcome: "updated", changed, tenant: tenantView(p.context) }, audit, admitted: p.admitted };
}

/**
 * Kill, drain or resume. Moving to the state the tenant is already in changes nothing (the
 * first reason stays) and is not audited. Running work is not touched here: a kill only stops
 * admissions; fencing running work is the engine's decision.
 */
export function stateDecision(context: TenantContext, to: LiveTenantState, reason: string | undefined, now: number): Decision<StateAnswer> {
  const previous = context.state;
  if (previous === to) return { context, answer: { outcome: to, previous, changed: false, tenant: tenantView(context) } };
  // A resumed tenant starts the runs that queued meanwhile.
  const p = promote({ ...atDay(context, now), state: to, state_reason: to === "active" ? null : (reason ?? null), updated_at: now }, now);
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
  return { context: next, answer: { outcome: to, previous, changed: true, tenant: tenantView(next) }, audit, admitted: p.admitted };
}

/** The whole decision for one event: the next context and the effects (the answer, then any audit record). */
export function applyTenantCommand(context: TenantContext, event: TenantEvent): { context: TenantContext; effects: TenantEffect[] } {
  const d = decide(context, event);
  const effects: TenantEffect[] = [{ type: "runway.answer", value: d.answer }];
  if (d.audit) effects.push({ type: "runway.publish", subject: auditSubject(context.id), data: d.audit });
  for (const run_id of d.admitted ?? []) effects.push({ type: "runway.send", to: { kind: "run", id: run_id }, event: { type: "run.admitted" } });
  if (d.reply) effects.push({ type: "runway.send", to: { kind: "run", id: d.reply.run }, event: d.reply.event as ExpansionReply });
  return { context: d.context, effects };
}

function decide(context: TenantContext, event: TenantEvent): Decision<TenantAnswer> {
  switch (event.type) {
    case "tenant.create":
      return createDecision(context, event.settings, event.now);
    case "tenant.put":
      return settingsDecision(context, event.settings, event.now);
    case "tenant.kill":
    case "tenant.drain":
    case "tenant.resume":
      return stateDecision(context, STATE_COMMANDS[event.type], event.reason, event.now);
    case "tenant.admit_run":
      return admitDecision(context, event, event.now);
    case "tenant.run_ended":
      return runEndedDecision(context, event, event.now);
    case "tenant.recheck":
      return recheckDecision(context, event);
    case "tenant.admit_expansion":
      return admitExpansionDecision(context, event, event.now);
    case "tenant.release_expansion":
      return releaseExpansionDecision(context, event, event.now);
  }
}
