import {
  canonicalJson,
  gatedBy,
  ModelResponseSchema,
  validateAgainstSchema,
  type ExecuteRequest,
  type ModelMessage,
  type ModelResponse,
  type ModelTool,
  type PlanAgent,
  type Receipt,
  type ToolClass,
} from "../../machines/index.js";
import { z } from "zod";
import { sha256Hex } from "../records/index.js";
import type { ToolAnswer, ToolCall, ToolPort } from "../run/index.js";
import type { ModelPort, TurnPrice } from "./port.js";
import { inputTokenBound, subagentCeiling, turnCents } from "./money.js";

/** Output tokens one turn asks for when the node's token ceiling leaves more (or sets none). */
export const TURN_MAX_TOKENS = 4_096;
/** A turn's response larger than this (JSON) fails `model_output_too_large`: its receipt lives in the run's journal. */
export const MAX_TURN_BYTES = 256 * 1024;

type StepError = { code: string; message: string; retryable: boolean };
/** How an agent attempt ended: its output (the final text, or the parsed JSON under `output_schema`), a failure, or `stopped` (the run refused the attempt). */
export type AgentResult = { outcome: "succeeded"; output: unknown } | { outcome: "failed"; error: StepError } | { outcome: "stopped"; reason: string };

/** The run's answer to an intent (`EffectAnswer`), as far as the loop reads it. */
type IntentAnswer = { outcome: string; value?: unknown } | undefined;
/** The run's answer to a gated proposal (`EffectAnswer`), as far as the loop reads it. */
type GateAnswer = { outcome: string; arguments?: unknown; by?: string | null; reason?: string } | undefined;

/** The tool result a turn's second (and later) gated proposal gets: one person's decision is asked per turn. */
export const SUPERSEDED = "superseded: ask again after the pending decision";

export interface AgentStepDeps {
  models: ModelPort;
  tools: ToolPort;
  /** Records a model turn's intent in the run (fenced by the attempt): `observed` with the stored response, `recorded`/`reconcile` to ask the model. */
  intent(event: Record<string, unknown> & { type: "effect.intent" }, id: string): Promise<IntentAnswer>;
  /**
   * Asks the run about a gated proposal (`effect.gate` naming its turn): `approved` with the
   * decision's arguments, `rejected` with who and why, or `awaiting_approval` (the run filed the
   * request, or it is pending, and parked the step: this attempt ends).
   */
  gate(call: { server: string; tool: string; class: ToolClass; arguments: unknown; turn: number }): Promise<GateAnswer>;
  /** One tool call through the journal (intent, call, receipt): the tool step's own path. */
  callTool(call: ToolCall): Promise<{ answer: ToolAnswer; receipt?: Receipt }>;
  /**
   * Stores a receipt in the run under the attempt's fence: false when the run refused it (the
   * attempt is no longer current). `cost_cents`: a priced turn's charge, added to the run's
   * `usage.cost_cents` when the receipt is recorded (once: a receipt is recorded once).
   */
  receipt(receipt: Receipt, cost_cents?: number): Promise<boolean>;
  /**
   * Money for priced turns, on the run tree's ceiling, keyed by the turn's effect key (absent: a
   * priced model's turn fails `metering_unavailable`). `reserve` holds a turn's most before it is
   * asked (or refuses, `budget_exhausted`); `settle` brings it to the turn's cost after.
   */
  meter?: TurnMeter;
  /**
   * Delegates to a subagent (`effect.child`, keyed like a tool call): `observed` with how its child
   * run ended (the call's receipt), `awaiting_subagent` (the child runs and the run parked the
   * step: this attempt ends), or `refused` with a code.
   */
  child?(call: { key: string; workflow: string; input: unknown; turn: number; cost_ceiling_cents?: number }): Promise<ChildAnswer>;
  /** Whether a proposal of turn `turn` asks a person first (absent: as the definition's `approvals` say; a replay: as its original's journal does). */
  gated?(turn: number, server: string, tool: string, cls: ToolClass): Promise<boolean>;
  /** Keeps the attempt's lease alive between turns. */
  beat(): void;
  /** Each piece of text the model streams while turn `turn` is asked (live only, never journaled; absent: not sent). */
  delta?(turn: number, text: string): void;
  /** The model answered turn `turn` (or failed): what it streamed is all sent before its response is stored. */
  streamed?(turn: number): void;
  now(): number;
}

