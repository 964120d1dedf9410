import type { NatsConnection } from "@nats-io/transport-node";
import { LEASE_LAPSED, type AbortRequest, type ExecuteRequest, type Receipt, type TaskPoll } from "../../machines/index.js";
import { tenantOfRun } from "../records/index.js";
import {
  RUN_KIND,
  INTERRUPTED_BY,
  toolResult,
  attemptJournal,
  attemptSpan,
  SPAN_CLOSED_BY_RUN,
  type BoundedRef,
  type ReplayTools,
  type SpanSink,
  type ToolAnswer,
  type ToolCall,
  type ToolPort,
} from "../run/index.js";
import type { UsageMeter } from "../tenant/index.js";
import { runAgentAttempt, type ModelPort } from "../agent/index.js";
import { AttemptStop } from "./attempt-stop.js";
import { AttemptCalls } from "./attempt-calls.js";
import { failedResult, handlerResult, interruptedResult, lapsedResult, ResultBounds } from "./attempt-results.js";
import type { PartitionHold } from "./partition-hold.js";
import { pollTask } from "./task-polls.js";
import { reportTo, type StepReport } from "./attempt-reports.js";
import type { ActorHost, Logger, MailboxClient, StepPool, TaskRef } from "../../runtime/index.js";

/** What became of a heartbeat renewal (see `StepExecutor`'s `onHeartbeatSettled`). */
export type HeartbeatOutcome = "renewed" | "stale" | "mailbox";

/**
 * Runs the attempts this node's run actors lease (the `step.execute` local effect) in the
 * Piscina pool and reports each outcome to its run. The report goes straight to the local
 * actor lane when this node still serves the run's partition, and through the run's durable
 * mailbox otherwise; either way it carries the attempt and lease epoch, so a report from an
 * attempt that is no longer current is refused by the run.
 */
export class StepExecutor {
  private readonly running = new Map<string, ExecuteRequest>();
  /** Each running attempt's kill switch: stopping it aborts the handler's `ctx.signal`. */
  private readonly stops = new Map<string, AttemptStop>();
  /**
   * Map item attempts whose handler called a tool a person must approve first: the item cannot
   * wait, so it is stopped and reports that failure whatever its handler made of it (seed 004:
   * an approval is a control signal, never an item's result).
   */
  private readonly needsApproval = new Map<string, { code: string; message: string; retryable: boolean }>();
  /** Running attempts leased durably (they ran past `lease_after_ms`): their heartbeats are sent. */
  private readonly leased = new Set<string>();
  private readonly lastBeat = new Map<string, number>();
  private beats = 0;
  private readonly results: ResultBounds;
  readonly stats = { started: 0, reported: 0, viaMailbox: 0, staleCommits: 0, staleCancelCommits: 0, partitionFenced: 0, heartbeats: 0, aborted: 0 };

  constructor(
    private readonly deps: {
      nc: NatsConnection;
      pool: StepPool;
      host: ActorHost;
      mailbox: MailboxClient;
      logger: Logger;
      onDone?(request: ExecuteRequest): void;
      /** The attempt's handler (or tool call) returned: its worker is free; its report to the run follows, then `onDone`. */
      onReturned?(request: ExecuteRequest): void;
      /** The node's clock (progress events carry its time, as the run's own do). */
      now?(): number;
      /**
       * Observes each heartbeat renewal this node sends: milliseconds from the executor's
       * dispatch to the run's stored answer, and what the answer was (`renewed`: the lease was
       * extended; `stale`: refused, the attempt is no longer current; `mailbox`: the partition
       * is served elsewhere and only the hand-off to the durable mailbox was timed). Optional,
       * for benchmarks and metrics; it costs one timestamp per renewal.
       */
      onHeartbeatSettled?(ms: number, outcome: HeartbeatOutcome): void;
      /** The tool gateway tool nodes call through (absent: they fail `tool_gateway_unavailable`). */
      tools?: ToolPort;
      /** Answers a replay's calls from its original run's receipts (absent: a replay's calls fail). */
      replay?: ReplayTools;
      /** The model gateway agent nodes call (absent: they fail `model_gateway_unavailable`). */
      models?: ModelPort;
      /** Charges priced tool calls and priced model turns (absent: they fail `metering_unavailable`). */
      meter?: UsageMeter;
      /** Wraps the report path (see {@link StepReport}); production passes none. */
      decorateReport?(report: StepReport): StepReport;
      /**
       * Takes the tenant's provider quota of `model` (`<provider>/<model>`) for one request of at
       * most `tokens`, before a tool server's sampling is asked of it (absent: no quota is taken).
       */
      quota?(tenant: string, model: string, tokens: number, now: number): Promise<{ ok: true } | { ok: false; detail: string }>;
      /** Tracing on: each attempt's and tool call's span goes here when it ends (absent: nothing is timed). */
      spans?: SpanSink;
      /**
       * Whether this node still holds a run's partition: an attempt starts, and sends each tool
       * call, only while it does (absent: not checked; a node of one process, or a test).
       */
      hold?: PartitionHold;
    },
  ) {
    const report = reportTo(deps, this.stats);
    this.send = deps.decorateReport ? deps.decorateReport(report) : report;
    this.results = new ResultBounds(deps.nc);
    const { host, tools, replay, models, meter, quota, spans } = deps;
    this.calls = new AttemptCalls({
      host,
      ...(tools ? { tools } : {}),
      ...(replay ? { replay } : {}),
      ...(models ? { models } : {}),
      ...(meter ? { meter } : {}),
      ...(quota ? { quota } : {}),
      ...(spans ? { spans } : {}),
      bounded: (r, value) => this.bounded(r, value),
      now: () => deps.now?.() ?? Date.now(),
    });
  }

