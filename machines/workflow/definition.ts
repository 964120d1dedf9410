/**
 * The user-facing workflow definition: JSON validated by zod. Every object is strict (an unknown
 * field is an error). This module checks shape only; graph rules (unique ids, needs, cycles,
 * references, handlers, limits) are the compiler's job (compile.ts).
 */
import { z } from "zod";
import { isJson, type Json } from "./canonical.js";
import { agentNodeObject, type AgentFields } from "./agent-node.js";
import { a2aNodeShape, type A2ANode } from "./a2a.js";

export type { Json };

/** A template: any JSON value; `"${expr}"` strings are substituted, see templates.ts. */
export type Template = Json;

/**
 * A workflow (definition) name: 1–63 characters of `[a-z0-9-]`, starting with a letter or digit.
 * It becomes part of KV keys (`<tenant>.<name>.latest`), so nothing else passes: no dots,
 * wildcards, spaces, `$`, control characters or non-ASCII letters. The one rule for publishing,
 * subworkflow targets and every API request that names a definition.
 */
export const WorkflowNameSchema = z
  .string()
  .regex(/^[a-z0-9][a-z0-9-]{0,62}$/, "a workflow name is 1-63 characters of [a-z0-9-], starting with a letter or digit");
export const NODE_ID = /^[a-zA-Z][a-zA-Z0-9_-]{0,62}$/;
/** A string holding exactly one `${expr}` and nothing else. */
export const EXACT_REF = /^\$\{[^}]*\}$/;

export const DEFAULT_TIMEOUT_MS = 30_000;
export const MAX_TIMEOUT_MS = 15 * 60_000;
export const MAX_SLEEP_MS = 366 * 24 * 3_600_000;

export type NeedWhen = "succeeded" | "failed" | "always";
export type Need = string | { node: string; when: NeedWhen };

export type Retry = { max_attempts: number; backoff_ms: number; max_backoff_ms: number; multiplier?: number };

export type CompareOp = "eq" | "ne" | "gt" | "gte" | "lt" | "lte" | "in";
export type TestOp = "exists" | "truthy" | "falsy";
export type Condition = { ref: string; op: CompareOp | TestOp; value?: Json } | { all: Condition[] } | { any: Condition[] } | { not: Condition };

type Common = { id: string; needs?: Need[]; continue_on_error?: boolean };
export type CodeNode = Common & {
  kind: "code";
  handler: string;
  input?: Template;
  retry?: Retry;
  timeout_ms?: number;
  /** The provider quota this step draws on, `provider/model` (a tenant's `provider_quotas` key). */
  provider?: string;
  /** Estimated cost of one attempt (tokens, tool calls: any unit, the same for a tenant's steps); 1 when absent. Fair share counts cost, not attempts. */
  cost?: number;
};
export type ParallelNode = Common & { kind: "parallel"; branches: DefinitionNode[][] };
export type BranchNode = Common & { kind: "branch"; condition: Condition; then: DefinitionNode[]; else?: DefinitionNode[] };
export type MapNode = Common & {
  kind: "map";
  items: string;
  handler: string;
  input?: Template;
  max_fanout: number;
  concurrency?: number;
  retry?: Retry;
  timeout_ms?: number;
  provider?: string;
  /** Estimated cost of one item's attempt; 1 when absent. */
  cost?: number;
};
export type SubworkflowNode = Common & { kind: "subworkflow"; workflow: string; input?: Template };
export type SleepNode = Common & { kind: "sleep"; duration_ms: number };
/** Waits for a named signal (`runs.signal`), its data checked against `schema`; fails `wait_timeout` after `timeout_ms` (default 7 days). */
export type WaitNode = Common & { kind: "wait"; signal: string; schema?: { [key: string]: Json }; timeout_ms?: number };
/**
 * A person decides before the run goes on: `prompt` and `payload` (resolved when the node starts)
 * are shown to the reviewers of `group`; approve (the node outputs the payload), edit (it outputs
 * the reviewer's payload) or reject (it fails `approval_rejected`); past `timeout_ms` (default 7
 * days) it expires and ends the run under the one status rule: after work a success with
 * `partial_reason: approval_expired`, before any a failure `approval_expired`; what it gates never runs.
 */