/** What the agent loop needs of the usage meter (the executor binds the tenant, the tree and its ceiling). */
export interface TurnMeter {
  /** The tree's ceiling and what it spent (undefined: the tree has no ceiling). */
  spent(): Promise<{ ceiling_cents: number; spent_cents: number } | undefined>;
  reserve(
    key: string,
    cents: number,
  ): Promise<{ outcome: "charged" } | { outcome: "budget_exhausted"; spent_cents: number; ceiling_cents: number } | { outcome: "unavailable"; detail: string }>;
  settle(key: string, reserved_cents: number, cents: number): Promise<{ outcome: "settled" } | { outcome: "unavailable"; detail: string }>;
}

/** The run's answer to a subagent call (`EffectAnswer`), as far as the loop reads it. */
type ChildAnswer = { outcome: string; value?: unknown; code?: string; message?: string } | undefined;

/** A subagent's exposed tool name prefix: `agent__<definition>`. */
export const SUBAGENT_PREFIX = "agent__";

const fail = (code: string, message: string, retryable = false): AgentResult => ({ outcome: "failed", error: { code, message, retryable } });

/**
 * One attempt of an agent node: the model loop, on this node's event loop (no worker thread).
 *
 * Every model turn is an effect of its own, keyed `<run>:<node>:turn<i>`: its intent is recorded
 * before the model is asked and its response is stored as the receipt before the loop reads it.
 * Every tool call the model proposes goes through the tool gateway's journal path, keyed
 * `<run>:<node>:turn<i>:<sha256 of server, tool and arguments>` (never the model's call id). So an
 * attempt after a crash walks the same turns again and the run answers each recorded turn and each
 * settled call from its journal: no recorded turn is asked of the model again, no call happens
 * twice; the one turn in flight at the crash is asked again (its intent has no receipt).
 *
 * A proposal of a gated tool asks the run first (`gate`, naming the turn): the first of a turn
 * parks the step on a person's decision (this attempt ends; the next one walks the turns again and
 * meets the decision, journaled); approved, the call is made with the decision's arguments;
 * rejected, the model reads the refusal as the call's result. The turn's later gated proposals are
 * superseded (the model is told to ask again).
 */
