/**
 * What a step handler module may import. Handlers run in worker threads and reach no NATS connection
 * or credentials, only their input, a cancellation signal, heartbeat and progress. No imports here,
 * so handler modules stay cheap to load in every worker.
 */

export interface StepContext {
  readonly input: unknown;
  readonly runId: string;
  readonly stepId: string;
  /** 1 for the first try. */
  readonly attempt: number;
  /** Authority epoch of the lease the step runs under. */
  readonly leaseEpoch: number;
  /** Aborted on timeout or cancellation; the thread is terminated if the handler does not
   *  settle within the pool's grace period. */
  readonly signal: AbortSignal;
  /** Tell the owner that the step is alive (keeps its lease). */
  heartbeat(): void;
  /** Report progress; `data` must be structured-cloneable (plain JSON data is best). */
  progress(data: unknown): void;
  /**
   * Tools of the tenant's MCP servers, through the node's tool gateway (the handler never sees
   * the servers' credentials). Every call is journaled: an intent before, a receipt after, so a
   * retried attempt that makes the same call gets the stored result and calls nothing.
   */
  readonly tools: {
    /** The tool's output (its structured content, else `{ content }`); throws a {@link ToolError} when the call failed. */
    call(server: string, tool: string, args?: Record<string, unknown>): Promise<unknown>;
  };
}

/** Returns the step's output: plain JSON data (null, boolean, finite number, string, array,
 *  plain object). `undefined` becomes null. Anything else fails the step with `bad_output`. */
export type Handler = (ctx: StepContext) => Promise<unknown> | unknown;

export type HandlerModule = { handlers: Record<string, Handler> };

/** Brand that identifies a step error after a trip across the thread boundary. */
export const STEP_ERROR_BRAND = "runway.step-error" as const;

export type StepErrorKind = "terminal" | "retryable";

abstract class StepError extends Error {
  readonly brand = STEP_ERROR_BRAND;
  abstract readonly kind: StepErrorKind;
}

/** A failure that retrying cannot fix (bad input, a refused request): code `terminal`. */
export class TerminalError extends StepError {
  readonly kind = "terminal" as const;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "TerminalError";
  }
}

/** A failure worth retrying (a dependency was down): code `retryable`. */
export class RetryableError extends StepError {
  readonly kind = "retryable" as const;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "RetryableError";
  }
}

/**
 * A tool call that failed (`code`: `tool_error`, `tool_timeout`, `tool_server_crashed`, …, or
 * `stopped`: the run no longer wants this attempt). Uncaught, it fails the step, retryable or not
 * as the failure is.
 */
export class ToolError extends StepError {
  readonly kind: StepErrorKind;
  constructor(
    readonly code: string,
    message: string,
    retryable: boolean,
  ) {
    super(`${code}: ${message}`);
    this.name = "ToolError";
    this.kind = retryable ? "retryable" : "terminal";
  }
}

/** True for a TerminalError or RetryableError from any copy of this module (by brand). */
export function isStepError(value: unknown): value is { brand: typeof STEP_ERROR_BRAND; kind: StepErrorKind; message: string } {
  return typeof value === "object" && value !== null && (value as { brand?: unknown }).brand === STEP_ERROR_BRAND;
}
