/**
 * The compiled plan: a flat list of nodes in one deterministic topological order, every dependency
 * explicit; what a run pins and every projection reads. Need conditions (`when`), judged once the
 * needed node settled: `succeeded` | `failed` (that status), `always` (any), `completed` (ran:
 * succeeded or failed, so a sequence goes on past a continue_on_error failure but not past a
 * skip), `then` | `else` (the branch took that path).
 */
import { z } from "zod";
import { isJson, type Json } from "./canonical.js";
import { ConditionSchema, type Condition } from "./definition.js";
import { PlanAgentSchema, type PlanAgent } from "./agent-node.js";

export const PLAN_VERSION = 1;

export type PlanWhen = "succeeded" | "failed" | "always" | "completed" | "then" | "else";
export type PlanNeed = { node: string; when: PlanWhen };
export type PlanRetry = { max_attempts: number; backoff_ms: number; max_backoff_ms: number; multiplier: number };

type Base = {
  id: string;
  needs: PlanNeed[];
  continue_on_error: boolean;
  /** The id of the enclosing parallel or branch node; null at top level. */
  parent: string | null;
};
/**
 * A step that runs once per attempt: a handler, or (a `tool` node) one call through the tool
 * gateway, `tool`, with `input` as its arguments (its `handler` then only names it, `tool:<server>/<tool>`).
 */
export type PlanCode = Base & {
  kind: "code";
  handler: string;
  input?: Json;
  retry: PlanRetry;
  timeout_ms: number;
  provider?: string;
  cost?: number;
  /** `item_kind`: what a successful write of the tool adds to the run's `refs` (C074). */
  tool?: { server: string; tool: string; item_kind?: string };
  /** A tool node whose call is always gated: its request (the timeout resolved). */
  approval?: PlanToolGate;
  /** An agent node: its attempt runs the model loop (see agent-node.ts), with `input` as the task. */
  agent?: PlanAgent;
};
/** A gated tool call's request as the plan keeps it (see `ToolGate`): its clock resolved. */
export type PlanToolGate = { prompt?: string; group?: string; escalation_group?: string; timeout_ms: number };
export type PlanMap = Base & {
  kind: "map";
  items: string;
  handler: string;
  input?: Json;
  max_fanout: number;
  concurrency: number;
  retry: PlanRetry;
  timeout_ms: number;
  provider?: string;
  cost?: number;
};
export type PlanSubworkflow = Base & { kind: "subworkflow"; workflow: string; input?: Json };
export type PlanSleep = Base & { kind: "sleep"; duration_ms: number };
/** A person's decision: `payload` is a template resolved when it starts. */
export type PlanApproval = Base & { kind: "approval"; prompt: string; payload?: Json; group?: string; escalation_group?: string; timeout_ms: number };
/** Waits for the signal `signal` (its data checked against `schema`), at most `timeout_ms`. */
export type PlanWait = Base & { kind: "wait"; signal: string; schema?: Json; timeout_ms: number };
/** The join of a parallel node (same id as the definition node); it executes nothing. */
export type PlanParallel = Base & { kind: "parallel"; members: string[]; branches: string[][] };
/** The decision of a branch node: evaluates `condition`, settles succeeded with `taken`, or failed. */
export type PlanBranch = Base & { kind: "branch"; condition: Condition; then_members: string[]; else_members: string[]; end: string };
/** The completion of a branch (`<branchId>:end`); downstream needs on the branch point here. */
export type PlanBranchEnd = Base & { kind: "branch_end"; branch: string; members: string[] };
export type PlanNode = PlanCode | PlanMap | PlanSubworkflow | PlanSleep | PlanWait | PlanApproval | PlanParallel | PlanBranch | PlanBranchEnd;

export type Plan = {
  plan_version: number;
  name: string;
  description?: string;
  input_schema?: { [key: string]: Json };
  result?: Json;
  /** The run's ceilings (see `RunLimits`). */
  limits?: { max_steps?: number; max_tool_calls?: number; max_wall_ms?: number; max_cost_cents?: number };
  /** A person admits each top-level run first (see `AdmissionPolicy`); its timeout resolved. */
  admission?: { approval: { prompt: string; group?: string; escalation_group?: string; timeout_ms: number } };
  /** The definition's gated tools (see `ToolApprovals`); the timeout resolved. */
  approvals?: PlanToolGate & { tools?: string[]; classes?: ("read_only" | "idempotent" | "non_idempotent")[] };
  nodes: PlanNode[];
  /** Canonical JSON of the plan without this field: hash it to get the version's digest. */
  definition_digest_input: string;
};

export type NodeStatus = "pending" | "active" | "succeeded" | "failed" | "skipped" | "cancelled";
/** What the engine knows of one plan node. `active` = executing or waiting (finer states are the engine's). */
export type NodeState = { status: NodeStatus; output?: unknown; taken?: "then" | "else" };
export type NodeStates = Readonly<Record<string, NodeState | undefined>>;

/** What templates and conditions read. `item`/`index` exist only inside a map node's per-item input. */
export type Scope = {
  input: unknown;
  steps: Readonly<Record<string, { status: NodeStatus; output?: unknown } | undefined>>;
  item?: unknown;
  index?: number;
};

