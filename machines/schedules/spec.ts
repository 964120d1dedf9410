import { z } from "zod";
import { RunLaneSchema, TokenSchema } from "../tenant/index.js";
import { WorkflowNameSchema } from "../workflow/index.js";

/** A schedule's name: part of its KV key (`<tenant>.<name>`) and of its firings' start-key source. */
export const ScheduleNameSchema = z
  .string()
  .regex(/^[a-z0-9][a-z0-9-]{0,62}$/, "a schedule name is 1-63 characters of [a-z0-9-], starting with a letter or digit");

/** The shortest interval of an `every` schedule (a cron expression's finest field is the second too). */
export const MIN_EVERY_MS = 1_000;
/** The most missed firings one look may start again (`{catch_up: N}`). */
export const MAX_CATCH_UP = 1_000;

/**
 * What happens to firings missed while no node could start them (downtime, a failover): `skip`
 * starts none of them; `{catch_up: N}` starts the newest N. A firing is missed when a newer one
 * is already due, or when it is noticed more than the grace (machines/schedules/firings.ts) after
 * its due time.
 */
export const MissedPolicySchema = z.union([z.literal("skip"), z.strictObject({ catch_up: z.number().int().min(1).max(MAX_CATCH_UP) })]);
export type MissedPolicy = z.infer<typeof MissedPolicySchema>;

/**
 * A schedule as a tenant puts it: which definition to start with which input, when (a cron
 * expression in a time zone, or a fixed interval: exactly one), and what to do with missed
 * firings. The cron expression and the time zone are checked where croner lives (gateways/schedules).
 */
export const ScheduleSpecSchema = z
  .strictObject({
    name: ScheduleNameSchema,
    definition: WorkflowNameSchema,
    input: z.unknown().optional().describe("The input of every run it starts (default {})."),
    cron: z
      .strictObject({
        expr: z.string().min(1).max(200).describe("5 fields (minute precision) or 6 (with seconds first), as croner reads them."),
        tz: z.string().min(1).max(64).default("UTC").describe("An IANA time zone (default UTC)."),
      })
      .optional(),
    every: z
      .strictObject({
        ms: z
          .number()
          .int()
          .min(MIN_EVERY_MS)
          .max(366 * 86_400_000),
      })
      .optional(),
    missed: MissedPolicySchema.default("skip"),
    paused: z.boolean().default(false),
    lane: RunLaneSchema.optional().describe("The lane of its runs; absent: as for any start from source `schedule`."),
    project: TokenSchema.optional(),
  })
  .refine((s) => (s.cron === undefined) !== (s.every === undefined), { message: "a schedule has exactly one of cron and every", path: ["cron"] });
export type ScheduleSpec = z.infer<typeof ScheduleSpecSchema>;
