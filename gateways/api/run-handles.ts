import { answerOf, type ActorHost, type AnswerTo, type CommandOf, type Asked, type MailboxClient, type WithValue } from "../../runtime/index.js";
import { RUN_KIND, type RunTypes } from "../../actors/index.js";
import { askActor } from "./ask.js";

type Command<K extends RunTypes["commands"]["type"]> = CommandOf<RunTypes, K>;

/** What asking a run needs: this node's host (commands for partitions it serves are applied here) and the mailbox. */
export interface RunAskDeps {
  host?: ActorHost;
  mailbox: MailboxClient;
}

/**
 * Typed handles on runs: `runs.of(id).cancel(…)` answers the union the run actor declares for
 * `run.cancel`, so a caller branches on it without a cast. Each command waits for the run's
 * stored answer (see `askActor`), up to `timeoutMs`.
 */
export class RunHandles {
  constructor(
    private readonly deps: RunAskDeps,
    private readonly timeoutMs = 10_000,
  ) {}

  of(id: string): RunHandle {
    return new RunHandle(this.deps, id, this.timeoutMs);
  }
}

/** One run's commands, each answered with its own typed value (see {@link RunTypes}). */
export class RunHandle {
  constructor(
    private readonly deps: RunAskDeps,
    readonly id: string,
    private readonly timeoutMs: number,
  ) {}

  /**
   * `trusted`: built from input validated at the API (applied here without parsing it again);
   * `fresh`: the run id was made up for this start, so there is no record to read first.
   */
  create(event: Command<"run.create"> & { live_indexed?: true }, commandId: string, options: { trusted?: boolean; fresh?: boolean } = {}) {
    return this.ask(event, commandId, options);
  }

  cancel(reason: string, by: string, commandId: string) {
    return this.ask({ type: "run.cancel", reason, by }, commandId);
  }

  signal(signal: { name: string; data?: unknown; by: string }, commandId: string) {
    return this.ask({ type: "run.signal", ...signal }, commandId);
  }

  decide(decision: Omit<Command<"approval.decide">, "type">, commandId: string) {
    return this.ask({ type: "approval.decide", ...decision }, commandId);
  }

  settle(settle: Omit<Command<"effect.settle">, "type">, commandId: string) {
    return this.ask({ type: "effect.settle", ...settle }, commandId);
  }

  private async ask<K extends keyof RunTypes["answers"]>(
    event: { type: K } & Record<string, unknown>,
    commandId: string,
    options: { trusted?: boolean; fresh?: boolean } = {},
  ): Promise<WithValue<Asked<unknown>, AnswerTo<RunTypes, K>>> {
    return answerOf<RunTypes, K, Asked<unknown>>(await askActor(this.deps, { kind: RUN_KIND, id: this.id }, event, commandId, this.timeoutMs, options));
  }
}
