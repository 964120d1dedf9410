import { hash } from "node:crypto";
import type { AnyMachineSnapshot, EventObject } from "xstate";
import { TERMINAL, type ExecuteRequest, type ExecutionContext, type ItemRun, type NodeRun, type RunContext, type RunStatus } from "../../machines/index.js";
import type { ActorAddress } from "../../runtime/index.js";

/**
 * A run's trace spans, derived from what the run stores, so that no span has to stay open in a
 * process's memory while a run waits for days or its node dies:
 *
 * - every id a span is referred to by is derived from the run (`spanIdOf`): the run's span from
 *   its id, an attempt's from its run, node, item and attempt number; the trace id from the run's
 *   root (or the `traceparent` its start came with, carried in the run's head as `trace`);
 * - a span is emitted once, when it ends, with the start time the run recorded: the run's own
 *   (`run <definition>`, or `invoke_agent <definition>` for a child, whose parent is its parent
 *   run's span) when it reaches a terminal status; an attempt's (`step <node>`) by the executor
 *   that ran it, and with an error status by the recovery that failed it `worker_lost` when its
 *   node was lost; a tool call's (`execute_tool <tool>`) by the executor around the call.
 *
 * This module knows nothing of OpenTelemetry: it hands plain records to a {@link SpanSink}
 * (gateways/telemetry exports them over OTLP). Without a sink nothing here runs.
 */

/** One ended span, as the sink receives it (times in epoch milliseconds, ids lower-case hex). */
export interface SpanRecord {
  name: string;
  trace_id: string;
  span_id: string;
  /** Absent: a trace's root. */
  parent_span_id?: string;
  /** The parent came from outside (a start's `traceparent`). */
  remote_parent?: boolean;
  kind: "internal" | "server" | "client";
  start: number;
  end: number;
  /** Set: the span's status is ERROR with this description. */
  error?: string;
  attributes: Record<string, string | number | boolean | string[]>;
}

/** Where ended spans go (the node's exporter). `emit` must not throw and must not block. */
export interface SpanSink {
  emit(span: SpanRecord): void;
}

/** Attempt failures whose attempt's own process never reports: recovery (or a sweep) closes their span. */
const LOST = new Set(["worker_lost", "dispatch_lost"]);
/**
 * Why an executor's attempt may be stopped by a transition that also closes its span (a lapsed
 * lease fails it `worker_lost`; a child the sweep ends `parent_gone`; a cancel): its executor emits nothing.
 */
export const SPAN_CLOSED_BY_RUN: ReadonlySet<string> = new Set(["lease_expired", "parent_gone", "parent_cancelled"]);
/** The commands that can fail an attempt as lost (recovery, a lease's timer, the sweep): only their transitions are searched for one. */
const LOSING = new Set(["run.recover", "timer.fired", "run.sweep"]);

/** A 64-bit span id derived from its parts (never all zero). */
export function spanIdOf(...parts: readonly (string | number)[]): string {
  // One-shot `hash` (Node ≥ 20.12): the same digest as a Hash object's, at half its cost.
  const id = hash("sha256", parts.join("\u0000")).slice(0, 16);
  return id === "0000000000000000" ? "0000000000000001" : id;
}

/** A run tree's trace id: the one its start came with, else derived from its root's id. */
export function traceIdOf(root: string, given?: string): string {
  if (given) return given;
  return remembered(traceIds, root, () => {
    const id = hash("sha256", `trace\u0000${root}`).slice(0, 32);
    return id === "0".repeat(32) ? `${"0".repeat(31)}1` : id;
  });
}

/** A run's own span id. */
export const runSpanId = (run: string): string => remembered(runSpanIds, run, () => spanIdOf("run", run));

/**
 * The ids a node derives again and again (a run's trace and span id, once per attempt): the
 * recent ones are kept, so a step's span costs one hash, not three. Bounded: emptied when full.
 */
const REMEMBERED = 4_096;
const traceIds = new Map<string, string>();
const runSpanIds = new Map<string, string>();
function remembered(map: Map<string, string>, key: string, derive: () => string): string {
  let id = map.get(key);
  if (id === undefined) {
    if (map.size >= REMEMBERED) map.clear();
    map.set(key, (id = derive()));
  }
  return id;
}

/** An attempt's span id: its run, node, map item and attempt number. */
export const attemptSpanId = (run: string, node: string, item: number | undefined, attempt: number): string =>
  spanIdOf("attempt", run, node, item ?? "", attempt);

