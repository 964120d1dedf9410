/**
 * StepPool: runs step handlers in Piscina worker threads. run() never rejects for anything a handler
 * does: every failure is a closed StepResult with a code and a retry verdict. Tasks wait in the pool's
 * own FIFO, so `timeoutMs` measures execution, not queueing. On timeout or abort the handler's signal
 * aborts first; one still running after `cancelGraceMs` has its thread terminated and replaced.
 */
import { randomUUID } from "node:crypto";
import { BroadcastChannel } from "node:worker_threads";
import { Piscina, queueOptionsSymbol } from "piscina";
import { eventLoopSpin } from "../event-loop-spin.js";
import { sharedThreads, spread, type Placement } from "./balancer.js";
import { failure, refOf, threadFailure, type StepPoolOptions, type StepPoolStats, type StepResult, type StepTask } from "./task.js";
import { answerToolCall } from "./tool-calls.js";
import { Fifo } from "./fifo.js";
import { probeThreads } from "./probe.js";
import { loadableModule, threadExecArgv, threadFlagsOf, workerFile } from "./modules.js";
import {
  WIRE_VERSION,
  isWire,
  type CancelMessage,
  type BatchMessage,
  type EventMessage,
  type ResultsMessage,
  type RunMessage,
  type StepOutcome,
  type WorkerConfig,
  type ToolCallMessage,
} from "./wire.js";

export type { FailureCode } from "./wire.js";
export type { StepPoolOptions, StepPoolStats, StepResult, StepTask, TaskRef } from "./task.js";

interface Pending {
  seq: number;
  task: StepTask;
  resolve(result: StepResult): void;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
  /** queued: waits for a slot; ready: has one, waits for the end of the turn; running: sent to a thread. */
  state: "queued" | "ready" | "running" | "flushing";
  /** Why the pool is stopping this task (set once). */
  ending?: "timeout" | "aborted";
  /** The thread the step runs on, once Piscina placed it (it may wait in Piscina's queue while a thread is replaced). */
  thread?: number;
  /** Terminate its thread as soon as Piscina places it (the grace ran out before it was). */
  killOnPlacement?: boolean;
  timer?: NodeJS.Timeout;
  graceTimer?: NodeJS.Timeout;
  /** Its batch answered without it: its result was posted on the parent port and is on its way. */
  lateTimer?: NodeJS.Timeout;
  /** Events received / announced by the worker's result (events may trail the result). */
  events: number;
  expected: number;
  /** When it went to a thread (performance.now()). */
  sentAt?: number;
  flushed?: () => void;
}

const EVENT_FLUSH_LIMIT_MS = 1_000;
const MAX_TIMER_MS = 2_147_483_647;

/** The same continuation whether a promise resolved or rejected. */
const settled = <T>(next: () => T): [() => T, () => T] => [next, next];

export class StepPool {
  readonly #options: StepPoolOptions;
  readonly #threads: number;
  readonly #unregisterSpin: () => void;
  /** How long the last step took from its send to its outcome: how soon the event loop may expect the next (event-loop-spin.ts). */
  #answerMs = 0;
  readonly #tasksPerThread: number;
  readonly #graceMs: number;
  #piscina: Piscina | undefined;
  #channel: BroadcastChannel | undefined;
  #names: ReadonlySet<string> = new Set();
  #started = false;
  /** The start under way (bundling, the threads, their first answers): tasks run meanwhile wait for it. */
  #booting: Promise<unknown> | undefined;
  #destroyed = false;
  #seq = 0;
  #active = 0;
  readonly #queue = new Fifo<Pending>();
  #queued = 0;
  readonly #running = new Map<number, Pending>();
  /** Steps that got a slot this turn; sent at its end (`#send`). */
  #ready: Pending[] = [];
  /** Steps running on each thread (by thread id), as the balancer placed them. */
  readonly #stepsOn = new Map<number, number>();
  readonly #stats = { completed: 0, failed: 0, timeouts: 0, aborted: 0, crashes: 0, terminations: 0, batches: 0 };

