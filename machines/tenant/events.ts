import { z } from "zod";
import type { AdmissionCode } from "../scheduler/index.js";
import { TenantSettingsPatchSchema, TokenSchema, type TenantSettings } from "./settings.js";

export const TENANT_STATES = ["new", "active", "draining", "killed"] as const;
export type TenantState = (typeof TENANT_STATES)[number];
/** The states of a tenant that exists; kill, drain and resume move between them. */
export type LiveTenantState = Exclude<TenantState, "new">;

const Reason = z.string().min(1).max(1_000);
const RunRef = { run_id: TokenSchema, project: TokenSchema };

/** Commands a tenant actor accepts, validated at its mailbox (before the host adds `now`). */
export const TenantCommandSchema = z.discriminatedUnion("type", [
  z.object({ type: z.literal("tenant.create"), settings: TenantSettingsPatchSchema.optional() }),
  z.object({ type: z.literal("tenant.put"), settings: TenantSettingsPatchSchema }),
  z.object({ type: z.literal("tenant.kill"), reason: Reason }),
  z.object({ type: z.literal("tenant.drain"), reason: Reason }),
  z.object({ type: z.literal("tenant.resume"), reason: Reason.optional() }),
  /**
   * `reserve_cents`: what the run reserves of a day budget (its definition's `max_cost_cents`; absent: the tenant's default).
   * `tell_run`: the run asks itself (a person admitted it) and is told the outcome: `run.admitted`, or `run.admission_refused`.
   */
  z.object({
    type: z.literal("tenant.admit_run"),
    ...RunRef,
    reserve_cents: z.number().int().min(0).max(1e12).optional(),
    tell_run: z.boolean().optional(),
    /** The run id was made up at random for this start: never admitted before, so its member and ended keys are not read. */
    fresh: z.boolean().optional(),
  }),
  z.object({
    type: z.literal("tenant.run_ended"),
    ...RunRef,
    /** The start never made a run (its create was refused, its early admission given back): not one of today's starts. */
    withdrawn: z.literal(true).optional(),
  }),
  /** A queued run asks whether it holds a slot yet (its sweep, or its own create). */
  z.object({ type: z.literal("tenant.recheck"), run_id: TokenSchema }),
  /** A run asks to expand a node (a map's items) before any item starts; answered to the run. */
  z.object({
    type: z.literal("tenant.admit_expansion"),
    run_id: TokenSchema,
    node: z.string().min(1).max(200),
    children: z.number().int().nonnegative(),
    depth: z.number().int().nonnegative(),
    total_steps: z.number().int().nonnegative(),
    estimated_cost: z.number().nonnegative(),
  }),
  /** The expansion's items are no longer active (the node settled, or the run ended). */
  z.object({ type: z.literal("tenant.release_expansion"), run_id: TokenSchema, node: z.string().min(1).max(200) }),
  /** The tenant to itself: more queued runs may fit than one transition starts. */
  z.object({ type: z.literal("tenant.promote") }),
  /** The tenant to itself: an older-format record still holds members to move out. */
  z.object({ type: z.literal("tenant.migrate") }),
]);
export type TenantCommand = z.infer<typeof TenantCommandSchema>;
export type TenantCommandType = TenantCommand["type"];
export const TENANT_COMMANDS = TenantCommandSchema.options.map((o) => o.shape.type.value) as readonly TenantCommandType[];

/**
 * A command as the machine sees it: the host adds `now` (wall-clock ms); the actor's `prepare`
 * adds the membership keys the decision reads (`facts`, see `members.ts`) and how long an ended
 * run's mark is kept (`retention_ms`, default {@link DEFAULT_ENDED_RETENTION_MS}).
 */
export type TenantEvent = TenantCommand & { now: number; facts?: Readonly<Record<string, unknown>>; retention_ms?: number };

/** How long a tenant remembers an ended run (a late duplicate admission is answered, not counted): 7 days. */
export const DEFAULT_ENDED_RETENTION_MS = 7 * 86_400_000;

/** What the machine is created with: the actor's id (the host's `input(id)`). */
export interface TenantInput {
  id: string;
}

/** A tenant as answers and audit records show it (the run-id sets are left out). */
export interface TenantView {
  id: string;
  state: TenantState;
  state_reason: string | null;
  settings: TenantSettings;
  day: string;
  starts_today: number;
  /** Cents reserved today of the day budget by runs not ended. */
  reserved_cents: number;
  active_runs: number;
  /** Active runs of each project that has a cap (`project_max_concurrency`). */
  active_by_project: Record<string, number>;
  /** Runs accepted and waiting for a slot. */
  queued_runs: number;
  /** Members of an older-format record not yet moved out of it (0 once migrated). */
  migrating: number;
  /** Items of admitted expansions not yet released. */
  active_descendants: number;
  created_at: number;
  updated_at: number;
}

/** Admission refusals: the run must not start (today, or until the tenant is resumed). */
export type AdmitRefusal = "tenant_not_found" | "tenant_killed" | "tenant_draining" | "day_cap_reached" | "budget_exhausted";
/** Reasons to queue: the run waits for capacity and is never failed for waiting. */
export type QueueReason = "concurrency_cap_reached" | "project_cap_reached";

