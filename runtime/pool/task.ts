/** What the StepPool is given and answers: a step's task, its result, the pool's options and counts. */
import type { FailureCode, ToolCallAnswer } from "./wire.js";

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
  /**
   * Wall-clock ms (`Date.now()`) past which the handler must not start: a thread that takes the
   * task later fails it `late_start` without calling the handler (absent: no limit).
   */
  startBy?: number;
}

/** Which attempt a task is, without its input: what the pool's listeners are told. */
export function refOf(t: StepTask): TaskRef {
  return { handler: t.handler, runId: t.runId, stepId: t.stepId, attempt: t.attempt, leaseEpoch: t.leaseEpoch };
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
  /** Messages that took steps to the threads: under load one a thread a turn of the loop, not one a step. */
  batches: number;
}

export function failure(code: FailureCode, message: string, retryable: boolean): StepResult {
  return { outcome: "failed", error: { code, message, retryable } };
}

/** What a step's thread dying under it means for the step: over its memory limit, or crashed (retryable). */
export function threadFailure(err: unknown, maxOldGenerationSizeMb: number): StepResult {
  const e = err as { code?: unknown; message?: unknown } | undefined;
  if (e?.code === "ERR_WORKER_OUT_OF_MEMORY") {
    return failure("resource_exhausted", `the step exceeded the worker memory limit (${maxOldGenerationSizeMb} MB old generation)`, false);
  }
  return failure("worker_crashed", `worker thread failed: ${typeof e?.message === "string" ? e.message : String(err)}`, true);
}
