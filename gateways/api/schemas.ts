import { z } from "zod";
import { ID_PATTERN } from "../../runtime/index.js";
import {
  RunLaneSchema,
  ScheduleNameSchema,
  ScheduleSpecSchema,
  SignalNameSchema,
  TenantIdSchema,
  TokenSchema,
  ToolServerNameSchema,
  WorkflowNameSchema,
} from "../../machines/index.js";
import { INBOX_PAGE_MAX, RUNS_CURSOR_PATTERN } from "../../actors/index.js";
import { ModelProviderNameSchema, ModelProviderSpecSchema } from "../models/index.js";
import { ApiKeyNameSchema, ReviewerGroupSchema } from "../keys/index.js";

/**
 * The `runway` API's requests, one zod schema each: the single source of what an endpoint takes.
 * The service validates with them (unknown fields refused), the client and the services use the
 * types inferred from them, and docs/api-schemas.md shows their JSON Schema
 * (`node --import tsx scripts/api-schemas.ts`).
 */

/** Every answer of the API: a closed `{ outcome, … }` per endpoint; this is the shape they share. */
export type ApiAnswer = { outcome: string } & Record<string, unknown>;

/** A run id is an actor id (it becomes a KV key and a subject token); one of another tenant is simply not found. */
const RunId = z.string().regex(ID_PATTERN, "a run id is 1-200 characters of [A-Za-z0-9_=-]");
/** Versions count up from 1; the bound keeps the number's text plain digits (it is part of a KV key). */
const Version = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);
/** Identity of the delivery that asked for a run; the same pair always means the same run. */
const StartKey = z.strictObject({
  source: z
    .string()
    .min(1)
    .max(200)
    .regex(/^(?!schedule:)/, "a source starting `schedule:` is the schedules' own (their firings' keys cannot be claimed by a caller)"),
  delivery_id: z.string().min(1).max(500),
});

/** `runs.start`. */
export const StartRunRequestSchema = z.strictObject({
  definition: WorkflowNameSchema,
  version: Version.optional(),
  input: z.unknown().optional(),
  start_key: StartKey.optional().describe("Identity of the delivery that asked for this run; the same pair always means the same run."),
  lane: RunLaneSchema.optional().describe("The lane; absent: interactive for a source the tenant allows it, batch for any other."),
  source: TokenSchema.optional().describe("Who asks (default the start key's source, else `api`; the CLI says `cli`): decides the lane."),
  project: TokenSchema.optional().describe("The tenant's project the run counts under (its project cap); default `default`."),
  priority: z.number().int().min(0).max(9).optional().describe("Scheduling priority of its attempts, 0-9 (default 5); its children inherit it, never more."),
  deadline_ms: z
    .number()
    .int()
    .positive()
    .max(366 * 86_400_000)
    .optional()
    .describe("Its attempts should be leased within this many ms of the start (earlier deadlines first at equal priority)."),
});
export type StartRunRequest = z.infer<typeof StartRunRequestSchema>;

/** `runs.list`. */
export const ListRunsRequestSchema = z.strictObject({
  status: z.enum(["queued", "running", "waiting", "succeeded", "failed", "cancelled"]).optional(),
  limit: z.number().int().positive().max(500).optional(),
  cursor: z.string().regex(RUNS_CURSOR_PATTERN).optional().describe("`next_cursor` of the previous page."),
});
export type ListRunsRequest = z.infer<typeof ListRunsRequestSchema>;

/** `runs.events`. */
export const RunEventsRequestSchema = z.strictObject({
  run_id: RunId,
  after: z
    .string()
    .regex(/^[1-9][0-9]{0,15}\.(0|[1-9][0-9]{0,5})$/, "an event id is <revision>.<index>, as events carry it")
    .optional()
    .describe("The last event id the caller has (`<revision>.<index>`, as published); absent: from the run's first event."),
  limit: z.number().int().positive().max(1_000).optional(),
});

/** `approvals.list`. */
export const ListApprovalsRequestSchema = z.strictObject({
  group: z.string().max(64).optional(),
  run_id: RunId.optional(),
  expires_before: z.number().int().nonnegative().optional(),
  limit: z.number().int().positive().max(INBOX_PAGE_MAX).optional(),
  cursor: z
    .string()
    .regex(/^\d+:.{1,500}$/, "a cursor is the next_cursor of an earlier page")
    .optional(),
});
export type ListApprovalsRequest = z.infer<typeof ListApprovalsRequestSchema>;

/** `approvals.decide`. */
export const DecideRequestSchema = z.strictObject({
  id: z.string().min(3).max(500),
  decision: z.enum(["approve", "reject", "edit"]),
  payload: z
    .unknown()
    .optional()
    .describe("`edit`: what the run goes on with instead of the request's payload; `approve` of a request for input: the form's content."),
  reason: z.string().max(4_096).optional(),
  by: z.string().min(1).max(200).default("api"),
});
export type DecideRequest = z.infer<typeof DecideRequestSchema>;

/** `runs.signal`. */
export const SignalRequestSchema = z.strictObject({
  run_id: RunId,
  name: SignalNameSchema,
  data: z.unknown().optional(),
  by: z.string().min(1).max(200).default("api"),
});
export type SignalRequest = z.infer<typeof SignalRequestSchema>;