export type ApprovalNode = Common & { kind: "approval"; prompt: string; payload?: Template; group?: string; escalation_group?: string; timeout_ms?: number };
/**
 * A person approves a gated tool's call before its intent is recorded (see `ToolApprovals`):
 * `prompt` (default `Call <server>/<tool>?`), reviewer `group`, `escalation_group`, and the one
 * expiry clock `timeout_ms` (default 7 days).
 */
export type ToolGate = { prompt?: string; group?: string; escalation_group?: string; timeout_ms?: number };
/**
 * One call of a tool of a server the tenant registered, through the tool gateway (intent before,
 * receipt after). With `approval`, its call is always gated, whatever the definition's policy.
 */
export type ToolNode = Common & {
  kind: "tool";
  server: string;
  tool: string;
  arguments?: Template;
  retry?: Retry;
  timeout_ms?: number;
  cost?: number;
  approval?: ToolGate;
  /**
   * The kind of resource a successful call of this tool writes (C074): when the call is not a read
   * (its live class is not `read_only`), each row of its output with an `id` adds `{kind, id}` to
   * the run's `refs`.
   */
  item_kind?: string;
};
/** A tool's effective class (`machines/tools`), as a gating policy names it. */
export type GatedClass = "read_only" | "idempotent" | "non_idempotent";
/**
 * The definition's gated tools: a call of a tool named in `tools` (`server/tool`, or `server/*`
 * for every tool of a server) or whose effective class is in `classes` asks a person first; the
 * request's prompt, groups and clock as in `ToolGate` (a tool node's own `approval` wins).
 */
export type ToolApprovals = ToolGate & { tools?: string[]; classes?: GatedClass[] };
/** An agent node (agent-node.ts): a model loop with the tenant's MCP tools; `timeout_ms` bounds one attempt of the whole loop. */
export type AgentNode = Common & AgentFields & { retry?: Retry; timeout_ms?: number };
export type DefinitionNode =
  CodeNode | ParallelNode | BranchNode | MapNode | SubworkflowNode | SleepNode | ToolNode | WaitNode | ApprovalNode | AgentNode | A2ANode;
export type { A2ANode };

/**
 * A run's ceilings: reaching one stops the run (after work: a success with `partial_reason:
 * limit_reached`, or `budget_exhausted` for money; before any: a failure with that code). Steps,
 * tool calls and wall clock are the run's own; `max_cost_cents` is the tree's: a child spends its
 * root's and ignores its own.
 */
export type RunLimits = { max_steps?: number; max_tool_calls?: number; max_wall_ms?: number; max_cost_cents?: number };

/**
 * A person admits each top-level run before it asks its tenant or does anything: the run is held
 * `waiting` on this approval (`prompt` shown to `group`); approved it starts as any run does,
 * rejected it is cancelled, unanswered past `timeout_ms` (default 7 days) it fails `approval_expired`.
 */
export type AdmissionPolicy = { approval: { prompt: string; group?: string; escalation_group?: string; timeout_ms?: number } };

export type Definition = {
  name: string;
  description?: string;
  input_schema?: { [key: string]: Json };
  nodes: DefinitionNode[];
  result?: Template;
  limits?: RunLimits;
  admission?: AdmissionPolicy;
  approvals?: ToolApprovals;
};

const JsonSchema = z.custom<Json>((v) => isJson(v), "expected a JSON value");
const NodeId = z.string().regex(NODE_ID, "a node id is a letter then up to 62 letters, digits, '_' or '-'");
const ExactRef = z.string().regex(EXACT_REF, 'expected exactly one reference, like "${input.list}"');
const Ms = z.number().int().nonnegative();

export const NeedSchema: z.ZodType<Need> = z.union([NodeId, z.strictObject({ node: NodeId, when: z.enum(["succeeded", "failed", "always"]) })]);