  /** The attempts' tool calls (and a tool server's sampling during them). */
  private readonly calls: AttemptCalls;

  /** Where results and heartbeats go: the report path, or its decorator. */
  private readonly send: StepReport;

  /**
   * Runs a granted attempt. Its grant was not written: a short attempt's result is its one write.
   * One still running after `lease_after_ms` is leased durably by a heartbeat; from then on its
   * handler's heartbeats renew the lease (before, they are not sent: there is nothing to renew).
   */
  execute(request: ExecuteRequest): void {
    const key = `${request.run}/${stepIdOf(request)}/${request.attempt}/${request.lease_epoch}`;
    if (this.running.has(key)) return;
    this.running.set(key, request);
    this.stops.set(key, new AttemptStop(this.deps.hold?.take(request.run)));
    this.stats.started++;
    this.started(request);
    const lease = setTimeout(() => {
      this.leased.add(key);
      this.beat(key, true);
    }, request.lease_after_ms);
    lease.unref();
    void this.run(request, key).finally(() => {
      clearTimeout(lease);
      this.leased.delete(key);
      this.running.delete(key);
      this.stops.delete(key);
      this.needsApproval.delete(key);
      this.deps.onDone?.(request);
    });
  }

  /**
   * `step_started`, when the attempt starts on this node's workers: published live from here,
   * after the run's own events that led to it, because the grant that starts it is not a
   * transition of the run. So it has no id and is not in the journal: the attempt's start is
   * stored with its heartbeat or its result.
   */
  private started(r: ExecuteRequest): void {
    const data = {
      type: "step_started",
      run: r.run,
      tenant: r.tenant,
      at: this.deps.now?.() ?? Date.now(),
      node: r.node,
      ...(r.item !== undefined ? { item: r.item } : {}),
      attempt: r.attempt,
    };
    this.deps.host.events.publish(`rw.evt.${r.tenant}.${r.root}.${r.run}.step_started`, data);
  }

  /**
   * Stops attempts their run no longer wants (cancelled, stopped, settled without them, lease
   * lapsed): each handler's `ctx.signal` aborts now, and a handler that ignores it past the pool's
   * grace has its thread terminated. The attempt's slot frees when its handler settles; its late
   * report is refused by the run.
   */
  abort(request: AbortRequest): void {
    for (const a of request.attempts) {
      // An attempt waiting on an MCP task runs on the tool server: ask it to stop.
      if (a.task) void this.deps.tools?.cancelTask(tenantOfRun(request.run) ?? "", a.task.server, a.task.id, a.task.wire, a.task.tool).catch(() => undefined);
      const key = `${request.run}/${stepIdOf({ node: a.node, ...(a.item !== undefined ? { item: a.item } : {}) })}/${a.attempt}/${a.lease_epoch}`;
      this.abortKey(key, request.reason);
    }
  }

  private abortKey(key: string, reason: string): void {
    const stop = this.stops.get(key);
    if (!stop || stop.stopped) return;
    this.stats.aborted++;
    stop.abort(reason);
  }

  /** Attempts of `run` executing in this process now (their lease epochs): not lost when this node claims the run's partition again. */
  alive(run: string): { node: string; item?: number; attempt: number; lease_epoch: number }[] {
    const out: { node: string; item?: number; attempt: number; lease_epoch: number }[] = [];
    for (const r of this.running.values())
      if (r.run === run) out.push({ node: r.node, ...(r.item !== undefined ? { item: r.item } : {}), attempt: r.attempt, lease_epoch: r.lease_epoch });
    return out;
  }

  get inFlight(): number {
    return this.running.size;
  }

