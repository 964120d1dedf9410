import { ATTEMPT_INTERRUPTED, gatedBy, refsIn, type ExecuteRequest, type Receipt, type ResourceRef, type ToolClass } from "../../machines/index.js";
import { effectKey, type SamplingAnswer, type SamplingAsk, type ToolPort, type ToolResultOutcome } from "./tool-calls.js";
import type { Charge, ChargeRequest } from "../tenant/index.js";
import type { EffectAnswer } from "./protocol.js";

/** The run commands an attempt's tool call asks its run (see `EffectAnswer`). */
type EffectCommand = "effect.gate" | "effect.intent" | "effect.input" | "effect.task";

/** Names a stored large value: whose attempt produced it. */
export type BoundedRef = Pick<ExecuteRequest, "run" | "node" | "item" | "attempt">;

/**
 * Why a call (or a turn) stopped when its run took nothing of it: no answer to a command of its
 * journal (a store fault kept it, or the node does not serve the run), or its receipt refused.
 * The attempt reports `attempt_interrupted` then; a run that parked or moved on refuses the report.
 */
export const INTERRUPTED_BY: ReadonlySet<string> = new Set(["not_decided_here", "receipt_refused"]);

/** The failure such an attempt reports (`why`: what stopped it): a platform failure, retried at once if its run still wants it. */
export function interruptedError(why = "a write of its journal was refused"): { code: string; message: string; retryable: true } {
  return { code: ATTEMPT_INTERRUPTED, message: `the attempt ended without its run taking what it did (${why})`, retryable: true };
}

/** A tool's answer larger than this (JSON) fails `tool_output_too_large`; up to it, one over the inline bound is stored by reference. */
export const MAX_TOOL_OUTPUT = 4 * 1024 * 1024;

/** A gated call that no approval lets through (a handler's call: it cannot wait for a person mid-handler). */
const NEEDS_APPROVAL = (server: string, tool: string) => ({
  code: "tool_needs_approval",
  message: `${server}/${tool} is gated: a person approves its calls, which only a tool node can wait for`,
  retryable: false,
});

/** A gated call a person rejected, or nobody decided in time: never made (as the run that asked failed it). */
function notMade(d: Extract<JournaledDecision, { decision: "rejected" | "expired" }>) {
  return d.decision === "rejected"
    ? { code: "approval_rejected", message: `${d.by} rejected it${d.reason ? `: ${d.reason}` : ""}`, retryable: false }
    : { code: "approval_expired", message: "nobody decided in time", retryable: false };
}

/** A tool's own failure, as its receipt keeps it (so a later attempt that meets the claim fails the same way, without a call). */
const TOOL_ERROR = "$tool_error";

/** What a call through the journal gives its step: the tool's output, a failure, or `stopped` (the run refused the attempt or held the step). */
export type ToolAnswer =
  /** `refs`: a tool node's own write, what it wrote (C074). */
  | { outcome: "succeeded"; output: unknown; refs?: ResourceRef[] }
  | { outcome: "failed"; error: { code: string; message: string; retryable: boolean } }
  | { outcome: "stopped"; reason: string };

export interface ToolCall {
  server: string;
  tool: string;
  arguments: unknown;
  /** The call's effect key when its caller builds it (an agent's: its turn is part of it); else `effectKey` of the step. */
  key?: string;
  /**
   * An agent's gated call a person approved (or edited) in this turn: its arguments are the
   * decision's, so it asks no gate; its intent names the turn and the run checks the decision again.
   */
  approved_turn?: number;
}

/**
 * What a person decided on a tool node's gated call, as its run's journal keeps it: the call is
 * made with `arguments` (the request's, or an edit's), or it is not made at all.
 */
export type JournaledDecision =
  { decision: "approved" | "edited"; arguments: unknown } | { decision: "rejected"; by: string | null; reason?: string } | { decision: "expired" };