export const RetrySchema: z.ZodType<Retry> = z
  .strictObject({
    max_attempts: z.number().int().min(1).max(100),
    backoff_ms: Ms.max(MAX_TIMEOUT_MS),
    max_backoff_ms: Ms.max(24 * 3_600_000),
    multiplier: z.number().min(1).max(10).optional(),
  })
  .refine((r) => r.max_backoff_ms >= r.backoff_ms, { message: "max_backoff_ms is below backoff_ms", path: ["max_backoff_ms"] });

const VALUE_OPS: ReadonlySet<string> = new Set(["eq", "ne", "gt", "gte", "lt", "lte", "in"]);

export const ConditionSchema: z.ZodType<Condition> = z.lazy(() =>
  z.union([
    z
      .strictObject({
        ref: ExactRef,
        op: z.enum(["eq", "ne", "gt", "gte", "lt", "lte", "in", "exists", "truthy", "falsy"]),
        value: JsonSchema.optional(),
      })
      .superRefine((c, ctx) => {
        if (VALUE_OPS.has(c.op) && c.value === undefined) ctx.addIssue({ code: "custom", message: `op '${c.op}' needs a value`, path: ["value"] });
        if (!VALUE_OPS.has(c.op) && c.value !== undefined) ctx.addIssue({ code: "custom", message: `op '${c.op}' takes no value`, path: ["value"] });
        if (c.op === "in" && c.value !== undefined && !Array.isArray(c.value))
          ctx.addIssue({ code: "custom", message: "op 'in' needs an array value", path: ["value"] });
      }),
    z.strictObject({ all: z.array(ConditionSchema).min(1) }),
    z.strictObject({ any: z.array(ConditionSchema).min(1) }),
    z.strictObject({ not: ConditionSchema }),
  ]),
);

const common = {
  id: NodeId,
  needs: z.array(NeedSchema).optional(),
  continue_on_error: z.boolean().optional(),
};
const Timeout = z.number().int().min(1).max(MAX_TIMEOUT_MS);

/**
 * One node of any kind. `max_fanout` is only checked to be a positive integer here; the
 * compiler compares it with the configured limit (code `fanout_too_large`).
 */
const Cost = z.number().positive().max(1_000_000);
/** A signal's name (what `runs.signal` names and a `wait` node waits for). */
export const SignalNameSchema = z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, "a signal name is 1-64 letters, digits, '_', '.' or '-'");
/** A reviewer group an approval is for. */
export const ReviewerGroupSchema = z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, "a reviewer group is 1-64 letters, digits, '_', '.' or '-'");
/** How long a `wait` node waits when it names no `timeout_ms`. */
export const DEFAULT_WAIT_TIMEOUT_MS = 7 * 24 * 3_600_000;
/** A tool server's name in its tenant's registry. */
export const ToolServerNameSchema = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "a server name is 1-64 letters, digits, '_' or '-'");
/** `server/tool`, or `server/*` (every tool of the server). */
export const GatedToolSchema = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,64}\/([^/\s]{1,128})$/, "a gated tool is server/tool, or server/* for all of a server's tools");
const ToolGateShape = {
  prompt: z.string().min(1).max(4_096).optional(),
  group: ReviewerGroupSchema.optional(),
  escalation_group: ReviewerGroupSchema.optional(),
  timeout_ms: Ms.min(1).max(MAX_SLEEP_MS).optional(),
};
const Provider = z.string().regex(/^[A-Za-z0-9_.-]{1,64}\/[A-Za-z0-9_.:-]{1,128}$/, "a provider is provider/model");

