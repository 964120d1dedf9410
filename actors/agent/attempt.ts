import { ModelResponseSchema, type ExecuteRequest, type ModelRequest, type Receipt } from "../../machines/index.js";
import type { ActorHost } from "../../runtime/index.js";
import {
  INTERRUPTED_BY,
  attemptJournal,
  chatSpan,
  fenceOf,
  type ReplayPort,
  type RunTypes,
  type SpanSink,
  type ToolAnswer,
  type ToolCall,
  type ToolPort,
  interruptedError,
} from "../run/index.js";
import type { UsageMeter } from "../tenant/index.js";
import { TextDeltaCoalescer } from "./deltas.js";
import { runAgent, type AgentStepDeps, type TurnMeter } from "./loop.js";
import type { ModelPort, TurnOutcome } from "./port.js";

/** What an agent attempt needs of the node that runs it (the step executor). */
export interface AgentAttemptDeps {
  host: ActorHost;
  /** The model gateway (absent: the attempt fails `model_gateway_unavailable`). */
  models?: ModelPort;
  tools?: ToolPort;
  /** A replay's: the original run's journal, which answers its turns, calls, decisions and subagents. */
  replay?: ReplayPort;
  /** Charges priced turns (absent: a priced turn fails `metering_unavailable`). */
  meter?: UsageMeter;
  /** Tracing on: each model call is a `chat` span. */
  spans?: SpanSink;
  /** One tool call of the attempt through the journal (intent, call, receipt), as the executor makes a tool node's. */
  callTool(call: ToolCall): Promise<{ answer: ToolAnswer; receipt?: Receipt }>;
  /** Keeps a result within the inline bound (larger ones go to the object store by reference). */
  bounded(output: unknown): Promise<unknown>;
  /** Renews the attempt's lease. */
  heartbeat(): void;
  /** Stops the attempt (its signal aborts with `reason`). */
  abort(reason: string): void;
  now(): number;
}

/**
 * An agent node's attempt: its model loop runs on the node (I/O, no worker thread), each turn and
 * each tool call journaled through the run (see `runAgent`), its lease kept alive while it runs,
 * its text streamed live. Its result event, or none when the run refused or held it.
 */
export async function runAgentAttempt(deps: AgentAttemptDeps, request: ExecuteRequest, signal: AbortSignal): Promise<Record<string, unknown> | undefined> {
  const fence = { type: "step.result", node: request.node, attempt: request.attempt, lease_epoch: request.lease_epoch };
  const replay = request.replay_of ? deps.replay : undefined;
  const models = replay ? replayedModels(replay, request) : deps.models;
  const tools = replay ?? (request.replay_of ? undefined : deps.tools);
  if (!models || !tools) {
    const message = request.replay_of ? "this node cannot read the original run of a replay" : "this node has no model or tool gateway";
    return { ...fence, outcome: "failed", error: { code: "model_gateway_unavailable", message, retryable: !request.replay_of } };
  }
  const timer = setTimeout(() => deps.abort("timeout"), request.timeout_ms);
  timer.unref();
  const beats = setInterval(() => deps.heartbeat(), Math.max(250, request.lease_after_ms));
  beats.unref();
  const deltas = new TextDeltaCoalescer(textDeltas(deps, request));
  const journal = attemptJournal(deps.host, request);
  const ask = <K extends keyof RunTypes["answers"]>(event: { type: K } & Record<string, unknown>, id: string) => journal.ask(event, id);
  try {
    const result = await runAgent(
      {
        models: deps.spans ? tracedModels(models, request, deps.spans) : models,
        tools,
        intent: (event, id) => ask(event, id),
        gate: (call) =>
          ask(
            { type: "effect.gate" as const, ...fenceOf(request), ...call },
            `gate/${request.run}/${request.node}/turn${call.turn}/${request.attempt}/${request.lease_epoch}`,
          ),
        callTool: (call) => deps.callTool(call),
        child: (call) => ask({ type: "effect.child" as const, ...fenceOf(request), ...call }, `child/${call.key}/${request.attempt}/${request.lease_epoch}`),
        ...(replay ? replayedDecisions(replay, request) : {}),
        receipt: (receipt, cost_cents) => journal.receipt(receipt, cost_cents),
        beat: () => deps.heartbeat(),
        // A replay spends nothing: its turns are the original's.
        ...(deps.meter && !replay ? { meter: turnMeter(deps, request, deps.meter) } : {}),
        delta: (turn, text) => deltas.push(turn, text),
        streamed: () => deltas.flush(),
        now: () => deps.now(),
      },
      request,
      signal,
    );
    if (result.outcome === "stopped") {
      // Its run took nothing of a turn or a call (a write of its journal refused): said so, a run that still wants it runs it again.
      if (signal.reason !== "timeout" && INTERRUPTED_BY.has(result.reason)) return { ...fence, outcome: "failed", error: interruptedError(result.reason) };
      if (signal.reason !== "timeout") return undefined;
      return { ...fence, outcome: "failed", error: { code: "timeout", message: `the agent ran past timeout_ms (${request.timeout_ms})`, retryable: true } };
    }
    if (result.outcome === "failed") return { ...fence, ...result };
    return { ...fence, outcome: "succeeded", output: await deps.bounded(result.output) };
  } finally {
    deltas.flush();
    clearTimeout(timer);
    clearInterval(beats);
  }
}

