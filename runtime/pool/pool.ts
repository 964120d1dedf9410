/**
 * StepPool: runs step handlers in Piscina worker threads. A handler reaches nothing privileged;
 * it gets its input and a context, and its outcome comes back as a closed StepResult. run()
 * never rejects for anything a handler does: throwing, hanging, spinning, exhausting memory or
 * returning rubbish are all failures with a code and a retry verdict.
 *
 * Tasks wait in the pool's own FIFO until a slot is free (`threads × tasksPerThread`), so `timeoutMs` measures execution,
 * not queueing. On timeout or abort the handler's `ctx.signal` aborts first; a handler that has
 * not settled after `cancelGraceMs` has its thread terminated (and replaced). run() resolves
 * only after the handler settled or its thread was terminated.
 */
import { randomUUID } from "node:crypto";
import { BroadcastChannel } from "node:worker_threads";
import { Piscina, queueOptionsSymbol } from "piscina";
import { sharedThreads, type Placement } from "./balancer.js";
import { loadableModule, threadExecArgv, withoutTsx, workerFile } from "./modules.js";
import {
  WIRE_VERSION,
  isWire,
  type CancelMessage,
  type EventMessage,
  type FailureCode,
  type InitMessage,
  type ReadyMessage,
  type ResultMessage,
  type RunMessage,
  type WorkerConfig,
  type ToolAnswerMessage,
  type ToolCallAnswer,
  type ToolCallMessage,
} from "./wire.js";

export type { FailureCode } from "./wire.js";

export interface TaskRef {
  handler: string;
  runId: string;
  stepId: string;
  attempt: number;
  leaseEpoch: number;
}

export interface StepTask extends TaskRef {
  input: unknown;
  /** Execution budget in ms, counted from the moment a thread takes the task. */
  timeoutMs: number;
}

export type StepResult = { outcome: "succeeded"; output: unknown } | { outcome: "failed"; error: { code: FailureCode; message: string; retryable: boolean } };

export interface StepPoolOptions {
  /** Absolute paths of handler modules (.ts or .js), each `export const handlers = {...}`. */
  handlerModules: string[];
  /** Worker threads (default 2). */
  threads?: number;
  /**
   * Tasks a thread interleaves (default 1). Handlers of agent work mostly await I/O, so several
   * share a thread; a CPU-bound handler that hits its timeout takes its thread's other tasks
   * down with it (they fail `worker_crashed`, retryable).
   */
  tasksPerThread?: number;
  /** Old-generation heap limit per worker; a handler above it fails `resource_exhausted` and its
   *  thread is replaced (default 512). */
  maxOldGenerationSizeMb?: number;
  /** Delay between `ctx.signal` aborting and the thread being terminated (default 250 ms). */
  cancelGraceMs?: number;
  /** Node flags for the workers. Default: the process's, less a tsx loader (the threads load no
   *  TypeScript: the pool bundles its worker and .ts handler modules first, modules.ts). Either
   *  way `require()` of an ES module is turned off in them (`threadExecArgv`, modules.ts). */
  execArgv?: string[];
  /** Limit for loading the handler modules in every worker at start() (default 30 s). */
  startTimeoutMs?: number;
  onHeartbeat?(ref: TaskRef): void;
  onProgress?(ref: TaskRef, data: unknown): void;
  /** A handler's `ctx.tools.call` (absent: every call fails `tool_gateway_unavailable`). */
  onToolCall?(ref: TaskRef, call: { server: string; tool: string; arguments: unknown }): Promise<ToolCallAnswer>;
}

export interface StepPoolStats {
  /** Tasks that succeeded. */
  completed: number;
  /** Tasks that failed, whatever the code (timeouts and aborts included). */
  failed: number;
  timeouts: number;
  aborted: number;
  /** Threads that died under a task (crash or memory limit). */
  crashes: number;
  /** Threads terminated because a handler ignored its aborted signal past the grace period. */
  terminations: number;
  running: number;
  queued: number;
  threads: number;
}

interface Pending {
  seq: number;
  task: StepTask;
  resolve(result: StepResult): void;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
  state: "queued" | "running" | "flushing";
  /** Why the pool is stopping this task (set once). */
  ending?: "timeout" | "aborted";
  /** The thread the step runs on, once Piscina placed it (it may wait in Piscina's queue while a thread is replaced). */
  thread?: number;
  /** Terminate its thread as soon as Piscina places it (the grace ran out before it was). */
  killOnPlacement?: boolean;
  timer?: NodeJS.Timeout;
  graceTimer?: NodeJS.Timeout;
  /** Events received / announced by the worker's result (events may trail the result). */
  events: number;
  expected: number;
  flushed?: () => void;
}