/** `runs.reconcile`. */
export const ReconcileRequestSchema = z.strictObject({
  run_id: RunId,
  key: z.string().min(1).max(600),
  decision: z.enum(["done", "retry", "abandon"]),
  result: z.unknown().optional().describe("`done`: the call's result as the person found it (what the step gets instead of calling)."),
  by: z.string().min(1).max(200).default("api"),
});
export type ReconcileRequest = z.infer<typeof ReconcileRequestSchema>;

/** An A2A skill an exposed agent's card shows (absent: one skill named after its definition). */
const AgentSkillSchema = z.strictObject({
  id: z.string().min(1).max(100),
  name: z.string().min(1).max(200),
  description: z.string().min(1).max(2_000),
  tags: z.array(z.string().min(1).max(64)).max(20),
  examples: z.array(z.string().max(1_000)).max(20).optional(),
});

/** `agents.expose`. */
export const ExposeAgentRequestSchema = z.strictObject({
  definition: WorkflowNameSchema.describe("The published definition a task of this agent runs (its latest version at each start)."),
  name: WorkflowNameSchema.optional().describe("The agent's name in its URL, `/a2a/<tenant>/<name>` (default: the definition's)."),
  description: z.string().min(1).max(2_000).optional().describe("The card's description (default: the definition's)."),
  skills: z.array(AgentSkillSchema).min(1).max(32).optional(),
  public: z.boolean().default(false).describe("Callers need no credentials: an explicit choice per agent (otherwise a bearer token is required)."),
});
/** What a caller sends (`public` may be left out). */
export type ExposeAgentRequest = z.input<typeof ExposeAgentRequestSchema>;

/** Every endpoint's request, by endpoint (the micro service's endpoint names, grouped). */
export const requests = {
  definitionsPut: z.strictObject({ definition: z.unknown(), publish: z.boolean().default(true) }),
  definitionsGet: z.strictObject({ name: WorkflowNameSchema, version: Version.optional() }),
  definitionsList: z.strictObject({}),
  definitionsDisable: z.strictObject({ name: WorkflowNameSchema }),
  definitionsEnable: z.strictObject({ name: WorkflowNameSchema }),
  runsStart: StartRunRequestSchema,
  runsGet: z.strictObject({ run_id: RunId }),
  runsList: ListRunsRequestSchema,
  runsEvents: RunEventsRequestSchema,
  runsCancel: z.strictObject({ run_id: RunId, reason: z.string().max(1_000).default("cancelled by request"), by: z.string().max(200).default("api") }),
  runsSignal: SignalRequestSchema,
  runsReconcile: ReconcileRequestSchema,
  runsReconciliations: z.strictObject({ run_id: RunId.optional() }),
  runsTrajectory: z.strictObject({ run_id: RunId }),
  runsReplay: z.strictObject({ run_id: RunId, wait_ms: z.number().int().min(0).max(60_000).default(30_000) }),
  approvalsList: ListApprovalsRequestSchema,
  approvalsGet: z.strictObject({ id: z.string().min(3).max(500) }),
  approvalsDecide: DecideRequestSchema,
  agentsExpose: ExposeAgentRequestSchema,
  agentsList: z.strictObject({}),
  agentsHide: z.strictObject({ name: WorkflowNameSchema }),
  keysCreate: z.strictObject({
    name: ApiKeyNameSchema.describe("Unique among the tenant's live keys; the key's identity is `key:<tenant>/<name>`."),
    groups: z.array(ReviewerGroupSchema).max(32).optional().describe("The reviewer groups whose approvals the key's caller may decide."),
    interactive: z.boolean().optional().describe("Its callers' runs take the interactive lane (default: batch)."),
  }),
  keysList: z.strictObject({}),
  keysRevoke: z.strictObject({ name: ApiKeyNameSchema }),
  toolServersPut: z.strictObject({ server: z.unknown() }),
  toolServerName: z.strictObject({ name: ToolServerNameSchema }),
  toolServersList: z.strictObject({}),
  toolsList: z.strictObject({ server: ToolServerNameSchema.optional() }),
  modelsPut: z.strictObject({
    provider: ModelProviderSpecSchema.describe("The provider record (docs/models.md); `api_key` is stored with it and never shown again."),
  }),
  modelName: z.strictObject({ name: ModelProviderNameSchema }),
  modelsList: z.strictObject({}),
  tenantGet: z.strictObject({}),
  tenantPut: z.strictObject({ settings: z.unknown() }),
  tenantsPut: z.strictObject({ id: TenantIdSchema, settings: z.unknown().optional() }),
  tenantsList: z.strictObject({}),
  tenantsState: z.strictObject({ id: TenantIdSchema, reason: z.string().max(1_000).default("operator") }),
  schedulesPut: z.strictObject({ schedule: ScheduleSpecSchema }),
  scheduleName: z.strictObject({ name: ScheduleNameSchema }),
  schedulesList: z.strictObject({}),
  sweep: z.strictObject({}),
  deadLetters: z.strictObject({ limit: z.number().int().positive().max(500).default(50) }),
};