/**
 * A replay's model: turn _n_ (the conversation holds _n_ answers) is the response its original
 * stored for the same node and turn; one it never stored is a divergence (`replay_diverged`).
 */
function replayedModels(replay: ReplayPort, r: ExecuteRequest): ModelPort {
  return {
    async complete(_tenant: string, _model: string, request: ModelRequest): Promise<TurnOutcome> {
      const turn = request.messages.filter((m) => m.role === "assistant").length;
      const stored = await replay.recorded(`${r.run}:${r.node}:turn${turn}`);
      const response = stored?.state === "observed" ? ModelResponseSchema.safeParse(stored.value) : undefined;
      if (response?.success) return { outcome: "ok", response: response.data };
      return { outcome: "failed", failure: { code: "replay_diverged", message: `turn ${turn} of ${r.node} has no stored response in run ${r.replay_of}` } };
    },
  };
}

/**
 * A replay's gated proposals and subagents, as its original's journal has them: a proposal is
 * gated where the original asked a person at that turn, and decided as that person did; a
 * subagent's end is the one the original stored (no child run is started).
 */
function replayedDecisions(replay: ReplayPort, r: ExecuteRequest): Pick<AgentStepDeps, "gated" | "gate" | "child"> {
  return {
    gated: async (turn, server, tool) => (await replay.turnDecided(r.node, turn, server, tool)) !== undefined,
    gate: async ({ turn, server, tool }) => {
      const decided = await replay.turnDecided(r.node, turn, server, tool);
      if (decided?.decision === "approved" || decided?.decision === "edited") return { outcome: "approved", arguments: decided.arguments };
      if (decided?.decision === "rejected") return { outcome: "rejected", by: decided.by ?? null, ...(decided.reason ? { reason: decided.reason } : {}) };
      // Expired in the original: nobody may decide it now.
      return { outcome: "needs_approval" };
    },
    child: async ({ key }) => {
      const ended = await replay.recorded(key);
      if (ended?.state === "observed") return { outcome: "observed", value: ended.value };
      return { outcome: "refused", code: "replay_diverged", message: `${key} has no stored end in run ${r.replay_of}` };
    },
  };
}

/** The usage meter as an agent's turns use it: its run tree, under the tree's ceiling, on this node's clock. */
export function turnMeter(deps: Pick<AgentAttemptDeps, "now">, r: ExecuteRequest, meter: UsageMeter): TurnMeter {
  const tree = { tenant: r.tenant, root: r.root, ...(r.cost_ceiling_cents !== undefined ? { ceiling_cents: r.cost_ceiling_cents } : {}) };
  return {
    spent: async () =>
      r.cost_ceiling_cents === undefined ? undefined : { ceiling_cents: r.cost_ceiling_cents, spent_cents: await meter.spentByTree(r.tenant, r.root) },
    reserve: (key, cents) => meter.reserve({ ...tree, key, cents, now: deps.now() }),
    settle: (key, reserved_cents, cents) => meter.settle({ ...tree, key, reserved_cents, cents, now: deps.now() }),
  };
}

/**
 * `text_delta`: the text a model streams during an agent's turn, coalesced (`TextDeltaCoalescer`)
 * and published live (like `step_started`, never journaled: the turn's stored response holds the
 * whole text). `seq` counts the attempt's deltas, so a follower sees a gap; a retried request
 * streams its turn again.
 */
function textDeltas(deps: AgentAttemptDeps, r: ExecuteRequest): (turn: number, text: string) => void {
  const subject = `rw.evt.${r.tenant}.${r.root}.${r.run}.text_delta`;
  let seq = 0;
  return (turn, text) =>
    deps.host.events.publish(subject, {
      type: "text_delta",
      run: r.run,
      tenant: r.tenant,
      at: deps.now(),
      node: r.node,
      attempt: r.attempt,
      turn,
      seq: seq++,
      text,
    });
}

/**
 * Tracing on: the model port an agent attempt uses, each call a `chat` span (a child of the
 * attempt's). Off, the port is used as is and nothing here runs.
 */
function tracedModels(models: ModelPort, request: ExecuteRequest, spans: SpanSink): ModelPort {
  let seq = 0;
  return {
    async complete(tenant, model, turn, options) {
      const call = seq++;
      const began = Date.now();
      const outcome = await models.complete(tenant, model, turn, options);
      const provider = await models.kindOf?.(tenant, model).catch(() => undefined);
      spans.emit(chatSpan(request, { model, provider, seq: call }, began, Date.now(), outcome));
      return outcome;
    },
  };
}