export async function runAgent(deps: AgentStepDeps, request: ExecuteRequest, signal: AbortSignal): Promise<AgentResult> {
  const spec = request.agent!;
  const fence = {
    node: request.node,
    attempt: request.attempt,
    lease_epoch: request.lease_epoch,
    cancellation_epoch: request.cancellation_epoch,
  };
  const listed = await toolsOf(deps.tools, request.tenant, spec.tools);
  if ("error" in listed) return { outcome: "failed", error: listed.error };
  const subagents = new Map<string, string>();
  for (const name of spec.agents ?? []) {
    const exposed = `${SUBAGENT_PREFIX}${name}`.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 64);
    subagents.set(exposed, name);
    listed.tools.push({
      name: exposed,
      description: `Delegate a task to the agent '${name}': its arguments are its input; its final answer is the result.`,
      input_schema: { type: "object" },
    });
  }
  const manifest = manifestOf(spec, listed);
  const messages: ModelMessage[] = [
    { role: "system", content: spec.instructions },
    { role: "user", content: taskText(request.input) },
  ];
  let tokens = 0;
  let calls = 0;
  let repaired = false;
  for (let turn = 0; ; turn++) {
    if (turn >= spec.max_turns) return fail("limit_reached", `max_turns (${spec.max_turns}) reached before a final answer`);
    const left = spec.max_tokens !== undefined ? spec.max_tokens - tokens : undefined;
    if (left !== undefined && left <= 0) return fail("limit_reached", `max_tokens (${spec.max_tokens}) spent before a final answer`);
    const got = await takeTurn(deps, request, spec, fence, { turn, manifest }, messages, listed.tools, left, signal);
    if ("outcome" in got) return got;
    const response = got.response;
    deps.beat();
    tokens += response.usage.input_tokens + response.usage.output_tokens;
    messages.push({ role: "assistant", content: response.text, ...(response.tool_calls.length ? { tool_calls: response.tool_calls } : {}) });
    if (response.tool_calls.length === 0) {
      const final = finalOutput(spec, response.text);
      if (final.ok) return { outcome: "succeeded", output: final.value };
      if (repaired) return fail("invalid_output", `the final answer does not match output_schema: ${final.reason}`);
      // One bounded repair turn: the model is told what was wrong.
      repaired = true;
      messages.push({
        role: "user",
        content: `Your answer does not match the required output schema (${final.reason}). Answer again with only the JSON value.`,
      });
      continue;
    }
    // The first gated proposal of the turn asks a person; the turn's later ones are superseded.
    let asked = false;
    for (const proposed of response.tool_calls) {
      const delegate = subagents.get(proposed.name);
      if (delegate !== undefined && proposed.invalid_arguments === undefined) {
        if (calls >= spec.max_tool_calls) return fail("limit_reached", `max_tool_calls (${spec.max_tool_calls}) reached`);
        calls++;
        const got = await delegateTo(deps, request, turn, delegate, proposed.arguments);
        if ("outcome" in got) return got;
        messages.push({ role: "tool", tool_call_id: proposed.id, content: got.content, ...(got.is_error ? { is_error: true } : {}) });
        continue;
      }
      const target = listed.byName.get(proposed.name);
      if (!target || proposed.invalid_arguments !== undefined) {
        const why = !target && delegate === undefined ? `no tool named '${proposed.name}' is offered` : "the arguments are not a JSON object";
        messages.push({ role: "tool", tool_call_id: proposed.id, content: why, is_error: true });
        continue;
      }
      const { server, tool } = target;
      const gated = deps.gated ? await deps.gated(turn, server, tool, target.class) : gatedBy(request.gate, server, tool, target.class);
      if (gated && asked) {
        messages.push({ role: "tool", tool_call_id: proposed.id, content: SUPERSEDED, is_error: true });
        continue;
      }
      if (calls >= spec.max_tool_calls) return fail("limit_reached", `max_tool_calls (${spec.max_tool_calls}) reached`);
      let args: unknown = proposed.arguments;
      if (gated) {
        asked = true;
        const decided = await deps.gate({ server, tool, class: target.class, arguments: proposed.arguments, turn });
        if (decided?.outcome === "rejected") {
          const why = `rejected by ${decided.by ?? "a reviewer"}${decided.reason ? `: ${decided.reason}` : ""}`;
          messages.push({ role: "tool", tool_call_id: proposed.id, content: `approval_rejected: ${why}`, is_error: true });
          continue;
        }
        if (decided?.outcome === "needs_approval") return fail("tool_needs_approval", `${server}/${tool} is gated and its run cannot ask a person for it`);
        // Parked on the person (the run ended this attempt), or the run refused the attempt.
        if (decided?.outcome !== "approved") return { outcome: "stopped", reason: decided?.outcome ?? "not_decided_here" };
        args = decided.arguments ?? null;
      }
      calls++;
      const key = `${request.run}:${request.node}:turn${turn}:${sha256Hex(canonicalJson({ server, tool, arguments: args }))}`;
      const { answer, receipt } = await deps.callTool({ server, tool, arguments: args, key, ...(gated ? { approved_turn: turn } : {}) });
      if (receipt && !(await deps.receipt(receipt))) return { outcome: "stopped", reason: "receipt_refused" };
      deps.beat();
      if (answer.outcome === "stopped") return answer;
      if (answer.outcome === "failed") {
        // The tool's own refusal is the model's to read; anything the platform could not do fails the attempt.
        if (answer.error.retryable || answer.error.code === "tool_needs_approval" || answer.error.code === "tool_server_not_found")
          return { outcome: "failed", error: answer.error };
        messages.push({ role: "tool", tool_call_id: proposed.id, content: `${answer.error.code}: ${answer.error.message}`, is_error: true });
      } else messages.push({ role: "tool", tool_call_id: proposed.id, content: JSON.stringify(answer.output ?? null) });
    }
  }
}