  constructor(options: StepPoolOptions) {
    if (options.handlerModules.length === 0) throw new TypeError("StepPool needs at least one handler module");
    this.#options = options;
    this.#threads = Math.max(1, Math.floor(options.threads ?? 2));
    this.#tasksPerThread = Math.max(1, Math.floor(options.tasksPerThread ?? 1));
    this.#unregisterSpin = eventLoopSpin.register(() => this.#active);
    this.#graceMs = Math.max(0, options.cancelGraceMs ?? 250);
  }

  /** Imports the handler modules in every worker; rejects with the reason if any module fails
   *  to load or lacks a `handlers` export. Tasks run while it is under way wait for it. */
  async start(): Promise<void> {
    if (this.#started) throw new Error("StepPool already started");
    if (this.#destroyed) throw new Error("StepPool is destroyed");
    this.#started = true;
    const execArgv = threadExecArgv(this.#options.execArgv ?? threadFlagsOf(process.execArgv));
    const booting = this.#boot(execArgv);
    // Tasks run meanwhile wait on it too, and go on after this (it awaited first): they find
    // the names set, or the pool destroyed.
    this.#booting = booting;
    try {
      const names = await booting;
      this.#booting = undefined;
      this.#names = new Set(names);
    } catch (err) {
      this.#booting = undefined;
      await this.destroy();
      const why = err instanceof Error ? (err.name === "AbortError" ? "timed out" : err.message) : String(err);
      throw new Error(`StepPool workers failed to load the handler modules: ${why} (worker execArgv: ${JSON.stringify(execArgv)})`, { cause: err });
    }
  }

  /**
   * Makes the worker file and the handler modules loadable as they are (TypeScript bundled,
   * see modules.ts), starts the threads and probes each: the handler modules load there, and the
   * names come from there (this thread never loads them). Every thread must see the same handlers.
   */
  async #boot(execArgv: string[]): Promise<string[]> {
    const [filename, ...handlerModules] = await Promise.all([workerFile(), ...this.#options.handlerModules].map(loadableModule));
    if (this.#destroyed) throw new Error("the step pool was destroyed while it started");
    const channel = `runway.step-pool.${randomUUID()}`;
    const workerData: WorkerConfig = { v: WIRE_VERSION, handlerModules, channel };
    const piscina = new Piscina({
      filename: filename!,
      minThreads: this.#threads,
      maxThreads: this.#threads,
      concurrentTasksPerWorker: this.#tasksPerThread,
      loadBalancer: sharedThreads(this.#tasksPerThread, {
        on: (thread) => this.#stepsOn.get(thread) ?? 0,
        placed: (seqs, thread) => this.#placed(seqs, thread),
      }),
      idleTimeout: MAX_TIMER_MS,
      recordTiming: false,
      workerData,
      resourceLimits: { maxOldGenerationSizeMb: this.#options.maxOldGenerationSizeMb ?? 512 },
      execArgv,
    });
    // an error of a thread with no task (e.g. a leaked timer throwing) must not crash the process
    piscina.on("error", () => undefined);
    piscina.on("message", (m: unknown) => this.#onEvent(m));
    this.#piscina = piscina;
    this.#channel = new BroadcastChannel(channel);
    this.#channel.unref();
    return probeThreads(piscina, this.#threads, this.#options.startTimeoutMs ?? 30_000);
  }

  handlerNames(): ReadonlySet<string> {
    return this.#names;
  }

  /**
   * Runs a step. It is stopped (its `ctx.signal` aborted, then its thread terminated past the
   * grace) when `signal` aborts, or when the function handed to `cancellable` is called: the
   * cheaper way for a caller that rarely stops a step (no signal, no listener per step).
   */
  run(task: StepTask, options: { signal?: AbortSignal; cancellable?: (cancel: () => void) => void } = {}): Promise<StepResult> {
    if (!this.#started) return Promise.reject(new Error("StepPool.run() called before start()"));
    if (!(task.timeoutMs > 0)) return Promise.reject(new TypeError(`timeoutMs must be a positive number, got ${task.timeoutMs}`));
    if (this.#destroyed) return Promise.resolve(this.#count(failure("worker_crashed", "the step pool is destroyed", true)));
    // Started, its threads still loading: the task waits for them (and their handler names),
    // then is looked at again (start() has named the handlers, or destroyed the pool).
    const booting = this.#booting;
    if (booting) return booting.then(...settled(() => this.run(task, options)));
    if (!this.#piscina) return Promise.resolve(this.#count(failure("worker_crashed", "the step pool is destroyed", true)));
    if (!this.#names.has(task.handler)) {
      return Promise.resolve(this.#count(failure("unknown_handler", `no handler named "${task.handler}"`, false)));
    }
    const signal = options.signal;
    if (signal?.aborted) return Promise.resolve(this.#count(failure("aborted", "aborted before it started", false)));

    return new Promise<StepResult>((resolve) => {
      const p: Pending = { seq: ++this.#seq, task, resolve, signal, onAbort: undefined, state: "queued", events: 0, expected: 0 };
      // Stopped as it is handed over (its caller stopped it already): it never reaches a thread.
      let placed = false;
      let stoppedFirst = false;
      options.cancellable?.(() => (placed ? this.#cancel(p, "aborted") : (stoppedFirst = true)));
      if (stoppedFirst) return resolve(this.#count(failure("aborted", "aborted before it started", false)));
      placed = true;
      if (signal) {
        p.onAbort = () => this.#cancel(p, "aborted");
        signal.addEventListener("abort", p.onAbort, { once: true });
      }
      // Each thread interleaves up to `tasksPerThread` handlers (they mostly await I/O).
      if (this.#active < this.#threads * this.#tasksPerThread) this.#dispatch(p);
      else {
        this.#queue.push(p);
        this.#queued++;
      }
    });
  }

  stats(): StepPoolStats {
    return { ...this.#stats, running: this.#active, queued: this.#queued, threads: this.#threads };
  }

  /** Terminates the threads. Queued and running tasks resolve as `worker_crashed` (retryable:
   *  another node may run them). */
  async destroy(): Promise<void> {
    if (this.#destroyed) return;
    this.#destroyed = true;
    this.#unregisterSpin();
    for (let p = this.#nextQueued(); p; p = this.#nextQueued()) this.#finish(p, failure("worker_crashed", "the step pool was destroyed", true));
    const piscina = this.#piscina;
    this.#piscina = undefined;
    await piscina?.destroy();
    this.#channel?.close();
    this.#channel = undefined;
  }

  /** The oldest step still waiting for a slot (those stopped while queued are passed over). */
  #nextQueued(): Pending | undefined {
    for (let p = this.#queue.shift(); p; p = this.#queue.shift()) {
      if (p.state !== "queued") continue;
      this.#queued--;
      return p;
    }
    return undefined;
  }

  /** Gives `p` its slot; it goes to a thread at the end of this turn, with the others that got one in it (at once when it is alone). */
  #dispatch(p: Pending): void {
    const piscina = this.#piscina;
    if (!piscina) return this.#finish(p, failure("worker_crashed", "the step pool was destroyed", true));
    this.#active++;
    p.state = "ready";
    this.#running.set(p.seq, p);
    p.timer = setTimeout(() => this.#cancel(p, "timeout"), Math.min(p.task.timeoutMs, MAX_TIMER_MS));
    // An idle pool sends at once: one step in flight would wait for the turn's end for nothing.
    if (this.#active === 1) return this.#send(piscina, [p], undefined);
    this.#ready.push(p);
    if (this.#ready.length === 1) setImmediate(this.#sendReady);
  }

  /** Sends the turn's ready steps, spread over the threads with room, one batch per thread. */
  readonly #sendReady = (): void => {
    const ready = this.#ready.filter((p) => p.state === "ready");
    this.#ready = [];
    const piscina = this.#piscina;
    if (!piscina) {
      for (const p of ready) this.#settle(p, undefined, new Error("the step pool was destroyed"));
      return;
    }
    const threads = piscina.threads.map((w) => w.threadId);
    let sent = 0;
    for (const [thread, count] of spread(ready.length, threads, (t) => this.#stepsOn.get(t) ?? 0, this.#tasksPerThread)) {
      this.#send(piscina, ready.slice(sent, sent + count), thread);
      sent += count;
    }
    // No thread has room (one is being replaced): one at a time, as Piscina finds room for them.
    for (const p of ready.slice(sent)) this.#send(piscina, [p], undefined);
  };

  #send(piscina: Piscina, batch: Pending[], thread: number | undefined): void {
    const now = performance.now();
    eventLoopSpin.expectAnswer(this.#answerMs);
    const steps: RunMessage[] = [];
    const seqs: number[] = [];
    for (const p of batch) {
      p.state = "running";
      p.sentAt = now;
      const t = p.task;
      // One shape for every step (startBy undefined when the caller sets none).
      steps.push({
        seq: p.seq,
        handler: t.handler,
        input: t.input,
        runId: t.runId,
        stepId: t.stepId,
        attempt: t.attempt,
        leaseEpoch: t.leaseEpoch,
        startBy: t.startBy,
      });
      seqs.push(p.seq);
    }
    this.#stats.batches++;
    const msg: BatchMessage & Placement = { [queueOptionsSymbol]: { seqs, thread }, t: "batch", v: WIRE_VERSION, steps };
    // No signal: Piscina gives an abortable task a thread of its own, which would defeat
    // `tasksPerThread`. A stuck step's thread is terminated by its thread id instead.
    (piscina.run(msg) as Promise<unknown>).then(
      (reply) => this.#batchAnswered(batch, reply, undefined),
      (err: unknown) => this.#batchAnswered(batch, undefined, err),
    );
  }

  /**
   * A batch's task ended: its reply holds the results not posted before it. A step it does not
   * hold was posted on the parent port, another port, whose message may come after this one: it
   * waits for it (bounded). Without a readable reply, every step still running failed with it.
   */
  #batchAnswered(batch: Pending[], reply: unknown, err: unknown): void {
    const answered = err === undefined && isWire<ResultsMessage>(reply, "results");
    if (answered) for (const outcome of reply.results) this.#ended(outcome);
    for (const p of batch) {
      if (p.state !== "running") continue;
      if (answered) p.lateTimer ??= setTimeout(() => this.#lost(p, "its result never reached the pool"), EVENT_FLUSH_LIMIT_MS);
      else if (err !== undefined) this.#settle(p, undefined, err);
      else this.#lost(p, `unreadable worker reply ${JSON.stringify(reply)?.slice(0, 200)}`);
    }
  }

  /** A step whose thread lives on but whose result is not to be had: `worker_crashed`, retryable, and no thread counted as crashed. */
  #lost(p: Pending, why: string): void {
    this.#settle(p, { t: "fail", seq: p.seq, code: "worker_crashed", message: why, retryable: true, events: 0 }, undefined);
  }

  /** A step's outcome, from its batch's reply or the parent port, whichever brings it. */
  #ended(outcome: StepOutcome): void {
    const p = this.#running.get(outcome.seq);
    if (p?.state === "running") this.#settle(p, outcome, undefined);
  }

  #cancel(p: Pending, reason: "timeout" | "aborted"): void {
    if (p.state === "queued") {
      this.#queued--;
      p.state = "flushing"; // skipped by #nextQueued
      return this.#finish(p, failure("aborted", "aborted while queued", false));
    }
    if (p.state === "ready") {
      // not sent yet: it ends here (#sendReady skips it)
      p.ending = reason;
      return this.#settle(p, undefined, undefined);
    }
    if (p.state !== "running" || p.ending) return;
    p.ending = reason;
    const cancel: CancelMessage = { t: "cancel", v: WIRE_VERSION, seq: p.seq, reason };
    this.#channel?.postMessage(cancel);
    const terminate = () => {
      if (p.state !== "running") return;
      if (p.thread === undefined) p.killOnPlacement = true;
      else this.#terminate(p.thread);
    };
    if (this.#graceMs === 0) terminate();
    else p.graceTimer = setTimeout(terminate, this.#graceMs);
  }

  /** `p` stopped holding its slot (and its thread): with its outcome, or with the error that ended its thread. */
  #settle(p: Pending, outcome: StepOutcome | undefined, err: unknown): void {
    clearTimeout(p.timer);
    clearTimeout(p.graceTimer);
    clearTimeout(p.lateTimer);
    this.#active--;
    if (p.sentAt !== undefined) this.#answerMs = performance.now() - p.sentAt;
    if (p.thread !== undefined) {
      const left = (this.#stepsOn.get(p.thread) ?? 1) - 1;
      if (left > 0) this.#stepsOn.set(p.thread, left);
      else this.#stepsOn.delete(p.thread);
    }
    const next = this.#destroyed ? undefined : this.#nextQueued();
    if (next) this.#dispatch(next);

    let result: StepResult;
    if (p.ending === "timeout") result = failure("timeout", `step exceeded its ${p.task.timeoutMs} ms budget`, true);
    else if (p.ending === "aborted") result = failure("aborted", "step was cancelled", false);
    else if (outcome === undefined) result = this.#crashed(err);
    else {
      result = outcome.t === "ok" ? { outcome: "succeeded", output: outcome.output } : failure(outcome.code, outcome.message, outcome.retryable);
      if (p.events < outcome.events) {
        // heartbeat/progress travel on another port and may trail the result: deliver them first
        p.state = "flushing";
        p.expected = outcome.events;
        const limit = setTimeout(() => p.flushed?.(), EVENT_FLUSH_LIMIT_MS);
        p.flushed = () => {
          clearTimeout(limit);
          p.flushed = undefined;
          this.#finish(p, result);
        };
        return;
      }
    }
    this.#finish(p, result);
  }

  #crashed(err: unknown): StepResult {
    if (this.#destroyed) return failure("worker_crashed", "the step pool was destroyed", true);
    this.#stats.crashes++;
    return threadFailure(err, this.#options.maxOldGenerationSizeMb ?? 512);
  }

  #finish(p: Pending, result: StepResult): void {
    this.#running.delete(p.seq);
    p.state = "flushing";
    if (p.signal && p.onAbort) p.signal.removeEventListener("abort", p.onAbort);
    p.resolve(this.#count(result));
  }

  #count(result: StepResult): StepResult {
    if (result.outcome === "succeeded") this.#stats.completed++;
    else {
      this.#stats.failed++;
      if (result.error.code === "timeout") this.#stats.timeouts++;
      else if (result.error.code === "aborted") this.#stats.aborted++;
    }
    return result;
  }

  /** Terminates a thread (Piscina fails its tasks and replaces it): the only way to stop a handler that ignores its signal. */
  #terminate(thread: number): void {
    const worker = this.#piscina?.threads.find((w) => w.threadId === thread);
    if (!worker) return;
    this.#stats.terminations++;
    void worker.terminate();
  }

  /** Piscina gave a batch to `thread`: called from inside its distribution, so a termination waits for it to finish posting. */
  #placed(seqs: readonly number[], thread: number): void {
    for (const seq of seqs) {
      const p = this.#running.get(seq);
      if (p?.state !== "running") continue;
      p.thread = thread;
      this.#stepsOn.set(thread, (this.#stepsOn.get(thread) ?? 0) + 1);
      if (p.killOnPlacement) queueMicrotask(() => p.state === "running" && this.#terminate(thread));
    }
  }

  #onEvent(m: unknown): void {
    if (isWire<ResultsMessage>(m, "results")) {
      for (const outcome of m.results) this.#ended(outcome);
      return;
    }
    if (isWire<ToolCallMessage>(m, "tool_call")) {
      const task = this.#running.get(m.seq)?.task;
      return answerToolCall(m, task && refOf(task), this.#options.onToolCall, (answer) => this.#channel?.postMessage(answer));
    }
    if (!isWire<EventMessage>(m, "heartbeat", "progress")) return;
    const p = this.#running.get(m.seq);
    if (!p) return;
    p.events++;
    const ref = refOf(p.task);
    try {
      if (m.t === "heartbeat") this.#options.onHeartbeat?.(ref);
      else this.#options.onProgress?.(ref, m.data);
    } catch {
      // a listener's fault is not the step's
    }
    if (p.flushed && p.events >= p.expected) p.flushed();
  }
}