export interface ToolStepDeps {
  tools: ToolPort;
  /**
   * A replay's: the original run's decision on the step's gated call (undefined: none was asked).
   * A replay is never gated itself; it follows every decision its original journaled.
   */
  decided?(node: string, server: string, tool: string): Promise<JournaledDecision | undefined>;
  /** Sends an effect command to the run on this node: its closed answer, or undefined when this node does not decide for the run now. */
  ask(request: ExecuteRequest, event: { type: EffectCommand } & Record<string, unknown>, id: string): Promise<EffectAnswer | undefined>;
  /** Keeps a value within the inline bound (a larger one goes to the object store by reference). */
  bounded(request: BoundedRef, value: unknown): Promise<unknown>;
  /** Charges a priced call to its tree and tenant before it is made (absent: priced calls cannot be made). */
  meter?: { charge(c: ChargeRequest): Promise<Charge> };
  now(): number;
  /** Told when the call reaches the tool server (its call or its lookup): a call refused before it (a ceiling, a gate, the journal's answer) never does. */
  started?(): void;
  /**
   * Whether the attempt may still reach the tool server (its node still holds the run's partition),
   * asked right before a call or a lookup is sent; false: the call is not sent and the step stops
   * (absent: always).
   */
  held?(): boolean | Promise<boolean>;
  /** Serves a server's sampling request during the call keyed `call.key` under the run's budget (absent: sampling is refused). */
  sample?(request: ExecuteRequest, call: { server: string; tool: string; key: string }, ask: SamplingAsk, signal: AbortSignal): Promise<SamplingAnswer>;
}

/** The fence an attempt's effect commands carry. */
export function fenceOf(request: ExecuteRequest) {
  return {
    node: request.node,
    ...(request.item !== undefined ? { item: request.item } : {}),
    attempt: request.attempt,
    lease_epoch: request.lease_epoch,
    cancellation_epoch: request.cancellation_epoch,
  };
}

/**
 * The arguments a call is made with, once its gate (if any) let it through: a replay's as its
 * original's journaled decision says; a gated tool node's own call as its approval record holds
 * them (asked of the run: `stopped` while a person has not decided). Otherwise the answer the
 * step ends with, and no call.
 */
async function gateCall(
  deps: ToolStepDeps,
  request: ExecuteRequest,
  call: ToolCall,
  cls: ToolClass,
): Promise<{ arguments: unknown; gated: boolean } | { answer: ToolAnswer }> {
  const { server, tool } = call;
  let args = call.arguments ?? null;
  if (call.approved_turn !== undefined) return { arguments: args, gated: true };
  const own = request.tool?.server === server && request.tool.tool === tool;
  const decided = own ? await deps.decided?.(request.node, server, tool) : undefined;
  if (decided?.decision === "rejected" || decided?.decision === "expired") return { answer: { outcome: "failed", error: notMade(decided) } };
  if (decided) args = decided.arguments ?? null;
  if (!gatedBy(request.gate, server, tool, cls)) return { arguments: args, gated: false };
  if (!own) return { answer: { outcome: "failed", error: NEEDS_APPROVAL(server, tool) } };
  const gate = await deps.ask(
    request,
    { type: "effect.gate", ...fenceOf(request), server, tool, class: cls, arguments: args },
    `gate/${request.run}/${request.node}/${request.attempt}/${request.lease_epoch}`,
  );
  if (gate?.outcome === "needs_approval") return { answer: { outcome: "failed", error: NEEDS_APPROVAL(server, tool) } };
  if (gate?.outcome !== "approved") return { answer: { outcome: "stopped", reason: gate?.outcome ?? "not_decided_here" } };
  return { arguments: gate.arguments ?? null, gated: true };
}

/**
 * One call that may change the world: intent, call, receipt. The intent is recorded in the run
 * (fenced) before the call, and the run answers from its journal (a stored receipt means no call; a
 * lost attempt's intent is called again only if safe, else held). A gated call asks a person first;
 * a handler's call cannot wait mid-handler, so it fails `tool_needs_approval`. The receipt is
 * returned for the caller to store.
 */
export async function callThroughJournal(
  deps: ToolStepDeps,
  request: ExecuteRequest,
  call: ToolCall,
  signal: AbortSignal,
): Promise<{ answer: ToolAnswer; receipt?: Receipt }> {
  const { server, tool } = call;
  // A run below a subagent holds no more tools than its delegator (G7).
  if (request.tool_scope && !request.tool_scope.includes(`${server}/${tool}`))
    return {
      answer: {
        outcome: "failed",
        error: {
          code: "tool_not_allowed",
          message: `${server}/${tool} is outside this run's tool scope (the tools of the agent that delegated to it)`,
          retryable: false,
        },
      },
    };
  const found = await deps.tools.lookup(request.tenant, server, tool);
  if (found.outcome === "unavailable") return { answer: { outcome: "failed", error: { code: found.code, message: found.message, retryable: true } } };
  if (found.outcome !== "found") return { answer: { outcome: "failed", error: { code: `tool_${found.outcome}`, message: found.message, retryable: false } } };
  // A tool node's own call that writes: the resources its output names (C074), read from the
  // output as the tool returned it (before it is bounded), reported with the step's result.
  const kind = request.tool?.server === server && request.tool.tool === tool ? request.tool.item_kind : undefined;
  return callFound(deps, request, call, found, signal, kind !== undefined && found.class !== "read_only" ? kind : undefined);
}