export type AdmitAnswer =
  /** Counted (or, with `duplicate`, counted earlier: the run id was admitted before). */
  | { outcome: "admitted"; run_id: string; duplicate: boolean; starts_today: number; active_runs: number }
  /** Accepted (or, with `duplicate`, accepted earlier): it waits at `position` for a slot and is never failed for waiting. */
  | { outcome: "queued"; run_id: string; reason: QueueReason; project: string; active: number; limit: number; position: number; duplicate: boolean }
  /** The tenant's queue is full: no run is created. */
  | { outcome: "queue_full"; run_id: string; queued: number; limit: number }
  | { outcome: "day_cap_reached"; run_id: string; day: string; day_cap: number; resets_at: number }
  /** The day budget would be passed: spent today + reserved by live runs + this run's reservation. */
  | {
      outcome: "budget_exhausted";
      run_id: string;
      day: string;
      day_budget_cents: number;
      spent_cents: number;
      reserved_cents: number;
      reserve_cents: number;
      resets_at: number;
    }
  | { outcome: Exclude<AdmitRefusal, "day_cap_reached" | "budget_exhausted">; run_id: string };

export type RunEndedAnswer =
  /** Uncounted now. */
  | { outcome: "ended"; run_id: string; active_runs: number }
  /** Not counted here: never admitted, or already ended. Nothing changed. */
  | { outcome: "not_running"; run_id: string };

/** Answers to expansion admission and release (see `expansion.ts`). */
export type ExpansionAnswer =
  | { outcome: "expansion_admitted"; run_id: string; node: string; children: number; active_descendants: number; duplicate: boolean }
  | { outcome: "expansion_refused"; run_id: string; node: string; code: AdmissionCode; limit: number; value: number }
  | { outcome: "expansion_released"; run_id: string; node: string; active_descendants: number }
  | { outcome: "not_held"; run_id: string; node: string };

/** A run that asked for itself (`tell_run`) was refused: it fails with the code. */
export type AdmissionRefusedReply = { type: "run.admission_refused"; code: string; message: string };

export type ExpansionReply = { type: "expansion.admitted"; node: string } | { type: "expansion.refused"; node: string; code: AdmissionCode; message: string };

export type RecheckAnswer = { outcome: "admitted" | "queued" | "unknown"; run_id: string; position?: number };

/**
 * An older-format record is still being moved out (a few transitions): an admission, a
 * settings change or a resume is asked again later (retryable); a run's report (ended, recheck,
 * expansion) is sent back to the tenant's own mailbox and applied once the move is done.
 */
export type MigratingAnswer = { outcome: "migrating"; left: number };
export type PromoteAnswer = { outcome: "promoted"; admitted: number } | { outcome: "migrated"; left: number };

export type InvalidAnswer = { outcome: "invalid_input"; reason: string };
export type CreateAnswer = { outcome: "created" | "exists"; tenant: TenantView } | InvalidAnswer;
export type PutAnswer = { outcome: "updated"; changed: string[]; tenant: TenantView } | InvalidAnswer;
/** Kill, drain and resume answer with the state the tenant is in afterwards. */
export type StateAnswer = { outcome: LiveTenantState; previous: TenantState; changed: boolean; tenant: TenantView };

export type TenantAnswer =
  AdmitAnswer | RunEndedAnswer | RecheckAnswer | ExpansionAnswer | CreateAnswer | PutAnswer | StateAnswer | MigratingAnswer | PromoteAnswer;

/** Published to `rw.audit.<tenant>.tenant` for every decision that changed the tenant. */
export type TenantAudit =
  | { type: "tenant.created"; tenant: string; at: number; settings: TenantSettings }
  | { type: "tenant.settings_updated"; tenant: string; at: number; changed: string[]; previous: TenantSettings; settings: TenantSettings }
  | { type: "tenant.state_changed"; tenant: string; at: number; from: TenantState; to: LiveTenantState; reason: string | null; active_runs: number };

/** The effects this machine emits (a subset of the runtime's effect vocabulary). */
export type TenantEffect =
  | { type: "runway.answer"; value: TenantAnswer }
  | { type: "runway.publish"; subject: string; data: TenantAudit }
  /** A queued run got its slot, or a run's expansion was decided. */
  | { type: "runway.send"; to: { kind: "run"; id: string }; event: { type: "run.admitted" } | ExpansionReply | AdmissionRefusedReply }
  /** The tenant to itself (see `tenant.promote`, `tenant.migrate`, {@link MigratingAnswer}). */
  | { type: "runway.send"; to: { kind: "tenant"; id: string }; event: { type: string } & Record<string, unknown> }
  /** A membership key (`tenant.<id>.<key>`, see `members.ts`), written after the record. */
  | { type: "runway.store"; key: string; value: unknown; ttl_ms?: number };

export function auditSubject(tenant: string): string {
  return `rw.audit.${tenant}.tenant`;
}
