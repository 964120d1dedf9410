import type { HoldToken } from "./partition-hold.js";

/**
 * An attempt's kill switch, cheap until used: most attempts end without being stopped, so the
 * AbortSignal (a tool call's) is made only when asked for, and the pool is stopped through the
 * function it handed over rather than by a listener on a signal.
 */
export class AttemptStop {
  /** The partition hold the attempt started under (see partition-hold.ts; none without a hold port). */
  constructor(readonly hold?: HoldToken) {}

  private controller: AbortController | undefined;
  private cancelTask: (() => void) | undefined;
  private reason: string | undefined;

  get stopped(): boolean {
    return this.reason !== undefined;
  }

  /** Why the attempt was stopped (undefined: it was not). */
  get why(): string | undefined {
    return this.reason;
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.reason !== undefined) this.controller.abort(this.reason);
    }
    return this.controller.signal;
  }

  /** The pool's way to stop the attempt's task (called at once if the attempt was stopped already). */
  onCancel(cancel: () => void): void {
    this.cancelTask = cancel;
    if (this.reason !== undefined) cancel();
  }

  abort(reason: string): void {
    if (this.reason !== undefined) return;
    this.reason = reason;
    this.controller?.abort(reason);
    this.cancelTask?.();
  }
}