/** Turn `turn`: the stored response when the run has it, else the model's (stored before it is returned). */
async function takeTurn(
  deps: AgentStepDeps,
  request: ExecuteRequest,
  spec: PlanAgent,
  fence: Record<string, unknown>,
  { turn, manifest }: { turn: number; manifest: string },
  messages: ModelMessage[],
  tools: ModelTool[],
  left: number | undefined,
  signal: AbortSignal,
): Promise<{ response: ModelResponse } | AgentResult> {
  const key = `${request.run}:${request.node}:turn${turn}`;
  const asked = await deps.intent(
    { type: "effect.intent", ...fence, key, server: "model", tool: spec.model, class: "idempotent", arguments: { turn }, turn: true },
    `intent/${key}/${request.attempt}/${request.lease_epoch}`,
  );
  if (asked?.outcome === "observed") {
    const stored = ModelResponseSchema.safeParse(asked.value);
    if (!stored.success) return fail("corrupt_record", `turn ${turn}'s stored response is not a model response`);
    // A turn answered with other tools or another model is no checkpoint to go on from (G4). A turn stored before manifests were kept names none.
    const made = StoredManifest.safeParse(asked.value);
    if (made.success && made.data.manifest !== undefined && made.data.manifest !== manifest)
      return fail(
        "checkpoint_mismatch",
        `turn ${turn} was answered with other tools or another model (manifest ${made.data.manifest.slice(0, 12)}, now ${manifest.slice(0, 12)}): the agent does not go on from it`,
      );
    return { response: stored.data };
  }
  if (asked?.outcome !== "recorded" && asked?.outcome !== "reconcile") return { outcome: "stopped", reason: asked?.outcome ?? "not_decided_here" };
  const maxTokens = Math.min(TURN_MAX_TOKENS, left ?? TURN_MAX_TOKENS);
  const ask = { model: spec.model, messages, ...(tools.length ? { tools } : {}), max_tokens: maxTokens };
  // Money: a priced turn holds its most (every input byte a token, max_tokens out) before it is asked.
  const priced = await priceOf(deps, request.tenant, spec.model);
  if ("outcome" in priced) return priced;
  const price = priced.price;
  const reserved = price ? turnCents(price, { input_tokens: inputTokenBound(ask), output_tokens: maxTokens }) : 0;
  if (price) {
    const held = deps.meter
      ? await deps.meter.reserve(key, reserved).catch(unavailable)
      : { outcome: "unavailable" as const, detail: "this node has no usage meter" };
    if (held.outcome === "unavailable") return fail("metering_unavailable", `turn ${turn} of a priced model: ${held.detail}`, true);
    if (held.outcome === "budget_exhausted") {
      // The run is told as a priced tool call's refusal is (an intent carrying the meter's verdict):
      // the step stops, the run drains and ends under the one status rule. The model is not asked.
      const why = `${held.spent_cents} of ${held.ceiling_cents} cents spent; turn ${turn} may cost up to ${reserved}`;
      // The turn's intent is closed (a failed receipt: it was never asked), so its trajectory line says why.
      if (!(await deps.receipt({ key, state: "failed", error: { code: "budget_exhausted", message: why }, at: deps.now() })))
        return { outcome: "stopped", reason: "receipt_refused" };
      const told = await deps.intent(
        {
          type: "effect.intent",
          ...fence,
          key: `${key}:budget`,
          server: "model",
          tool: spec.model,
          class: "idempotent",
          arguments: { turn },
          turn: true,
          budget_exhausted: why,
        },
        `intent/${key}:budget/${request.attempt}/${request.lease_epoch}`,
      );
      return { outcome: "stopped", reason: told?.outcome ?? "not_decided_here" };
    }
  }
  const answered = await deps.models.complete(request.tenant, spec.model, ask, {
    signal,
    ...(deps.delta ? { onDelta: (text: string) => deps.delta!(turn, text) } : {}),
  });
  deps.streamed?.(turn);
  if (answered.outcome === "failed") {
    const f = answered.failure;
    if (f.code === "cancelled") return { outcome: "stopped", reason: "cancelled" };
    const retryable = f.code === "rate_limited" || f.code === "transient";
    // A request the provider refused cost nothing and will not be asked again: its reservation is let go.
    // A retryable one keeps it for the next attempt of the same turn (the same key holds it once).
    if (price && !retryable) await deps.meter!.settle(key, reserved, 0).catch(unavailable);
    return fail(f.code === "transient" ? "model_unavailable" : f.code, f.message, retryable);
  }
  const response = answered.response;
  if (JSON.stringify(response).length > MAX_TURN_BYTES) return fail("model_output_too_large", `turn ${turn}'s response is above ${MAX_TURN_BYTES} bytes`);
  let cost: number | undefined;
  if (price) {
    cost = turnCents(price, response.usage);
    // Settled before the receipt: a crash between them asks the turn again, whose settlement (same key) counts once.
    // A meter that does not answer leaves the reservation as the turn's charge (more spent, never less).
    const settled = await deps.meter!.settle(key, reserved, cost).catch(unavailable);
    if (settled.outcome === "unavailable") cost = reserved;
  }
  if (!(await deps.receipt({ key, state: "observed", value: { ...response, manifest }, at: deps.now() }, cost)))
    return { outcome: "stopped", reason: "receipt_refused" };
  return { response };
}