export const NodeSchema: z.ZodType<DefinitionNode> = z.lazy(() =>
  z.discriminatedUnion("kind", [
    z.strictObject({
      ...common,
      kind: z.literal("code"),
      handler: z.string().min(1).max(200),
      input: JsonSchema.optional(),
      retry: RetrySchema.optional(),
      timeout_ms: Timeout.optional(),
      provider: Provider.optional(),
      cost: Cost.optional(),
    }),
    z.strictObject({ ...common, kind: z.literal("parallel"), branches: z.array(z.array(NodeSchema).min(1)).min(1) }),
    z.strictObject({ ...common, kind: z.literal("branch"), condition: ConditionSchema, then: z.array(NodeSchema), else: z.array(NodeSchema).optional() }),
    z.strictObject({
      ...common,
      kind: z.literal("map"),
      items: ExactRef,
      handler: z.string().min(1).max(200),
      input: JsonSchema.optional(),
      max_fanout: z.number().int().min(1),
      concurrency: z.number().int().min(1).max(10_000).optional(),
      retry: RetrySchema.optional(),
      timeout_ms: Timeout.optional(),
      provider: Provider.optional(),
      cost: Cost.optional(),
    }),
    z.strictObject({ ...common, kind: z.literal("subworkflow"), workflow: WorkflowNameSchema, input: JsonSchema.optional() }),
    z.strictObject({ ...common, kind: z.literal("sleep"), duration_ms: Ms.max(MAX_SLEEP_MS) }),
    z.strictObject({
      ...common,
      kind: z.literal("approval"),
      prompt: z.string().min(1).max(4_096),
      payload: JsonSchema.optional(),
      group: ReviewerGroupSchema.optional(),
      escalation_group: ReviewerGroupSchema.optional(),
      timeout_ms: Ms.min(1).max(MAX_SLEEP_MS).optional(),
    }),
    z.strictObject({
      ...common,
      kind: z.literal("wait"),
      signal: SignalNameSchema,
      schema: z.record(z.string(), JsonSchema).optional(),
      timeout_ms: Ms.min(1).max(MAX_SLEEP_MS).optional(),
    }),
    z.strictObject({
      ...common,
      kind: z.literal("tool"),
      server: ToolServerNameSchema,
      tool: z.string().min(1).max(128),
      arguments: JsonSchema.optional(),
      retry: RetrySchema.optional(),
      timeout_ms: Timeout.optional(),
      cost: Cost.optional(),
      approval: z.strictObject(ToolGateShape).optional(),
      item_kind: z
        .string()
        .regex(/^[a-z][a-z0-9_]{0,63}$/, "an item_kind is lower case: a letter, then letters, digits or _ (at most 64)")
        .optional(),
    }),
    agentNodeObject(common, RetrySchema, JsonSchema, Timeout),
    z.strictObject({ ...common, ...a2aNodeShape, retry: RetrySchema.optional(), timeout_ms: Timeout.optional() }),
  ]),
);

/** The whole definition; `input_schema` is checked against the supported subset by the compiler. */
export const DefinitionSchema: z.ZodType<Definition> = z.strictObject({
  name: WorkflowNameSchema,
  description: z.string().max(4_000).optional(),
  input_schema: z.record(z.string(), JsonSchema).optional(),
  nodes: z.array(NodeSchema).min(1),
  result: JsonSchema.optional(),
  limits: z
    .strictObject({
      max_steps: z.number().int().min(1).max(1_000_000).optional(),
      max_tool_calls: z.number().int().min(1).max(1_000_000).optional(),
      max_wall_ms: Ms.min(1).max(MAX_SLEEP_MS).optional(),
      max_cost_cents: z.number().int().min(0).max(1e12).optional(),
    })
    .optional(),
  admission: z
    .strictObject({
      approval: z.strictObject({
        prompt: z.string().min(1).max(4_096),
        group: ReviewerGroupSchema.optional(),
        escalation_group: ReviewerGroupSchema.optional(),
        timeout_ms: Ms.min(1).max(MAX_SLEEP_MS).optional(),
      }),
    })
    .optional(),
  approvals: z
    .strictObject({
      ...ToolGateShape,
      tools: z.array(GatedToolSchema).min(1).max(200).optional(),
      classes: z
        .array(z.enum(["read_only", "idempotent", "non_idempotent"]))
        .min(1)
        .max(3)
        .optional(),
    })
    .refine((a) => a.tools !== undefined || a.classes !== undefined, { message: "approvals names the gated tools, their classes, or both" })
    .optional(),
});