const EVENT_FLUSH_LIMIT_MS = 1_000;
const MAX_TIMER_MS = 2_147_483_647;

/** The same continuation whether a promise resolved or rejected. */
const settled = <T>(next: () => T): [() => T, () => T] => [next, next];

/** Which attempt a task is, without its input: what the pool's listeners are told. */
function refOf(t: StepTask): TaskRef {
  return { handler: t.handler, runId: t.runId, stepId: t.stepId, attempt: t.attempt, leaseEpoch: t.leaseEpoch };
}

function failure(code: FailureCode, message: string, retryable: boolean): StepResult {
  return { outcome: "failed", error: { code, message, retryable } };
}

export class StepPool {
  readonly #options: StepPoolOptions;
  readonly #threads: number;
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
  readonly #queue: Pending[] = [];
  #queueHead = 0;
  #queued = 0;
  readonly #running = new Map<number, Pending>();
  readonly #stats = { completed: 0, failed: 0, timeouts: 0, aborted: 0, crashes: 0, terminations: 0 };

  constructor(options: StepPoolOptions) {
    if (options.handlerModules.length === 0) throw new TypeError("StepPool needs at least one handler module");
    this.#options = options;
    this.#threads = Math.max(1, Math.floor(options.threads ?? 2));
    this.#tasksPerThread = Math.max(1, Math.floor(options.tasksPerThread ?? 1));
    this.#graceMs = Math.max(0, options.cancelGraceMs ?? 250);
  }