/**
 * A subagent call: keyed like a tool call (the turn and the hash of the definition and the
 * arguments), so the child is started once; its end, stored by the run, is what the model reads.
 */
async function delegateTo(
  deps: AgentStepDeps,
  request: ExecuteRequest,
  turn: number,
  workflow: string,
  input: unknown,
): Promise<{ content: string; is_error: boolean } | AgentResult> {
  if (!deps.child) return fail("subagent_unavailable", "this node cannot start subagents");
  const key = `${request.run}:${request.node}:turn${turn}:${sha256Hex(canonicalJson({ agent: workflow, arguments: input ?? null }))}`;
  let tree: { ceiling_cents: number; spent_cents: number } | undefined;
  try {
    tree = await deps.meter?.spent();
  } catch (err) {
    return fail("metering_unavailable", `the tree's spending could not be read: ${unavailable(err).detail}`, true);
  }
  const answered = await deps.child({ key, workflow, input: input ?? null, turn, ...(tree ? { cost_ceiling_cents: subagentCeiling(tree) } : {}) });
  if (answered?.outcome === "refused") return fail(answered.code ?? "subagent_refused", answered.message ?? `${workflow} was refused`);
  if (answered?.outcome !== "observed") return { outcome: "stopped", reason: answered?.outcome ?? "not_decided_here" };
  const ended = SubagentEndSchema.safeParse(answered.value);
  if (!ended.success) return fail("corrupt_record", `the stored end of subagent ${workflow} is not one`);
  const v = ended.data;
  return v.status === "succeeded"
    ? { content: typeof v.result === "string" ? v.result : JSON.stringify(v.result ?? null), is_error: false }
    : { content: `${v.error?.code ?? `subagent_${v.status}`}: ${v.error?.message ?? ""}`, is_error: true };
}

