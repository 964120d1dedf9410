import { z } from "zod";
import { RunLaneSchema, TokenSchema } from "../tenant/index.js";
import { MAX_CALL_REFS } from "../tools/index.js";

/** The commands a run actor accepts (validated at its mailbox), with the schemas their parts share. */

/** What a run needs to be created; validated at the actor's mailbox. */
export const RunSeedSchema = z.object({
  id: z.string().min(1),
  tenant: z.string().min(1),
  root_run_id: z.string().min(1),
  parent_run_id: z.string().nullable(),
  parent_node: z.string().nullable(),
  depth: z.number().int().nonnegative(),
  definition: z.object({ name: z.string(), version: z.number().int().positive(), digest: z.string() }),
  source: z.string(),
  start_key: z.string(),
  /** A seed that names no lane is batch: a value nobody wrote never reads as interactive. */
  lane: RunLaneSchema.default("batch"),
  admission: z.enum(["admitted", "queued"]).optional(),
  project: TokenSchema.optional(),
  priority: z.number().int().min(0).max(9).optional(),
  deadline: z.number().int().nonnegative().nullable().optional(),
  /** A replay: the run whose journal answers every effect of this one (no call leaves the node). */
  replay_of: z.string().min(1).max(200).optional(),
  /** The tree's money ceiling: its root's `limits.max_cost_cents`, which every child carries (and ignores its own). */
  cost_ceiling_cents: z.number().int().min(0).max(1e12).optional(),
  /**
   * The tools (`server/tool`) it and every run below it may call: a subagent's is its delegating
   * agent node's tools within its parent's own scope; a subworkflow's is its parent's. Absent: no
   * limit beyond each node's own list.
   */
  tool_scope: z.array(z.string().min(1).max(200)).max(1_000).optional(),
  /** Its tenant counts it from its start: the member key its admission stored is its live-run index entry (see `RunContext.counted`). */
  counted: z.literal(true).optional(),
  /** Who started it, when the caller was authenticated (an API key's `key:<tenant>/<name>`): the one who may not approve its actions. */
  initiator: z.string().min(1).max(200).optional(),
  /**
   * The W3C trace context its start came with (a `traceparent`): its trace is that trace and its
   * root span that span's child. A child carries its root's, so a tree is one trace.
   */
  trace: z
    .object({ trace_id: z.string().regex(/^[0-9a-f]{32}$/), span_id: z.string().regex(/^[0-9a-f]{16}$/), flags: z.number().int().min(0).max(255) })
    .optional(),
  input: z.unknown(),
});
export type RunSeed = z.infer<typeof RunSeedSchema>;

const StepErrorShape = z.object({ code: z.string(), message: z.string(), retryable: z.boolean() });

/** `<run>:<step path>:<hash of the canonical arguments>` */
const EffectKey = z.string().min(1).max(600);

const ReceiptSchema = z.discriminatedUnion("state", [
  z.object({ key: EffectKey, state: z.literal("observed"), value: z.unknown(), at: z.number(), by: z.string().max(200).optional() }),
  z.object({
    key: EffectKey,
    state: z.literal("failed"),
    error: z.object({ code: z.string().max(100), message: z.string().max(4_096) }),
    at: z.number(),
    by: z.string().max(200).optional(),
  }),
]);

/** The attempt a report comes from: fenced by its lease and the run's cancellation epoch. */
const AttemptFence = {
  node: z.string(),
  item: z.number().int().nonnegative().optional(),
  attempt: z.number().int().positive(),
  lease_epoch: z.number().int().positive(),
  cancellation_epoch: z.number().int().nonnegative(),
};