  /** Imports the handler modules in every worker; rejects with the reason if any module fails
   *  to load or lacks a `handlers` export. Tasks run while it is under way wait for it. */
  async start(): Promise<void> {
    if (this.#started) throw new Error("StepPool already started");
    if (this.#destroyed) throw new Error("StepPool is destroyed");
    this.#started = true;
    const execArgv = threadExecArgv(this.#options.execArgv ?? withoutTsx(process.execArgv));
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
      loadBalancer: sharedThreads(this.#tasksPerThread, (seq, thread) => this.#placed(seq, thread)),
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
    const signal = AbortSignal.timeout(this.#options.startTimeoutMs ?? 30_000);
    const init: InitMessage = { t: "init", v: WIRE_VERSION };
    const replies = await Promise.all(Array.from({ length: this.#threads }, () => piscina.run(init, { signal }) as Promise<unknown>));
    let names: string[] | undefined;
    for (const reply of replies) {
      if (!isWire<ReadyMessage>(reply, "ready")) throw new Error(`unexpected worker reply ${JSON.stringify(reply)}`);
      const seen = [...reply.handlers].sort();
      names ??= seen;
      if (seen.join("\n") !== names.join("\n")) throw new Error(`workers see different handlers: ${names.join(", ")} and ${seen.join(", ")}`);
    }
    return names ?? [];
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
      if (signal) {
        p.onAbort = () => this.#cancel(p, "aborted");
        signal.addEventListener("abort", p.onAbort, { once: true });
      }
      options.cancellable?.(() => this.#cancel(p, "aborted"));
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
    for (let p = this.#nextQueued(); p; p = this.#nextQueued()) this.#finish(p, failure("worker_crashed", "the step pool was destroyed", true));
    const piscina = this.#piscina;
    this.#piscina = undefined;
    await piscina?.destroy();
    this.#channel?.close();
    this.#channel = undefined;
  }

  #nextQueued(): Pending | undefined {
    while (this.#queueHead < this.#queue.length) {
      const p = this.#queue[this.#queueHead]!;
      this.#queueHead++;
      if (this.#queueHead > 1024 && this.#queueHead * 2 > this.#queue.length) {
        this.#queue.splice(0, this.#queueHead);
        this.#queueHead = 0;
      }
      if (p.state === "queued") {
        this.#queued--;
        return p;
      }
    }
    return undefined;
  }

  #dispatch(p: Pending): void {
    const piscina = this.#piscina;
    if (!piscina) return this.#finish(p, failure("worker_crashed", "the step pool was destroyed", true));
    this.#active++;
    p.state = "running";
    this.#running.set(p.seq, p);
    p.timer = setTimeout(() => this.#cancel(p, "timeout"), Math.min(p.task.timeoutMs, MAX_TIMER_MS));
    const t = p.task;
    const msg: RunMessage & Placement = {
      [queueOptionsSymbol]: { seq: p.seq },
      t: "run",
      v: WIRE_VERSION,
      seq: p.seq,
      handler: t.handler,
      input: t.input,
      runId: t.runId,
      stepId: t.stepId,
      attempt: t.attempt,
      leaseEpoch: t.leaseEpoch,
    };
    // No signal: Piscina gives an abortable task a thread of its own, which would defeat
    // `tasksPerThread`. A stuck step's thread is terminated by its thread id instead.
    (piscina.run(msg) as Promise<unknown>).then(
      (reply) => this.#settle(p, reply, undefined),
      (err: unknown) => this.#settle(p, undefined, err),
    );
  }

  #cancel(p: Pending, reason: "timeout" | "aborted"): void {
    if (p.state === "queued") {
      this.#queued--;
      p.state = "flushing"; // skipped by #nextQueued
      return this.#finish(p, failure("aborted", "aborted while queued", false));
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

  #settle(p: Pending, reply: unknown, err: unknown): void {
    clearTimeout(p.timer);
    clearTimeout(p.graceTimer);
    this.#active--;
    const next = this.#destroyed ? undefined : this.#nextQueued();
    if (next) this.#dispatch(next);

    let result: StepResult;
    if (p.ending === "timeout") result = failure("timeout", `step exceeded its ${p.task.timeoutMs} ms budget`, true);
    else if (p.ending === "aborted") result = failure("aborted", "step was cancelled", false);
    else if (err !== undefined || reply === undefined) result = this.#crashed(err);
    else if (isWire<ResultMessage>(reply, "ok", "fail")) {
      result = reply.t === "ok" ? { outcome: "succeeded", output: reply.output } : failure(reply.code, reply.message, reply.retryable);
      if (p.events < reply.events) {
        // heartbeat/progress travel on another port and may trail the result: deliver them first
        p.state = "flushing";
        p.expected = reply.events;
        const limit = setTimeout(() => p.flushed?.(), EVENT_FLUSH_LIMIT_MS);
        p.flushed = () => {
          clearTimeout(limit);
          p.flushed = undefined;
          this.#finish(p, result);
        };
        return;
      }
    } else result = failure("worker_crashed", `unreadable worker reply ${JSON.stringify(reply)?.slice(0, 200)}`, true);
    this.#finish(p, result);
  }

  #crashed(err: unknown): StepResult {
    const e = err as { code?: unknown; message?: unknown } | undefined;
    if (this.#destroyed) return failure("worker_crashed", "the step pool was destroyed", true);
    this.#stats.crashes++;
    if (e?.code === "ERR_WORKER_OUT_OF_MEMORY") {
      return failure(
        "resource_exhausted",
        `the step exceeded the worker memory limit (${this.#options.maxOldGenerationSizeMb ?? 512} MB old generation)`,
        false,
      );
    }
    return failure("worker_crashed", `worker thread failed: ${typeof e?.message === "string" ? e.message : String(err)}`, true);
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

  #toolCall(m: ToolCallMessage): void {
    const p = this.#running.get(m.seq);
    const reply = (answer: ToolCallAnswer) =>
      this.#channel?.postMessage({ t: "tool_answer", v: WIRE_VERSION, seq: m.seq, id: m.id, answer } satisfies ToolAnswerMessage);
    const handle = this.#options.onToolCall;
    if (!p) return reply({ outcome: "stopped", reason: "attempt_not_running" });
    if (!handle) return reply({ outcome: "failed", error: { code: "tool_gateway_unavailable", message: "this pool has no tool gateway", retryable: true } });
    handle(refOf(p.task), { server: m.server, tool: m.tool, arguments: m.arguments }).then(reply, (err: unknown) =>
      reply({ outcome: "failed", error: { code: "tool_gateway_error", message: err instanceof Error ? err.message : String(err), retryable: true } }),
    );
  }

  /** Terminates a thread (Piscina fails its tasks and replaces it): the only way to stop a handler that ignores its signal. */
  #terminate(thread: number): void {
    const worker = this.#piscina?.threads.find((w) => w.threadId === thread);
    if (!worker) return;
    this.#stats.terminations++;
    void worker.terminate();
  }

  /** Piscina gave step `seq` to `thread`: called from inside its distribution, so a termination waits for it to finish posting. */
  #placed(seq: number, thread: number): void {
    const p = this.#running.get(seq);
    if (!p) return;
    p.thread = thread;
    if (p.killOnPlacement) queueMicrotask(() => p.state === "running" && this.#terminate(thread));
  }

  #onEvent(m: unknown): void {
    if (isWire<ToolCallMessage>(m, "tool_call")) return this.#toolCall(m);
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