/**
 * A W3C `traceparent` header (`00-<trace id>-<span id>-<flags>`) as a run's trace context, or
 * undefined when absent or malformed (a bad header is ignored, as the W3C spec asks, never refused).
 */
export function parseTraceparent(header: string | undefined | null): { trace_id: string; span_id: string; flags: number } | undefined {
  if (typeof header !== "string") return undefined;
  const m = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(header.trim().toLowerCase());
  if (!m || m[1] === "ff" || /^0+$/.test(m[2]!) || /^0+$/.test(m[3]!)) return undefined;
  return { trace_id: m[2]!, span_id: m[3]!, flags: parseInt(m[4]!, 16) };
}

/** The span of one attempt the executor ran, from its start on this node to its result. */
export function attemptSpan(request: ExecuteRequest, start: number, end: number, result: Record<string, unknown> | undefined): SpanRecord {
  const error = result === undefined ? "stopped" : result.outcome === "failed" ? errorText(result.error) : undefined;
  return {
    name: `step ${request.node}`,
    trace_id: traceIdOf(request.root, request.trace),
    span_id: attemptSpanId(request.run, request.node, request.item, request.attempt),
    parent_span_id: runSpanId(request.run),
    kind: "internal",
    start,
    end,
    ...(error !== undefined ? { error } : {}),
    attributes: stepAttributes(request, error !== undefined ? (codeOf(result?.error) ?? "stopped") : undefined),
  };
}

/** A step span's attributes, built in one object (once per step: no spread copies). */
function stepAttributes(request: ExecuteRequest, errorType: string | undefined): SpanRecord["attributes"] {
  const a = attemptAttributes(request.run, request.tenant, request.node, request.item, request.attempt);
  if (request.tool) {
    a["runway.tool.server"] = request.tool.server;
    a["gen_ai.tool.name"] = request.tool.tool;
  } else if (request.agent) a["runway.agent.model"] = request.agent.model;
  else a["runway.handler"] = request.handler;
  if (errorType !== undefined) a["error.type"] = errorType;
  return a;
}

/** The span of one tool call an attempt made (GenAI `execute_tool`), a child of the attempt's span. */
export function toolSpan(
  request: ExecuteRequest,
  call: { server: string; tool: string },
  start: number,
  end: number,
  answer: { outcome: string; error?: { code: string; message: string }; reason?: string },
): SpanRecord {
  const error = answer.outcome === "failed" ? errorText(answer.error) : answer.outcome === "stopped" ? (answer.reason ?? "stopped") : undefined;
  return {
    name: `execute_tool ${call.tool}`,
    trace_id: traceIdOf(request.root, request.trace),
    span_id: spanIdOf("tool", request.run, request.node, request.item ?? "", request.attempt, call.server, call.tool, start),
    parent_span_id: attemptSpanId(request.run, request.node, request.item, request.attempt),
    kind: "internal",
    start,
    end,
    ...(error !== undefined ? { error } : {}),
    attributes: {
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": call.tool,
      "gen_ai.tool.type": "extension",
      "runway.tool.server": call.server,
      "runway.run.id": request.run,
      "runway.tenant": request.tenant,
      ...(error !== undefined ? { "error.type": answer.error?.code ?? answer.reason ?? "stopped" } : {}),
    },
  };
}

/**
 * The span of one model call an agent attempt made (GenAI `chat`), a child of the attempt's span.
 * `model` is the node's `<provider>/<model>`; `provider` the provider's kind when known (`openai`,
 * `anthropic`), else the tenant's name for it. A turn the run answered from its journal asks no
 * model and has no span.
 */
