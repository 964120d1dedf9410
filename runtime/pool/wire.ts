/**
 * Messages between the StepPool and its worker threads: tagged (`t`), versioned (`v`) plain objects,
 * so a worker of another version is recognised, not misread. Piscina tasks carry BatchMessage /
 * InitMessage and return ResultsMessage / ReadyMessage; parentPort carries early results, events and
 * tool calls; a BroadcastChannel carries cancels and tool answers.
 */
import { pathToFileURL } from "node:url";
import { isAbsolute } from "node:path";
import type { Handler } from "./handler-api.js";

export const WIRE_VERSION = 2 as const;

export type FailureCode =
  | "handler_error"
  | "terminal"
  | "retryable"
  | "timeout"
  | "aborted"
  | "resource_exhausted"
  | "unknown_handler"
  | "bad_output"
  | "worker_crashed"
  | "late_start";

/** Given to every worker as `workerData`. */
export interface WorkerConfig {
  v: typeof WIRE_VERSION;
  handlerModules: string[];
  /** BroadcastChannel name for CancelMessages (one per pool). */
  channel: string;
}

/** One step of a batch. */
export interface RunMessage {
  /** Pool-local task number; routes results, events and cancels. */
  seq: number;
  handler: string;
  input: unknown;
  runId: string;
  stepId: string;
  attempt: number;
  leaseEpoch: number;
  /** See `StepTask.startBy`. */
  startBy: number | undefined;
}

/**
 * Steps handed to one thread at once: those the main thread got ready in one turn of its loop.
 * One message instead of one each (a post and a wake-up of the thread per step), and their
 * results come back together when they end together.
 */
export interface BatchMessage {
  t: "batch";
  v: typeof WIRE_VERSION;
  steps: RunMessage[];
}

/** Start-up probe: load the handler modules and report their names. */
export interface InitMessage {
  t: "init";
  v: typeof WIRE_VERSION;
}

export type TaskMessage = BatchMessage | InitMessage;

/** How one step ended; `events` is how many EventMessages it posted (they may trail this). */
export type StepOutcome =
  | { t: "ok"; seq: number; output: unknown; events: number }
  | { t: "fail"; seq: number; code: FailureCode; message: string; retryable: boolean; events: number };

/**
 * Results of steps of one batch. A batch's task answers with the results not posted before it;
 * while some of its steps still run, those that ended are posted on the parent port, together
 * when they ended in the same turn of the thread's loop.
 */
export interface ResultsMessage {
  t: "results";
  v: typeof WIRE_VERSION;
  results: StepOutcome[];
}

export interface ReadyMessage {
  t: "ready";
  v: typeof WIRE_VERSION;
  handlers: string[];
}

export interface EventMessage {
  t: "heartbeat" | "progress";
  v: typeof WIRE_VERSION;
  seq: number;
  data?: unknown;
}

/** A handler asks for a tool call (its `id` is unique within its task). */
export interface ToolCallMessage {
  t: "tool_call";
  v: typeof WIRE_VERSION;
  seq: number;
  id: number;
  server: string;
  tool: string;
  arguments: unknown;
}

/** What a tool call gave: the tool's output, its failure, or `stopped` (the run no longer wants this attempt). */
export type ToolCallAnswer =
  | { outcome: "succeeded"; output: unknown }
  | { outcome: "failed"; error: { code: string; message: string; retryable: boolean } }
  | { outcome: "stopped"; reason: string };

export interface ToolAnswerMessage {
  t: "tool_answer";
  v: typeof WIRE_VERSION;
  seq: number;
  id: number;
  answer: ToolCallAnswer;
}

export interface CancelMessage {
  t: "cancel";
  v: typeof WIRE_VERSION;
  seq: number;
  reason: "timeout" | "aborted";
}

export function isWire<T extends { t: string }>(value: unknown, ...tags: T["t"][]): value is T {
  if (typeof value !== "object" || value === null) return false;
  const m = value as { t?: unknown; v?: unknown };
  return m.v === WIRE_VERSION && typeof m.t === "string" && (tags as string[]).includes(m.t);
}

/** A module the pool made loadable (see modules.ts): Node imports it as it is. */
async function importModule(path: string): Promise<Record<string, unknown>> {
  return (await import(pathToFileURL(path).href)) as Record<string, unknown>;
}

/**
 * Imports handler modules (absolute paths) and merges their `handlers` exports. Used by every
 * worker (once, cached). Fails with a message that names the module and what was expected.
 */
export async function loadHandlerModules(paths: readonly string[]): Promise<Map<string, Handler>> {
  const all = new Map<string, Handler>();
  const origin = new Map<string, string>();
  for (const path of paths) {
    if (!isAbsolute(path)) throw new Error(`handler module path must be absolute: ${path}`);
    let mod: Record<string, unknown>;
    try {
      mod = await importModule(path);
    } catch (err) {
      throw new Error(`cannot import handler module ${path}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
    const handlers = mod.handlers;
    if (typeof handlers !== "object" || handlers === null) {
      throw new Error(`handler module ${path} has no \`handlers\` export (expected \`export const handlers: Record<string, Handler>\`)`);
    }
    for (const [name, fn] of Object.entries(handlers)) {
      if (typeof fn !== "function") throw new Error(`handler module ${path}: handlers.${name} is not a function`);
      const before = origin.get(name);
      if (before !== undefined) throw new Error(`handler "${name}" is defined twice: in ${before} and in ${path}`);
      origin.set(name, path);
      all.set(name, fn as Handler);
    }
  }
  return all;
}

/**
 * Why `value` is not plain JSON data, or undefined when it is. Accepts null, booleans, finite
 * numbers, strings, arrays and plain objects (own enumerable string keys; `undefined`
 * properties are dropped as JSON.stringify does); shared references are fine, cycles are not.
 */
export function jsonProblem(value: unknown, path = "output", ancestors: object[] = []): string | undefined {
  switch (typeof value) {
    case "string":
    case "boolean":
      return undefined;
    case "number":
      return Number.isFinite(value) ? undefined : `${path} is ${String(value)}, which JSON cannot represent`;
    case "object": {
      if (value === null) return undefined;
      if (ancestors.includes(value)) return `${path} refers back to an enclosing value (a cycle)`;
      if (ancestors.length >= 256) return `${path} is nested more than 256 levels deep`;
      ancestors.push(value);
      try {
        if (Array.isArray(value)) {
          for (let i = 0; i < value.length; i++) {
            const item: unknown = value[i];
            const p = item === undefined ? `${path}[${i}] is undefined` : jsonProblem(item, `${path}[${i}]`, ancestors);
            if (p !== undefined) return p;
          }
          return undefined;
        }
        const proto: unknown = Object.getPrototypeOf(value);
        if (proto !== Object.prototype && proto !== null) {
          const ctor = (value as { constructor?: { name?: unknown } }).constructor?.name;
          return `${path} is a ${typeof ctor === "string" && ctor ? ctor : "non-plain object"}, not plain JSON data`;
        }
        for (const key of Object.keys(value)) {
          const item: unknown = (value as Record<string, unknown>)[key];
          if (item === undefined) continue;
          const p = jsonProblem(item, `${path}.${key}`, ancestors);
          if (p !== undefined) return p;
        }
        return undefined;
      } finally {
        ancestors.pop();
      }
    }
    default:
      // function, bigint, symbol, and undefined below the top level
      return `${path} is ${typeof value === "undefined" ? "undefined" : `a ${typeof value}`}, not JSON data`;
  }
}