  /**
   * A handler's heartbeat renews its attempt's lease (at most one renewal a second per
   * attempt). A renewal for an attempt that is no longer current is refused by the run.
   */
  heartbeat(ref: { runId: string; stepId: string; attempt: number; leaseEpoch: number }): void {
    const key = `${ref.runId}/${ref.stepId}/${ref.attempt}/${ref.leaseEpoch}`;
    if (this.leased.has(key)) this.beat(key, false);
  }

  /** Sends one heartbeat for a running attempt (the first one leases it durably). */
  private beat(key: string, first: boolean): void {
    if (!this.running.has(key)) return;
    const now = Date.now();
    if (!first && now - (this.lastBeat.get(key) ?? 0) < 1_000) return;
    this.lastBeat.set(key, now);
    const request = this.running.get(key)!;
    const event: Record<string, unknown> = {
      type: "step.heartbeat",
      node: request.node,
      attempt: request.attempt,
      lease_epoch: request.lease_epoch,
      cancellation_epoch: request.cancellation_epoch,
    };
    if (request.item !== undefined) event.item = request.item;
    this.stats.heartbeats++;
    const sent = this.send({ kind: RUN_KIND, id: request.run }, event, `hb/${key}/${this.beats++}`);
    // A refused renewal means the run no longer wants this attempt (cancelled, or a newer lease): stop it.
    void sent.then((outcome) => outcome === "stale" && this.abortKey(key, "stale_heartbeat"));
    const observe = this.deps.onHeartbeatSettled;
    if (observe) {
      const t0 = performance.now();
      void sent.then((outcome) => observe(performance.now() - t0, outcome === "committed" ? "renewed" : outcome === "stale" ? "stale" : "mailbox"));
    }
  }

  /**
   * Whether the attempt's node still holds its run's partition (true at once while its lease is
   * fresh). When it does not, the attempt is stopped `lease_lapsed`: its run, wherever it is
   * served, runs it again if it still wants it (see partition-hold.ts).
   */
  private held(key: string): boolean | Promise<boolean> {
    const hold = this.deps.hold;
    if (!hold) return true;
    const held = hold.held(this.stops.get(key)?.hold);
    if (held === true) return true;
    if (held === false) return this.lapsed(key);
    return held.then((h) => h || this.lapsed(key));
  }

  /** Whether the attempt's node no longer holds its run's partition as it did when the attempt started. */
  private holdLost(key: string): boolean {
    const hold = this.deps.hold;
    const token = this.stops.get(key)?.hold;
    return !!hold && (!token || hold.until(token) === 0);
  }

  private lapsed(key: string): false {
    this.abortKey(key, LEASE_LAPSED);
    return false;
  }

  private async run(request: ExecuteRequest, key: string): Promise<void> {
    const spans = this.deps.spans;
    const began = spans ? Date.now() : 0;
    const held = this.held(key);
    // Refused a start for want of the partition, or stopped while it waited to know (its run cancelled): it never starts.
    let event =
      (held !== true && !(await held)) || this.stops.get(key)!.stopped
        ? undefined
        : request.agent
          ? await this.runAgentStep(request, key)
          : request.tool
            ? await this.runTool(request, key)
            : await this.runHandler(request, key);
    // Stopped, or refused a start or a call, for want of the partition; or it failed, or ended with
    // nothing to report, once this node gave the partition up (its failure may be the hand-over's:
    // the pool destroyed, a journal no longer served here): its run, wherever it is served, decides.
    const why = this.stops.get(key)?.why;
    if (why === LEASE_LAPSED || ((!event || event.outcome === "failed") && this.holdLost(key))) event = lapsedResult(request);
    // A handler stopped because its run did not take what its call did (a write of its journal refused).
    else if (why !== undefined && INTERRUPTED_BY.has(why)) event = interruptedResult(request);
    // An attempt whose lease lapsed (or whose run the sweep ended) was stopped by a transition that closed its span then (spans.ts).
    if (spans && !SPAN_CLOSED_BY_RUN.has(this.stops.get(key)?.why ?? "")) spans.emit(attemptSpan(request, began, Date.now(), event));
    this.deps.onReturned?.(request);
    if (!event) return;
    if (request.item !== undefined) event.item = request.item;
    event.cancellation_epoch = request.cancellation_epoch;
    this.lastBeat.delete(key);
    await this.send({ kind: RUN_KIND, id: request.run }, event, `result/${key}`);
    this.stats.reported++;
  }