export const SETTLED: ReadonlySet<NodeStatus> = new Set(["succeeded", "failed", "skipped", "cancelled"]);

const JsonValue = z.custom<Json>((v) => isJson(v), "expected a JSON value");
const Id = z.string().min(1);
const PlanNeedSchema = z.strictObject({ node: Id, when: z.enum(["succeeded", "failed", "always", "completed", "then", "else"]) });
const PlanRetrySchema = z.strictObject({
  max_attempts: z.number().int().min(1),
  backoff_ms: z.number().int().nonnegative(),
  max_backoff_ms: z.number().int().nonnegative(),
  multiplier: z.number().min(1),
});
const base = { id: Id, needs: z.array(PlanNeedSchema), continue_on_error: z.boolean(), parent: Id.nullable() };
const PlanToolGateShape = {
  prompt: z.string().optional(),
  group: z.string().optional(),
  escalation_group: z.string().optional(),
  timeout_ms: z.number().int().positive(),
};

export const PlanNodeSchema = z.discriminatedUnion("kind", [
  z.strictObject({
    ...base,
    kind: z.literal("code"),
    handler: Id,
    input: JsonValue.optional(),
    retry: PlanRetrySchema,
    timeout_ms: z.number().int().positive(),
    provider: z.string().optional(),
    cost: z.number().positive().optional(),
    tool: z.strictObject({ server: z.string(), tool: z.string(), item_kind: z.string().optional() }).optional(),
    approval: z.strictObject(PlanToolGateShape).optional(),
    agent: PlanAgentSchema.optional(),
  }),
  z.strictObject({
    ...base,
    kind: z.literal("map"),
    items: z.string(),
    handler: Id,
    input: JsonValue.optional(),
    max_fanout: z.number().int().positive(),
    concurrency: z.number().int().positive(),
    retry: PlanRetrySchema,
    timeout_ms: z.number().int().positive(),
    provider: z.string().optional(),
    cost: z.number().positive().optional(),
  }),
  z.strictObject({ ...base, kind: z.literal("subworkflow"), workflow: Id, input: JsonValue.optional() }),
  z.strictObject({ ...base, kind: z.literal("sleep"), duration_ms: z.number().int().nonnegative() }),
  z.strictObject({
    ...base,
    kind: z.literal("approval"),
    prompt: z.string(),
    payload: JsonValue.optional(),
    group: z.string().optional(),
    escalation_group: z.string().optional(),
    timeout_ms: z.number().int().positive(),
  }),
  z.strictObject({ ...base, kind: z.literal("wait"), signal: z.string(), schema: JsonValue.optional(), timeout_ms: z.number().int().positive() }),
  z.strictObject({ ...base, kind: z.literal("parallel"), members: z.array(Id), branches: z.array(z.array(Id)) }),
  z.strictObject({ ...base, kind: z.literal("branch"), condition: ConditionSchema, then_members: z.array(Id), else_members: z.array(Id), end: Id }),
  z.strictObject({ ...base, kind: z.literal("branch_end"), branch: Id, members: z.array(Id) }),
]);

export const PlanSchema = z.strictObject({
  plan_version: z.literal(PLAN_VERSION),
  name: z.string(),
  description: z.string().optional(),
  input_schema: z.record(z.string(), JsonValue).optional(),
  result: JsonValue.optional(),
  limits: z
    .strictObject({
      max_steps: z.number().optional(),
      max_tool_calls: z.number().optional(),
      max_wall_ms: z.number().optional(),
      max_cost_cents: z.number().optional(),
    })
    .optional(),
  admission: z
    .strictObject({
      approval: z.strictObject({
        prompt: z.string(),
        group: z.string().optional(),
        escalation_group: z.string().optional(),
        timeout_ms: z.number().int().positive(),
      }),
    })
    .optional(),
  approvals: z
    .strictObject({
      ...PlanToolGateShape,
      tools: z.array(z.string()).optional(),
      classes: z.array(z.enum(["read_only", "idempotent", "non_idempotent"])).optional(),
    })
    .optional(),
  nodes: z.array(PlanNodeSchema),
  definition_digest_input: z.string(),
});

const INDEX = Symbol("plan index");

/**
 * Index of plan nodes by id (plan order is the array order). A compiled plan never changes, and
 * the walk asks for its index on every step: it is built once and kept on the node list itself,
 * under a symbol key that is not enumerable (never stored, never copied). A frozen list keeps
 * nothing, and is indexed again when asked.
 */
export function planIndex(plan: Pick<Plan, "nodes">): ReadonlyMap<string, PlanNode> {
  const nodes = plan.nodes as readonly PlanNode[] & { [INDEX]?: ReadonlyMap<string, PlanNode> };
  const kept = nodes[INDEX];
  if (kept) return kept;
  const index = new Map(nodes.map((n) => [n.id, n]));
  if (Object.isExtensible(nodes)) Object.defineProperty(nodes, INDEX, { value: index, enumerable: false });
  return index;
}