/** A subagent call's receipt value: how its child run ended. */
const SubagentEndSchema = z.object({
  status: z.enum(["succeeded", "failed", "cancelled"]),
  result: z.unknown().optional(),
  error: z.object({ code: z.string(), message: z.string() }).optional(),
});

const unavailable = (err: unknown) => ({ outcome: "unavailable" as const, detail: err instanceof Error ? err.message : String(err) });

/** The model's price (undefined: unpriced, its turns cost nothing); a store that cannot tell fails the attempt, retryable. */
async function priceOf(deps: AgentStepDeps, tenant: string, model: string): Promise<{ price: TurnPrice | undefined } | AgentResult> {
  if (!deps.models.price) return { price: undefined };
  try {
    return { price: await deps.models.price(tenant, model) };
  } catch (err) {
    return fail("metering_unavailable", `the price of ${model} could not be read: ${unavailable(err).detail}`, true);
  }
}

/** The node's tools as the model sees them (`server__tool`), each resolved through the gateway. */
async function toolsOf(
  port: ToolPort,
  tenant: string,
  names: readonly string[],
): Promise<{ tools: ModelTool[]; byName: Map<string, { server: string; tool: string; class: ToolClass }> } | { error: StepError }> {
  const tools: ModelTool[] = [];
  const byName = new Map<string, { server: string; tool: string; class: ToolClass }>();
  for (const name of names) {
    const slash = name.indexOf("/");
    const server = name.slice(0, slash);
    const tool = name.slice(slash + 1);
    const found = await port.lookup(tenant, server, tool);
    if (found.outcome === "unavailable") return { error: { code: found.code, message: found.message, retryable: true } };
    if (found.outcome !== "found")
      return { error: { code: found.outcome === "tool_not_found" ? "tool_not_found" : "tool_server_not_found", message: found.message, retryable: false } };
    let exposed = `${server}__${tool}`.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 60);
    while (byName.has(exposed)) exposed = `${exposed.slice(0, 58)}_${byName.size}`;
    byName.set(exposed, { server, tool, class: found.class });
    const schema = found.input_schema;
    tools.push({
      name: exposed,
      ...(found.description ? { description: found.description } : {}),
      input_schema: typeof schema === "object" && schema !== null && !Array.isArray(schema) ? { ...schema } : { type: "object" },
    });
  }
  return { tools, byName };
}

/** The manifest a turn's stored response carries (absent in one stored before manifests were kept). */
const StoredManifest = z.object({ manifest: z.string().optional() });

/**
 * What the agent's turns are answered with beyond the run's pinned plan (G4): the model, and every
 * tool as the model sees it (name, description, input schema) with the class the gateway gives it.
 * A stored turn carries it; a new attempt that finds another refuses to go on from that turn.
 */
function manifestOf(spec: PlanAgent, listed: { tools: ModelTool[]; byName: Map<string, { server: string; tool: string; class: ToolClass }> }): string {
  const classes = [...listed.byName].map(([name, t]) => [name, t.class]);
  return sha256Hex(canonicalJson({ model: spec.model, tools: listed.tools, classes }));
}

/** The task the model is given: a string as is, anything else as JSON. */
function taskText(input: unknown): string {
  if (typeof input === "string") return input;
  return input === undefined || input === null ? "Begin." : JSON.stringify(input);
}

/** The final answer as the node's output: the text, or (under `output_schema`) the JSON it holds, checked. */
function finalOutput(spec: PlanAgent, text: string): { ok: true; value: unknown } | { ok: false; reason: string } {
  if (spec.output_schema === undefined) return { ok: true, value: text };
  const body = text
    .trim()
    .replace(/^```(?:json)?\s*/i, "")
    .replace(/```$/, "")
    .trim();
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return { ok: false, reason: "it is not JSON" };
  }
  const checked = validateAgainstSchema(spec.output_schema, value);
  return checked.ok ? { ok: true, value } : { ok: false, reason: checked.errors.map((e) => `${e.path || "(root)"}: ${e.message}`).join("; ") };
}