/** Commands a run actor accepts (before the host adds `now` and `prepare` adds the plan). */
export const RunCommandSchema = z.discriminatedUnion("type", [
  z.object({ type: z.literal("run.create"), run: RunSeedSchema }),
  z.object({
    type: z.literal("step.result"),
    node: z.string(),
    item: z.number().int().nonnegative().optional(),
    attempt: z.number().int().positive(),
    lease_epoch: z.number().int().positive(),
    outcome: z.enum(["succeeded", "failed"]),
    output: z.unknown().optional(),
    error: StepErrorShape.optional(),
    /** The run's cancellation epoch when the attempt was dispatched. */
    cancellation_epoch: z.number().int().nonnegative().optional(),
    /** Receipts of the attempt's calls still without one (a tool node's call: its result and receipt are one write). */
    receipts: z.array(ReceiptSchema).max(64).optional(),
    /** A tool node's success: its output is the value of this observed receipt (of `receipts`): journaled once, as a reference to it. */
    output_receipt: EffectKey.optional(),
    /** A tool node's successful write: the resources it wrote (`writeRefs`, C074). */
    refs: z
      .array(z.object({ kind: z.string().min(1).max(64), id: z.string().min(1).max(256) }))
      .max(MAX_CALL_REFS)
      .optional(),
  }),
  /** Before a call that may change the world: its intent, under the attempt's lease and the run's cancellation epoch. */
  z.object({
    type: z.literal("effect.intent"),
    ...AttemptFence,
    key: EffectKey,
    server: z.string().min(1).max(200),
    tool: z.string().min(1).max(200),
    class: z.enum(["read_only", "idempotent", "non_idempotent"]),
    /** The tool the server offers to look this call up by its key (declared by the operator). */
    lookup: z.string().min(1).max(200).optional(),
    arguments: z.unknown(),
    /** A priced call: what the meter charged the tree for it. */
    cost_cents: z.number().int().min(0).max(1e12).optional(),
    /** The meter refused the call on the tree's money ceiling (what it said): the call is not made and the run stops. */
    budget_exhausted: z.string().max(500).optional(),
    /** An agent's model turn (server: `model`, tool: `<provider>/<model>`): not a tool call, so no tool-call ceiling counts it and no gate holds it. */
    turn: z.literal(true).optional(),
    /** An agent's gated call a person approved in turn `gate_turn`: the run lets it through only with exactly the decision's arguments. */
    gate_turn: z.number().int().nonnegative().max(1_000_000).optional(),
  }),
  /**
   * A tool node's call of a gated tool, before its key, charge and intent: the run answers from
   * the call's approval record (filing it, and parking the step, when there is none yet). `turn`:
   * an agent's gated proposal, made in that model turn (its record is the turn's, see `gates.ts`).
   */
  z.object({
    type: z.literal("effect.gate"),
    ...AttemptFence,
    server: z.string().min(1).max(200),
    tool: z.string().min(1).max(200),
    class: z.enum(["read_only", "idempotent", "non_idempotent"]),
    arguments: z.unknown(),
    turn: z.number().int().nonnegative().max(1_000_000).optional(),
  }),
  /**
   * An agent delegates to a subagent (its node's `agents`): the run answers the call's stored
   * result (`observed`: the child ended), or starts the child run once (keyed by the call's effect
   * key) and parks the step until it ends. `cost_ceiling_cents`: the child's slice of the tree's
   * money (a cap on what it may spend; its root's ceiling bounds it too).
   */
  z.object({
    type: z.literal("effect.child"),
    ...AttemptFence,
    key: EffectKey,
    workflow: z.string().min(1).max(200),
    input: z.unknown(),
    turn: z.number().int().nonnegative().max(1_000_000),
    cost_ceiling_cents: z.number().int().min(0).max(1e12).optional(),
  }),
  /**
   * The server answered the call `input_required` (MCP 2026-07-28 MRTR): nothing happened. The
   * run clears the intent, files the forms for a person and parks the step; the next attempt calls
   * again with the answers.
   */
  z.object({
    type: z.literal("effect.input"),
    ...AttemptFence,
    key: EffectKey,
    server: z.string().min(1).max(200),
    tool: z.string().min(1).max(200),
    requests: z
      .array(z.object({ key: z.string().min(1).max(200), message: z.string().max(4_096), schema: z.record(z.string(), z.unknown()) }))
      .min(1)
      .max(16),
    state: z.string().max(65_536).optional(),
    /** A remote task asks (an `a2a` node's): kept with the request, cancelled if nobody answers. */
    task: z.object({ id: z.string().min(1).max(500), wire: z.string().min(1).max(40) }).optional(),
  }),
  /** The call became an MCP task: its id is journaled before the step waits on it (no worker held). */
  z.object({
    type: z.literal("effect.task"),
    ...AttemptFence,
    key: EffectKey,
    task_id: z.string().min(1).max(500),
    server: z.string().min(1).max(200),
    tool: z.string().min(1).max(200),
    wire: z.string().min(1).max(40),
    poll_ms: z.number().int().min(10).max(3_600_000),
    /** A tool node's write: its `item_kind`, so the task's result adds its refs (C074). */
    writes: z.string().min(1).max(64).optional(),
  }),
  /** The call's outcome, from the attempt that recorded its intent. */
  z.object({
    type: z.literal("effect.receipt"),
    ...AttemptFence,
    receipt: ReceiptSchema,
    /** A priced model turn's charge (settled on the meter): added to the run's `usage.cost_cents` when the receipt is recorded. */
    cost_cents: z.number().int().min(0).max(1e12).optional(),
  }),
  /** A person settles an intent whose outcome is unknown: `done` with the call's result, `retry` (call again), `abandon` (the step fails). */
  z.object({
    type: z.literal("effect.settle"),
    key: EffectKey,
    decision: z.enum(["done", "retry", "abandon"]),
    result: z.unknown().optional(),
    by: z.string().max(200),
  }),
  z.object({
    type: z.literal("timer.fired"),
    kind: z.enum(["retry", "sleep", "lease", "wait", "task", "signal", "approval", "ceiling", "admission"]),
    node: z.string(),
    item: z.number().int().nonnegative().optional(),
    attempt: z.number().int().positive().optional(),
    lease_epoch: z.number().int().positive().optional(),
  }),
  z.object({
    type: z.literal("step.heartbeat"),
    node: z.string(),
    item: z.number().int().nonnegative().optional(),
    attempt: z.number().int().positive(),
    lease_epoch: z.number().int().positive(),
    cancellation_epoch: z.number().int().nonnegative().optional(),
  }),
  z.object({
    type: z.literal("child.settled"),
    node: z.string(),
    child: z.string(),
    status: z.enum(["succeeded", "failed", "cancelled"]),
    result: z.unknown().optional(),
    /** A child that succeeded partially: its mark, which its parent carries on. */
    partial_reason: z.string().max(64).optional(),
    error: z.object({ code: z.string(), message: z.string() }).passthrough().optional(),
  }),
  z.object({ type: z.literal("run.cancel"), reason: z.string().max(1_000), by: z.string().max(200) }),
  z.object({
    type: z.literal("run.recover"),
    reason: z.string().max(200),
    /**
     * Attempts the deciding process still holds (queued for a worker, granted or executing): not
     * lost. The run actor sets it as it decides the command (see its `prepare`), never the sender.
     */
    alive: z
      .array(
        z.object({
          node: z.string(),
          item: z.number().int().nonnegative().optional(),
          attempt: z.number().int().positive(),
          lease_epoch: z.number().int().positive(),
        }),
      )
      .max(10_000)
      .optional(),
  }),
  /**
   * A person decides an approval: approve (its payload goes on), edit (theirs does), reject.
   * `node`: the approval's id after `<run>:` (an approval node's id, `(admission)`, a gated
   * call's `<node>:approval.<server>/<tool>`, or an agent's gated proposal's `<node>:turn<i>:approval.<server>/<tool>`).
   */
  z.object({
    type: z.literal("approval.decide"),
    node: z.string().min(1).max(400),
    decision: z.enum(["approve", "reject", "edit"]),
    payload: z.unknown().optional(),
    reason: z.string().max(4_096).optional(),
    by: z.string().min(1).max(200),
  }),
  /** A named signal for the run's `wait` nodes (`runs.signal`): its data is what they output. */
  z.object({ type: z.literal("run.signal"), name: z.string().min(1).max(64), data: z.unknown().optional(), by: z.string().max(200) }),
  /** The tenant gave a queued run its slot. */
  z.object({ type: z.literal("run.admitted") }),
  /** The tenant refused a run a person admitted (it asked after its approval): it fails with the tenant's code. */
  z.object({ type: z.literal("run.admission_refused"), code: z.string().min(1).max(100), message: z.string().max(1_000) }),
  /** A recovery sweep pass at `at` (the sweeper's clock): repairs what a lost clock or hand-over left (see `sweep.ts`). */
  z.object({
    type: z.literal("run.sweep"),
    at: z.number().int().nonnegative(),
    /** Tickets of this run the node's scheduler still holds (queued or running): not lost, whatever their age. */
    held: z.array(z.string().max(300)).max(10_000).optional(),
  }),
  /** The tenant admitted a map's expansion: its items may start. */
  z.object({ type: z.literal("expansion.admitted"), node: z.string() }),
  /** The tenant refused a map's expansion: the node fails with the code, before any item started. */
  z.object({ type: z.literal("expansion.refused"), node: z.string(), code: z.string().max(100), message: z.string().max(1_000) }),
  /** The sweep found this child's parent ended (or no longer waiting on it): it ends `parent_gone`. */
  z.object({ type: z.literal("run.parent_gone"), parent_status: z.string().max(40) }),
]);
export type RunCommand = z.infer<typeof RunCommandSchema>;
