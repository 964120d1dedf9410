import type { ExecuteRequest, Receipt } from "../../machines/index.js";
import type { ActorHost } from "../../runtime/index.js";
import {
  attemptJournal,
  callThroughJournal,
  toolSpan,
  type BoundedRef,
  type ReplayTools,
  type SamplingAnswer,
  type SamplingAsk,
  type SpanSink,
  type ToolAnswer,
  type ToolCall,
  type ToolPort,
} from "../run/index.js";
import type { UsageMeter } from "../tenant/index.js";
import { serveSampling, turnMeter, type ModelPort } from "../agent/index.js";

/** What an attempt's outside calls need of the node (the step executor's ports). */
export interface AttemptCallDeps {
  host: ActorHost;
  /** The tool gateway (absent: calls fail `tool_gateway_unavailable`). */
  tools?: ToolPort;
  /** Answers a replay's calls from its original run's receipts. */
  replay?: ReplayTools;
  /** Serves a tool server's sampling requests (absent: refused). */
  models?: ModelPort;
  /** Charges priced calls and sampled turns. */
  meter?: UsageMeter;
  /** Takes the tenant's provider quota of `model` for one sampled request of at most `tokens`. */
  quota?(tenant: string, model: string, tokens: number, now: number): Promise<{ ok: true } | { ok: false; detail: string }>;
  /** Tracing on: each call that reached its server is a span. */
  spans?: SpanSink;
  bounded(request: BoundedRef, value: unknown): Promise<unknown>;
  now(): number;
}

/** One attempt's call: what it may still do (its stop signal, its hold on the run's partition). */
export interface AttemptScope {
  signal: AbortSignal;
  /** Whether the attempt may still send (see `ToolStepDeps.held`). */
  held(): boolean | Promise<boolean>;
}

/**
 * An attempt's tool calls through its run's journal (intent, call, receipt: `callThroughJournal`)
 * and, during a call, the tool server's sampling requests served by the model gateway under the
 * run's budget (`serveSampling`). A replay's calls are answered from its original's receipts.
 */
export class AttemptCalls {
  constructor(private readonly deps: AttemptCallDeps) {}

  call(request: ExecuteRequest, call: ToolCall, scope: AttemptScope): Promise<{ answer: ToolAnswer; receipt?: Receipt }> {
    const spans = this.deps.spans;
    if (!spans) return this.untraced(request, call, scope);
    const began = Date.now();
    let started = false;
    // Only a call that reached the tool server has a span (C069): one refused before it (a ceiling, a gate, the journal's answer) has none.
    return this.untraced(request, call, scope, () => (started = true)).then((r) => {
      if (started) spans.emit(toolSpan(request, call, began, Date.now(), r.answer));
      return r;
    });
  }

  private untraced(request: ExecuteRequest, call: ToolCall, scope: AttemptScope, started?: () => void): Promise<{ answer: ToolAnswer; receipt?: Receipt }> {
    const { deps } = this;
    const replay = request.replay_of ? deps.replay?.of(request.replay_of, request.run) : undefined;
    const tools = request.replay_of ? replay : deps.tools;
    if (!tools)
      return Promise.resolve({
        answer: { outcome: "failed", error: { code: "tool_gateway_unavailable", message: "this node has no tool gateway", retryable: true } },
      });
    const journal = attemptJournal(deps.host, request);
    return callThroughJournal(
      {
        tools,
        ...(replay ? { decided: replay.decided } : {}),
        ask: (_request, event, id) => journal.ask(event, id),
        bounded: (r, value) => deps.bounded(r, value),
        ...(deps.meter ? { meter: deps.meter } : {}),
        now: () => deps.now(),
        ...(started ? { started } : {}),
        held: () => scope.held(),
        // A replay's calls are answered from its original's receipts: nothing is sampled.
        ...(deps.models && !request.replay_of ? { sample: (r, c, ask, signal) => this.sample(r, c, ask, signal) } : {}),
      },
      request,
      call,
      scope.signal,
    );
  }

  /** A tool server's sampling request during a call of attempt `r`: served by the model gateway under the run's budget, through its journal (`serveSampling`). */
  private sample(r: ExecuteRequest, call: { server: string; tool: string; key: string }, ask: SamplingAsk, signal: AbortSignal): Promise<SamplingAnswer> {
    const { deps } = this;
    const now = () => deps.now();
    const journal = attemptJournal(deps.host, r);
    return serveSampling(
      {
        models: deps.models!,
        ...(deps.meter ? { meter: turnMeter({ now }, r, deps.meter) } : {}),
        ...(deps.quota ? { quota: (model: string, tokens: number) => deps.quota!(r.tenant, model, tokens, now()) } : {}),
        intent: (event, id) => journal.ask(event, id),
        receipt: (receipt, cost_cents) => journal.receipt(receipt, cost_cents),
        now,
      },
      r,
      call.key,
      call,
      ask,
      signal,
    );
  }
}