export function chatSpan(
  request: ExecuteRequest,
  call: { model: string; provider: string | undefined; seq: number },
  start: number,
  end: number,
  outcome:
    | { outcome: "ok"; response: { model: string; stop_reason: string; usage: { input_tokens: number; output_tokens: number } } }
    | { outcome: "failed"; failure: { code: string; message: string } },
): SpanRecord {
  const slash = call.model.indexOf("/");
  const requested = slash > 0 ? call.model.slice(slash + 1) : call.model;
  const provider = call.provider ?? (slash > 0 ? call.model.slice(0, slash) : "unknown");
  const failed = outcome.outcome === "failed" ? outcome.failure : undefined;
  const ok = outcome.outcome === "ok" ? outcome.response : undefined;
  return {
    name: `chat ${requested}`,
    trace_id: traceIdOf(request.root, request.trace),
    span_id: spanIdOf("chat", request.run, request.node, request.item ?? "", request.attempt, call.seq),
    parent_span_id: attemptSpanId(request.run, request.node, request.item, request.attempt),
    kind: "client",
    start,
    end,
    ...(failed ? { error: `${failed.code}: ${failed.message}` } : {}),
    attributes: {
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": provider,
      "gen_ai.request.model": requested,
      ...(ok
        ? {
            "gen_ai.response.model": ok.model,
            "gen_ai.response.finish_reasons": [ok.stop_reason],
            "gen_ai.usage.input_tokens": ok.usage.input_tokens,
            "gen_ai.usage.output_tokens": ok.usage.output_tokens,
          }
        : {}),
      "runway.run.id": request.run,
      "runway.tenant": request.tenant,
      "runway.node": request.node,
      "runway.attempt": request.attempt,
      ...(failed ? { "error.type": failed.code } : {}),
    },
  };
}

/**
 * The run actor's `observe`: the spans a stored transition ends. The run's own span when it
 * reaches a terminal status; an attempt's when the transition failed it as lost (`worker_lost`:
 * its node died or its lease lapsed; `dispatch_lost`), since no executor will report it (C118).
 */
export function runSpanObserver(sink: SpanSink) {
  return (_address: ActorAddress, before: AnyMachineSnapshot, after: AnyMachineSnapshot, event: EventObject): void => {
    const run = (after.context as ExecutionContext).run;
    if (!run) return;
    const was = (before.context as ExecutionContext).run;
    const now = (event as { now?: number }).now ?? Date.now();
    if (was && LOSING.has(event.type)) lostAttempts(sink, was, run, now);
    const ended = !isTerminal(before.value) && isTerminal(after.value);
    if (was && ended && event.type === "run.parent_gone")
      stoppedAttempts(sink, was, run, now, run.error ?? { code: "parent_gone", message: "the parent run is gone" });
    // A cancel stops the attempts in flight (C085), their nodes perhaps dead: their spans close here
    // (once: a cancel repeated while the first waits on calls it let finish aborts the same attempts).
    const repeated = was?.cancel != null && was.cancel.enforced_at === null;
    if (was && event.type === "run.cancel" && !repeated && run.cancellation_epoch > was.cancellation_epoch)
      stoppedAttempts(sink, was, run, now, { code: "cancelled", message: `the run was cancelled${run.cancel ? ` by ${run.cancel.by}` : ""}` }, lets);
    if (ended) sink.emit(runSpan(run, now));
  };
}

function lostAttempts(sink: SpanSink, was: RunContext, run: RunContext, now: number): void {
  for (const id in was.nodes) {
    const before = was.nodes[id]!;
    const after = run.nodes[id];
    if (before.s !== "active" || !after) continue;
    for (const [item, holder] of holders(before)) {
      const attempt = inFlight(holder);
      if (attempt === undefined || holder.task) continue;
      const next = item === undefined ? after : after.map?.live[item];
      const error = next?.step?.last_error;
      if (!next || !error || !LOST.has(error.code) || inFlight(next) === attempt || next.step!.attempt !== attempt) continue;
      if (error === holder.step?.last_error) continue;
      sink.emit(closedAttemptSpan(run, id, item, holder, attempt, now, error));
    }
  }
}

/**
 * A transition stopped the attempts a run had in flight: the sweep ended a child whose parent is
 * gone (`run.parent_gone`), or a cancel (`run.cancel`, which aborts them `parent_cancelled`). Their
 * nodes may be long dead, so their spans are closed here, with `error` (their executors, if alive,
 * emit nothing for an attempt stopped `parent_gone` or `parent_cancelled`). `spared`: an attempt
 * the transition lets finish (a cancel's call in flight to a non-idempotent tool), whose executor
 * emits its span when it ends.
 */
function stoppedAttempts(
  sink: SpanSink,
  was: RunContext,
  run: RunContext,
  now: number,
  error: { code: string; message: string },
  spared: (h: ItemRun | NodeRun) => boolean = () => false,
): void {
  for (const id in was.nodes) {
    const before = was.nodes[id]!;
    if (before.s !== "active") continue;
    for (const [item, holder] of holders(before)) {
      const attempt = inFlight(holder);
      if (attempt === undefined || holder.task || spared(holder)) continue;
      sink.emit(closedAttemptSpan(run, id, item, holder, attempt, now, error));
    }
  }
}