/** What a successful call wrote, beside its answer (`refsOf` absent: a read, or a node that declares no `item_kind`). */
type RefsOf = (output: unknown) => ResourceRef[];

/** The refs of a write of `writes` (its node's `item_kind`; undefined: the call adds none). */
export function refsWritten(writes: string | undefined): RefsOf | undefined {
  return writes === undefined ? undefined : (output) => refsIn(writes, output);
}

/** The answer with the refs `output` names, when it succeeded and names any. */
function withRefs(answer: ToolAnswer, refsOf: RefsOf | undefined, output: unknown): ToolAnswer {
  if (!refsOf || answer.outcome !== "succeeded") return answer;
  const refs = refsOf(output);
  return refs.length > 0 ? { ...answer, refs } : answer;
}

/** The call once its tool was found: its gate, its price, its intent, the call and its receipt. */
async function callFound(
  deps: ToolStepDeps,
  request: ExecuteRequest,
  call: ToolCall,
  found: Found,
  signal: AbortSignal,
  writes: string | undefined,
): Promise<{ answer: ToolAnswer; receipt?: Receipt }> {
  const { server, tool } = call;
  const refsOf = refsWritten(writes);
  const admitted = await gateCall(deps, request, call, found.class);
  if ("answer" in admitted) return admitted;
  const { arguments: args, gated } = admitted;
  const key = call.key ?? effectKey(request.run, request.node, request.item, { server, tool, arguments: args });
  const charged = await chargeFor(deps, request, found.cost_cents ?? 0);
  if (charged.outcome === "unavailable")
    return { answer: { outcome: "failed", error: { code: "metering_unavailable", message: charged.detail, retryable: true } } };
  const asked = await recordIntent(deps, request, { server, tool, key }, found, args, charged, call.approved_turn);
  // A claim an earlier attempt completed: its stored response (bounded as it was stored) names the refs.
  if (asked?.outcome === "observed") return { answer: withRefs(fromClaim(asked.value), refsOf, asked.value) };
  if (asked?.outcome === "needs_approval") return { answer: { outcome: "failed", error: NEEDS_APPROVAL(server, tool) } };
  if (asked?.outcome === "lookup") {
    // An earlier attempt's call of a non-idempotent tool, outcome unknown: the server's lookup says whether it happened.
    if (!(await stillHeld(deps))) return { answer: { outcome: "stopped", reason: "lease_lapsed" } };
    deps.started?.();
    const looked = await lookUp(deps, request, { server, tool, key, lookup: asked.tool }, args, signal);
    if (looked.outcome === "found")
      return settleCall(deps, request, { server, tool, key }, { outcome: "ok", result: { structuredContent: looked.result }, bytes: 0 }, refsOf);
    if (looked.outcome === "failed") return { answer: { outcome: "failed", error: looked.error } };
  } else if (asked?.outcome !== "recorded" && asked?.outcome !== "reconcile")
    return { answer: { outcome: "stopped", reason: asked?.outcome ?? "not_decided_here" } };
  // A person's answers to the tool's request for input (a lost attempt's call is made again with them too).
  const answers = asked?.outcome === "recorded" || asked?.outcome === "reconcile" || asked?.outcome === "lookup" ? asked.input : undefined;
  // The intent is fenced, the call after it is not: a node paused since (or cut off) must not send
  // what its run, taken over elsewhere, may have sent again.
  if (!(await stillHeld(deps))) return { answer: { outcome: "stopped", reason: "lease_lapsed" } };
  deps.started?.();
  const called = await deps.tools.call({
    tenant: request.tenant,
    server,
    tool,
    arguments: args,
    key,
    timeoutMs: request.timeout_ms,
    signal,
    allowTask: request.tool !== undefined,
    // A person can answer a tool node's own call (not a gated one: its record is the gate's).
    allowInput: request.tool !== undefined && !gated,
    ...(answers ? { input: { responses: answers.responses, ...(answers.state !== undefined ? { state: answers.state } : {}) } } : {}),
    ...(deps.sample ? { sample: (ask: SamplingAsk) => deps.sample!(request, { server, tool, key }, ask, signal) } : {}),
  });
  if (called.outcome === "input_required") return parkForInput(deps, request, { server, tool, key }, called);
  if (called.outcome === "task") return waitOnTask(deps, request, { server, tool, key }, called, writes);
  return settleCall(deps, request, { server, tool, key }, called, refsOf);
}

