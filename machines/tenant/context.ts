import type { TenantAudit, TenantState } from "./events.js";
import type { TenantSettings } from "./settings.js";

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
  /** Items of admitted expansions, per `<run>/<node>`, until released (absent in older records). */
  descendants?: Record<string, number>;
  /** Always the sum of `descendants`. */
  active_descendants?: number;
  /** Runs accepted and waiting for a slot under the caps, oldest first: [run id, project]. */
  queue: [string, string][];
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
  /** Queued runs that got a slot: each is told `run.admitted`. */
  admitted?: string[];
  /** A reply to the run that asked (expansion admission). */
  reply?: { run: string; event: { type: string } & Record<string, unknown> };
}
