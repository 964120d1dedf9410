import {
  auditSubject,
  type AdmitAnswer,
  type CreateAnswer,
  type LiveTenantState,
  type PutAnswer,
  type RunEndedAnswer,
  type StateAnswer,
  type TenantAudit,
  type TenantEffect,
  type TenantEvent,
  type TenantState,
  type TenantView,
} from "./events.js";
import { changedSettings, mergeSettings, TenantSettingsSchema, type TenantSettings } from "./settings.js";
import { STATE_COMMANDS } from "./table.js";

/** How many ended run ids a tenant remembers, so a late duplicate admission is not counted twice. */
export const RECENT_ENDED = 1_000;
export const DAY_MS = 86_400_000;

/** A tenant as its actor stores it. */
export interface TenantContext {
  id: string;
  settings: TenantSettings;
  state: TenantState;
  /** The reason given for the current kill or drain; null while new or active. */
  state_reason: string | null;
  /** 'YYYY-MM-DD' (UTC) of the day cap window `starts_today` counts in; never moves backwards. */
  day: string;
  starts_today: number;
  /** Always `running`'s size; recomputed from it, never counted on its own. */
  active_runs: number;
  /** Always `running` counted per project (projects at 0 are absent). */
  active_by_project: Record<string, number>;
  /** Runs admitted and not yet ended: run id → project. */
  running: Record<string, string>;
  /** The last {@link RECENT_ENDED} run ids that ended here, oldest first. */
  ended: string[];
  created_at: number;
  updated_at: number;
}

/** A decision: the next context (the same object when nothing changed) and the effects, answer first. */
export interface Decision<A> {
  context: TenantContext;
  answer: A;
  audit?: TenantAudit;
}

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
    ended: [],
    created_at: 0,
    updated_at: 0,
  };
}

export function tenantView(c: TenantContext): TenantView {
  const { running: _running, ended: _ended, ...view } = c;
  return view;
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

/**
 * Whether a run may start now. Checked in this order: a run id admitted before (still running
 * or among the last {@link RECENT_ENDED} ended) is answered `admitted` again with `duplicate`
 * and counted once; a new, killed or draining tenant refuses; the day cap refuses until the next
 * UTC day (`resets_at`); the tenant's and then the project's concurrency cap answer `queued`
 * (wait, do not fail). Only an admission changes the context (starts_today, active counts);
 * every refusal returns the context it was given.
 */
export function admitDecision(context: TenantContext, run: { run_id: string; project: string }, now: number): Decision<AdmitAnswer> {
  const { run_id, project } = run;
  if (Object.hasOwn(context.running, run_id) || context.ended.includes(run_id)) {
    return { context, answer: { outcome: "admitted", run_id, duplicate: true, starts_today: atDay(context, now).starts_today, active_runs: context.active_runs } };
  }
  if (context.state !== "active") {
    const outcome = context.state === "killed" ? "tenant_killed" : context.state === "draining" ? "tenant_draining" : "tenant_not_found";
    return { context, answer: { outcome, run_id } };
  }
  const s = context.settings;
  const rolled = atDay(context, now);
  if (rolled.starts_today >= s.day_cap) {
    return { context, answer: { outcome: "day_cap_reached", run_id, day: rolled.day, day_cap: s.day_cap, resets_at: nextUtcDay(now) } };
  }
  if (context.active_runs >= s.max_concurrency) {
    return { context, answer: { outcome: "queued", run_id, reason: "concurrency_cap_reached", project, active: context.active_runs, limit: s.max_concurrency } };
  }
  const cap = own(s.project_max_concurrency, project);
  const inProject = own(context.active_by_project, project) ?? 0;
  if (cap !== undefined && inProject >= cap) {
    return { context, answer: { outcome: "queued", run_id, reason: "project_cap_reached", project, active: inProject, limit: cap } };
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
  if (!Object.hasOwn(context.running, run_id)) return { context, answer: { outcome: "not_running", run_id } };
  const running = Object.fromEntries(Object.entries(context.running).filter(([id]) => id !== run_id));
  const ended = [...context.ended, run_id].slice(-RECENT_ENDED);
  const next = withRunning({ ...atDay(context, now), ended, updated_at: now }, running);
  return { context: next, answer: { outcome: "ended", run_id, active_runs: next.active_runs } };
}

/** Creates the tenant (`new` → `active`); a tenant that exists answers `exists` and stays as it is. */
export function createDecision(context: TenantContext, settings: unknown, now: number): Decision<CreateAnswer> {
  if (context.state !== "new") return { context, answer: { outcome: "exists", tenant: tenantView(context) } };
  if (!context.id) return { context, answer: { outcome: "invalid_input", reason: "tenant id missing: create the machine with input { id }" } };
  const merged = mergeSettings(undefined, settings);
  if (!merged.ok) return { context, answer: { outcome: "invalid_input", reason: merged.reason } };
  const next: TenantContext = { ...newTenant(context.id), settings: merged.settings, state: "active", day: utcDay(now), created_at: now, updated_at: now };
  return { context: next, answer: { outcome: "created", tenant: tenantView(next) }, audit: { type: "tenant.created", tenant: next.id, at: now, settings: next.settings } };
}

/** Applies a settings patch; invalid input changes nothing. A patch that changes nothing is answered `updated` with `changed: []` and not audited. */
export function settingsDecision(context: TenantContext, patch: unknown, now: number): Decision<PutAnswer> {
  const merged = mergeSettings(context.settings, patch);
  if (!merged.ok) return { context, answer: { outcome: "invalid_input", reason: merged.reason } };
  const changed = changedSettings(context.settings, merged.settings);
  if (changed.length === 0) return { context, answer: { outcome: "updated", changed, tenant: tenantView(context) } };
  const next: TenantContext = { ...atDay(context, now), settings: merged.settings, updated_at: now };
  const audit: TenantAudit = { type: "tenant.settings_updated", tenant: context.id, at: now, changed, previous: context.settings, settings: merged.settings };
  return { context: next, answer: { outcome: "updated", changed, tenant: tenantView(next) }, audit };
}

/**
 * Kill, drain or resume. Moving to the state the tenant is already in changes nothing (the
 * first reason stays) and is not audited. Running work is not touched here: a kill only stops
 * admissions; fencing running work is the engine's decision.
 */
export function stateDecision(context: TenantContext, to: LiveTenantState, reason: string | undefined, now: number): Decision<StateAnswer> {
  const previous = context.state;
  if (previous === to) return { context, answer: { outcome: to, previous, changed: false, tenant: tenantView(context) } };
  const next: TenantContext = { ...atDay(context, now), state: to, state_reason: to === "active" ? null : (reason ?? null), updated_at: now };
  const audit: TenantAudit = { type: "tenant.state_changed", tenant: context.id, at: now, from: previous, to, reason: reason ?? null, active_runs: next.active_runs };
  return { context: next, answer: { outcome: to, previous, changed: true, tenant: tenantView(next) }, audit };
}

/** The whole decision for one event: the next context and the effects (the answer, then any audit record). */
export function applyTenantCommand(context: TenantContext, event: TenantEvent): { context: TenantContext; effects: TenantEffect[] } {
  const d = decide(context, event);
  const effects: TenantEffect[] = [{ type: "runway.answer", value: d.answer }];
  if (d.audit) effects.push({ type: "runway.publish", subject: auditSubject(context.id), data: d.audit });
  return { context: d.context, effects };
}

function decide(context: TenantContext, event: TenantEvent): Decision<AdmitAnswer | RunEndedAnswer | CreateAnswer | PutAnswer | StateAnswer> {
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
  }
}