/** Whether the attempt may still send (see `ToolStepDeps.held`). */
function stillHeld(deps: ToolStepDeps): boolean | Promise<boolean> {
  return deps.held?.() ?? true;
}

type Found = Extract<Awaited<ReturnType<ToolStepDeps["tools"]["lookup"]>>, { outcome: "found" }>;
type Called = Awaited<ReturnType<ToolStepDeps["tools"]["call"]>>;
type Target = { server: string; tool: string; key: string };

/** The call's intent, recorded in the run under the attempt's fence, with its price and the meter's verdict. */
function recordIntent(
  deps: ToolStepDeps,
  request: ExecuteRequest,
  { server, tool, key }: Target,
  found: Found,
  args: unknown,
  charged: Charge,
  approvedTurn: number | undefined,
) {
  return deps.ask(
    request,
    {
      type: "effect.intent",
      ...fenceOf(request),
      key,
      server,
      tool,
      class: found.class,
      ...(found.lookup ? { lookup: found.lookup } : {}),
      arguments: args,
      ...(charged.outcome === "charged" && found.cost_cents ? { cost_cents: found.cost_cents } : {}),
      ...(charged.outcome === "budget_exhausted" ? { budget_exhausted: `${charged.spent_cents} of ${charged.ceiling_cents} cents spent` } : {}),
      ...(approvedTurn !== undefined ? { gate_turn: approvedTurn } : {}),
    },
    `intent/${key}/${request.attempt}/${request.lease_epoch}`,
  );
}

/** The server asks a person for input: the run parks the step on it (the call is made again with the answers). */
async function parkForInput(
  deps: ToolStepDeps,
  request: ExecuteRequest,
  { server, tool, key }: Target,
  called: Extract<Called, { outcome: "input_required" }>,
): Promise<{ answer: ToolAnswer }> {
  const parked = await deps.ask(
    request,
    {
      type: "effect.input",
      ...fenceOf(request),
      key,
      server,
      tool,
      requests: called.requests,
      ...(called.state !== undefined ? { state: called.state } : {}),
      ...(called.task ? { task: called.task } : {}),
    },
    `input/${key}/${request.attempt}/${request.lease_epoch}`,
  );
  return { answer: { outcome: "stopped", reason: parked?.outcome ?? "not_decided_here" } };
}

/** The server answered with a task: the run waits on it, holding no worker. */
async function waitOnTask(
  deps: ToolStepDeps,
  request: ExecuteRequest,
  { server, tool, key }: Target,
  called: Extract<Called, { outcome: "task" }>,
  writes: string | undefined,
): Promise<{ answer: ToolAnswer }> {
  const waiting = await deps.ask(
    request,
    {
      type: "effect.task",
      ...fenceOf(request),
      key,
      task_id: called.taskId,
      server,
      tool,
      wire: called.wire,
      poll_ms: called.pollMs,
      // Its result is polled later, by whoever holds the run then: what it writes goes with it.
      ...(writes !== undefined ? { writes } : {}),
    },
    `task/${key}/${request.attempt}/${request.lease_epoch}`,
  );
  // Refused (the attempt became a zombie meanwhile): nobody will wait on this task.
  if (waiting?.outcome !== "waiting") await deps.tools.cancelTask(request.tenant, server, called.taskId, called.wire, tool);
  return { answer: { outcome: "stopped", reason: waiting?.outcome === "waiting" ? "task" : (waiting?.outcome ?? "not_decided_here") } };
}

/**
 * A priced call is charged to its run tree (against the root's money ceiling) and its tenant's
 * day before its intent: a refusal goes to the run with the intent, which stops the run
 * `budget_exhausted` and records no call. The meter not answering is a fault, never a spent budget.
 */
async function chargeFor(deps: ToolStepDeps, request: ExecuteRequest, cents: number): Promise<Charge> {
  if (cents <= 0) return { outcome: "charged" };
  if (!deps.meter) return { outcome: "unavailable", detail: "this node has no usage meter for a priced call" };
  return deps.meter
    .charge({
      tenant: request.tenant,
      root: request.root,
      ...(request.cost_ceiling_cents !== undefined ? { ceiling_cents: request.cost_ceiling_cents } : {}),
      cents,
      now: deps.now(),
    })
    .catch((err: unknown) => ({ outcome: "unavailable" as const, detail: String((err as Error).message ?? err) }));
}

/**
 * Asks a server's lookup tool whether the call keyed `key` happened. Its contract: arguments
 * `{effect_key, tool, arguments}`, structured answer `{found: boolean, result?}`. Anything else
 * (it failed, it answered something else) leaves the outcome unknown: the attempt fails
 * retryable and the next one asks again.
 */