/**
 * The span of an attempt a run's transition closes at `now` with `error` (lost with its node, or
 * stopped), its executor never reporting it: from when it was offered (or, a first attempt, started).
 */
function closedAttemptSpan(
  run: RunContext,
  id: string,
  item: number | undefined,
  holder: ItemRun | NodeRun,
  attempt: number,
  now: number,
  error: { code: string; message: string },
): SpanRecord {
  return {
    name: `step ${id}`,
    trace_id: traceIdOf(run.root_run_id, run.trace?.trace_id),
    span_id: attemptSpanId(run.id, id, item, attempt),
    parent_span_id: runSpanId(run.id),
    kind: "internal",
    start: holder.offered_at ?? (attempt === 1 ? (holder.step?.started_at ?? now) : now),
    end: now,
    error: `${error.code}: ${error.message}`,
    attributes: { ...attemptAttributes(run.id, run.tenant, id, item, attempt), "error.type": error.code },
  };
}

/** The run's own span: the trace's root, a `traceparent`'s child, or (a child run) `invoke_agent` under its parent run's span. */
export function runSpan(run: RunContext, end: number): SpanRecord {
  const status = run.lifecycle.status;
  const child = run.parent_run_id !== null;
  const parent = child ? runSpanId(run.parent_run_id!) : run.trace?.span_id;
  const failed = status === "failed";
  return {
    name: child ? `invoke_agent ${run.definition.name}` : `run ${run.definition.name}`,
    trace_id: traceIdOf(run.root_run_id, run.trace?.trace_id),
    span_id: runSpanId(run.id),
    ...(parent ? { parent_span_id: parent } : {}),
    ...(!child && parent ? { remote_parent: true } : {}),
    kind: child ? "internal" : "server",
    start: run.created_at,
    end,
    ...(failed ? { error: run.error ? `${run.error.code}: ${run.error.message}` : status } : {}),
    attributes: {
      ...(child ? { "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": run.definition.name, "gen_ai.agent.id": run.id } : {}),
      "runway.run.id": run.id,
      "runway.tenant": run.tenant,
      "runway.definition": run.definition.name,
      "runway.definition.version": run.definition.version,
      "runway.run.status": status,
      ...(child ? { "runway.parent.run.id": run.parent_run_id!, "runway.parent.node": run.parent_node ?? "" } : {}),
      ...(run.error ? { "error.type": run.error.code } : {}),
    },
  };
}

/** An attempt a cancel lets finish: a call it made to a non-idempotent tool is in flight (machines/execution/cancel.ts `letsFinish`). */
function lets(h: ItemRun | NodeRun): boolean {
  return Object.values(h.intents ?? {}).some((i) => i.class === "non_idempotent");
}

function attemptAttributes(run: string, tenant: string, node: string, item: number | undefined, attempt: number): Record<string, string | number> {
  const a: Record<string, string | number> = { "runway.run.id": run, "runway.tenant": tenant, "runway.node": node };
  if (item !== undefined) a["runway.item"] = item;
  a["runway.attempt"] = attempt;
  return a;
}

/** The attempt a holder runs now: offered (granted in memory) or leased. */
function inFlight(h: ItemRun | NodeRun): number | undefined {
  if (h.offered !== undefined) return h.offered;
  const s = h.step;
  return s && (s.status === "leased" || s.status === "running") ? s.attempt : undefined;
}

function holders(n: NodeRun): [number | undefined, ItemRun | NodeRun][] {
  if (n.map) return Object.entries(n.map.live).map(([i, h]) => [Number(i), h]);
  return n.step ? [[undefined, n]] : [];
}

function isTerminal(value: unknown): boolean {
  return typeof value === "string" && TERMINAL.has(value as RunStatus);
}

function codeOf(error: unknown): string | undefined {
  return typeof error === "object" && error !== null && "code" in error && typeof error.code === "string" ? error.code : undefined;
}

function errorText(error: unknown): string {
  const code = codeOf(error) ?? "failed";
  const message = typeof error === "object" && error !== null && "message" in error && typeof error.message === "string" ? error.message : "";
  return message ? `${code}: ${message}` : code;
}