  /** A tool node's attempt (intent, call through the gateway, receipt): its result, or none when the run refused or held it. */
  private async runTool(request: ExecuteRequest, key: string): Promise<Record<string, unknown> | undefined> {
    const fence = { type: "step.result", node: request.node, attempt: request.attempt, lease_epoch: request.lease_epoch };
    const { answer, receipt } = await this.callTool(request, key, { ...request.tool!, arguments: request.input });
    // Stopped: parked by its run (a person, a task), refused, or interrupted (its journal not written).
    if (answer.outcome === "stopped") return INTERRUPTED_BY.has(answer.reason) ? interruptedResult(request) : undefined;
    return { ...fence, ...toolResult(answer, receipt) };
  }

  /** An agent node's attempt (`runAgentAttempt`): the model loop on this node, its tool calls through this executor. */
  private runAgentStep(request: ExecuteRequest, key: string): Promise<Record<string, unknown> | undefined> {
    const ref = { runId: request.run, stepId: stepIdOf(request), attempt: request.attempt, leaseEpoch: request.lease_epoch };
    const { host, models, tools, meter, spans } = this.deps;
    return runAgentAttempt(
      {
        host,
        ...(models ? { models } : {}),
        ...(tools ? { tools } : {}),
        ...(meter ? { meter } : {}),
        ...(spans ? { spans } : {}),
        ...(request.replay_of && this.deps.replay ? { replay: this.deps.replay.of(request.replay_of, request.run) } : {}),
        callTool: (call) => this.callTool(request, key, call),
        bounded: (output) => this.bounded(request, output),
        heartbeat: () => this.heartbeat(ref),
        abort: (reason) => this.abortKey(key, reason),
        now: () => this.deps.now?.() ?? Date.now(),
      },
      request,
      this.stops.get(key)!.signal,
    );
  }

  /** A task poll is due (the run's durable timer fired): see `pollTask`. */
  pollTask(p: TaskPoll): Promise<void> {
    const tools = this.deps.tools;
    if (!tools) return Promise.resolve();
    return pollTask(
      { tools, bounded: (r, v) => this.bounded(r, v), now: () => this.deps.now?.() ?? Date.now(), send: (address, event, id) => this.send(address, event, id) },
      p,
    );
  }

  /**
   * A handler's `ctx.tools.call`: the same intent, call and receipt as a tool node's, the receipt
   * stored on its own (the handler goes on). An attempt the run refused or held is stopped.
   */
  async toolCallOf(ref: TaskRef, call: ToolCall): Promise<ToolAnswer> {
    const key = `${ref.runId}/${ref.stepId}/${ref.attempt}/${ref.leaseEpoch}`;
    const request = this.running.get(key);
    if (!request) return { outcome: "stopped", reason: "attempt_not_running" };
    const { answer, receipt } = await this.callTool(request, key, call);
    if (request.item !== undefined && answer.outcome === "failed" && answer.error.code === "tool_needs_approval") {
      this.needsApproval.set(key, answer.error);
      this.abortKey(key, "read_tool_needs_approval");
      return answer;
    }
    let out = answer;
    // The attempt became a zombie during the call: what it learnt is not its to record.
    if (receipt && !(await attemptJournal(this.deps.host, request).receipt(receipt))) out = { outcome: "stopped", reason: "receipt_refused" };
    if (out.outcome === "stopped") this.abortKey(key, out.reason);
    return out;
  }

  /** One tool call of attempt `key` through its run's journal, sent only while its node holds the run's partition. */
  private callTool(request: ExecuteRequest, key: string, call: ToolCall): Promise<{ answer: ToolAnswer; receipt?: Receipt }> {
    return this.calls.call(request, call, { signal: this.stops.get(key)?.signal ?? AbortSignal.abort(), held: () => this.held(key) });
  }

  private async runHandler(request: ExecuteRequest, key: string): Promise<Record<string, unknown>> {
    const result = await this.deps.pool.run(
      {
        handler: request.handler,
        input: request.input,
        runId: request.run,
        stepId: stepIdOf(request),
        attempt: request.attempt,
        leaseEpoch: request.lease_epoch,
        timeoutMs: request.timeout_ms,
        ...(this.deps.hold ? { startBy: this.deps.hold.startBy(this.stops.get(key)!.hold) } : {}),
      },
      { cancellable: (cancel) => this.stops.get(key)!.onCancel(cancel) },
    );
    if (result.outcome === "failed" && result.error.code === "late_start") this.abortKey(key, LEASE_LAPSED);
    const approval = this.needsApproval.get(key);
    return approval ? failedResult(request, approval) : handlerResult(request, result, this.results);
  }

  private bounded(request: BoundedRef, output: unknown): Promise<unknown> {
    return this.results.bounded(request, output);
  }
}

function stepIdOf(request: Pick<ExecuteRequest, "node" | "item">): string {
  return request.item === undefined ? request.node : `${request.node}[${request.item}]`;
}