async function lookUp(
  deps: ToolStepDeps,
  request: ExecuteRequest,
  c: { server: string; tool: string; key: string; lookup: string },
  args: unknown,
  signal: AbortSignal,
): Promise<
  { outcome: "found"; result: unknown } | { outcome: "not_found" } | { outcome: "failed"; error: { code: string; message: string; retryable: boolean } }
> {
  const asked = await deps.tools.call({
    tenant: request.tenant,
    server: c.server,
    tool: c.lookup,
    arguments: { effect_key: c.key, tool: c.tool, arguments: args ?? null },
    key: `${c.key}:lookup`,
    timeoutMs: request.timeout_ms,
    signal,
    allowTask: false,
  });
  const answer =
    asked.outcome === "ok" && !asked.result.isError ? (asked.result.structuredContent as { found?: unknown; result?: unknown } | undefined) : undefined;
  if (answer?.found === true) return { outcome: "found", result: answer.result ?? null };
  if (answer?.found === false) return { outcome: "not_found" };
  const why =
    asked.outcome === "ok"
      ? "it answered no {found}"
      : asked.outcome === "task" || asked.outcome === "input_required"
        ? `it answered ${asked.outcome}`
        : `${asked.code}: ${asked.message}`;
  return {
    outcome: "failed",
    error: { code: "tool_lookup_failed", message: `${c.server}/${c.lookup} could not tell whether ${c.tool} happened (${why})`, retryable: true },
  };
}

/**
 * The answer and receipt of a call (or a task) that ended: what the world saw, bounded. `refsOf`:
 * a write's refs, read from the output as returned (a large one is stored by reference after).
 */
export async function settleCall(
  deps: Pick<ToolStepDeps, "bounded" | "now">,
  request: BoundedRef,
  { server, tool, key }: { server: string; tool: string; key: string },
  called: ToolResultOutcome,
  refsOf?: RefsOf,
): Promise<{ answer: ToolAnswer; receipt?: Receipt }> {
  const at = deps.now();
  if (called.outcome === "unknown") return { answer: { outcome: "failed", error: { code: called.code, message: called.message, retryable: true } } };
  if (called.outcome === "refused") {
    const error = { code: called.code, message: called.message };
    return { answer: { outcome: "failed", error: { ...error, retryable: called.retryable } }, receipt: { key, state: "failed", error, at } };
  }
  const returned = called.result.structuredContent ?? { content: called.result.content ?? [] };
  const value =
    called.bytes > MAX_TOOL_OUTPUT
      ? { [TOOL_ERROR]: { code: "tool_output_too_large", message: `${server}/${tool} answered ${called.bytes} bytes (at most ${MAX_TOOL_OUTPUT})` } }
      : called.result.isError
        ? { [TOOL_ERROR]: { code: "tool_error", message: textOf(called.result.content).slice(0, 4_096) || `${server}/${tool} reported an error` } }
        : await deps.bounded(request, returned);
  return { answer: withRefs(fromClaim(value), refsOf, returned), receipt: { key, state: "observed", value, at } };
}

/**
 * A tool step's `step.result` fields: its answer and the call's receipt. A success whose output is
 * the receipt's value names the receipt (`output_receipt`): the run journals the output as a
 * reference to it, so the answer is stored once. The output still travels with the result, so a
 * run that a node of an older version decides (a rolling upgrade) reads it as before.
 */
export function toolResult(answer: Exclude<ToolAnswer, { outcome: "stopped" }>, receipt: Receipt | undefined): Record<string, unknown> {
  const once = answer.outcome === "succeeded" && receipt?.state === "observed" && receipt.value === answer.output;
  return { ...answer, ...(receipt ? { receipts: [receipt] } : {}), ...(once ? { output_receipt: receipt.key } : {}) };
}

/** The step's outcome from a stored response: the tool's own failure fails the step (calling again would meet the same claim). */
function fromClaim(value: unknown): ToolAnswer {
  const failure = typeof value === "object" && value !== null ? (value as Record<string, unknown>)[TOOL_ERROR] : undefined;
  if (failure && typeof failure === "object") {
    const f = failure as { code?: unknown; message?: unknown };
    return { outcome: "failed", error: { code: String(f.code ?? "tool_error"), message: String(f.message ?? ""), retryable: false } };
  }
  return { outcome: "succeeded", output: value ?? null };
}

function textOf(content: unknown[] | undefined): string {
  return (content ?? [])
    .map((c) => (typeof c === "object" && c !== null && (c as { type?: unknown }).type === "text" ? String((c as { text?: unknown }).text ?? "") : ""))
    .join("\n");
}
