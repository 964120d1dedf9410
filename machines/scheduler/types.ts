import { z } from "zod";

/**
 * The scheduling classes, in tier order: interactive and approval-resume share the first tier
 * (and the reserved slots), automation is the second, migration runs only on idle capacity.
 */
export const TICKET_CLASSES = ["interactive", "approval_resume", "automation", "migration"] as const;
export type TicketClass = (typeof TICKET_CLASSES)[number];
export const TicketClassSchema = z.enum(TICKET_CLASSES);

/** Priorities run 0..MAX_PRIORITY, higher first. */
export const MAX_PRIORITY = 9;

/**
 * A ticket waiting past `STARVATION_AGING_MULTIPLE × aging_ms` counts as a starvation event (by
 * then aging has lifted even a priority-0 ticket above every fresh ticket of its tenant).
 */
export const STARVATION_AGING_MULTIPLE = MAX_PRIORITY + 1;

/** One ready step waiting for a worker slot. Validate at the edge; `enqueue` trusts its input. */
export const TicketSchema = z.object({
  id: z.string().min(1),
  tenant: z.string().min(1),
  project: z.string().min(1),
  class: TicketClassSchema,
  priority: z.number().int().min(0).max(MAX_PRIORITY),
  /** Absolute ms; earlier first among equal effective priorities; null sorts last. */
  deadline: z.number().nullable(),
  /** Estimated cost units charged to the tenant's virtual time on lease. */
  cost: z.number().positive().default(1),
  enqueued_at: z.number(),
  /** The provider quota this step draws on: `tokens` are taken from `buckets[key]` on lease. */
  provider: z.object({ key: z.string().min(1), tokens: z.number().nonnegative() }).optional(),
});
/** A normalised ticket (cost filled in), as the scheduler stores and returns it. */
export type Ticket = z.output<typeof TicketSchema>;
/** What `enqueue` accepts: `cost` may be left out (1). */
export type TicketInput = z.input<typeof TicketSchema>;

export const TenantPolicySchema = z.object({
  /** Share of the fleet relative to other tenants; must be > 0 to lease anything. */
  weight: z.number().positive(),
  /** Leases the tenant may hold at once, all classes together. */
  max_concurrency: z.number().int().nonnegative(),
  /** Per-project caps inside the tenant; a project not named is capped only by the tenant. */
  project_max_concurrency: z.record(z.string(), z.number().int().nonnegative()).optional(),
  /**
   * A class's fraction of the node's slots this tenant's work of that class may hold at once:
   * at most `ceil(share × slots)` leases, and never fewer than one, so a share caps a class but
   * cannot starve it. A class not named is capped only by the tenant.
   */
  class_shares: z.record(z.string(), z.number().min(0).max(1)).optional(),
  /** A killed or draining tenant leases nothing; its tickets stay queued for the caller to handle. */
  killed: z.boolean().optional(),
  draining: z.boolean().optional(),
});
export type TenantPolicy = z.output<typeof TenantPolicySchema>;

export const SchedulerConfigSchema = z.object({
  /** Worker slots in all. */
  slots: z.number().int().nonnegative(),
  /** Non-interactive work never takes the last `interactive_reserve` free slots. */
  interactive_reserve: z.number().int().nonnegative(),
  /** Migration leases running at once, at most. */
  migration_cap: z.number().int().nonnegative(),
  /** Each full `aging_ms` of waiting raises a ticket's effective priority by one. */
  aging_ms: z.number().positive(),
  /** Wait after which a lease counts a starvation event; default `STARVATION_AGING_MULTIPLE × aging_ms`. */
  starvation_after_ms: z.number().positive().optional(),
});
export type SchedulerConfig = z.output<typeof SchedulerConfigSchema>;
