import { answerOf, type ActorHost, type AnswerTo, type Dispatched, type WithValue } from "../../runtime/index.js";
import type { ExecuteRequest, Receipt } from "../../machines/index.js";
import { RUN_KIND } from "./actor.js";
import type { RunTypes } from "./protocol.js";
import { fenceOf } from "./tool-step.js";

/**
 * A command of type `K` applied to run `id` in this process (its partition must be served here),
 * its answer typed as the run declares. `event` is built by this node from values already held
 * to the run's schema (`trusted`: not parsed again).
 */
export async function dispatchToRun<K extends keyof RunTypes["answers"]>(
  host: ActorHost,
  id: string,
  event: { type: K } & Record<string, unknown>,
  commandId: string,
): Promise<WithValue<Dispatched<unknown>, AnswerTo<RunTypes, K>>> {
  return answerOf<RunTypes, K, Dispatched<unknown>>(await host.dispatch({ kind: RUN_KIND, id }, event, commandId, { trusted: true }));
}

/** An attempt's commands to its run, as the tool calls, the agent loop and a tool server's sampling send them. */
export interface AttemptJournal {
  /** The run's answer to an effect command of the attempt; undefined when this node does not decide for the run now. */
  ask<K extends keyof RunTypes["answers"]>(event: { type: K } & Record<string, unknown>, id: string): Promise<AnswerTo<RunTypes, K> | undefined>;
  /** Stores a call's receipt (and what it cost) under the attempt's fence: whether the run recorded it. */
  receipt(receipt: Receipt, cost_cents?: number): Promise<boolean>;
}

/** The journal of `request`'s attempt through the run actor served in this process. */
export function attemptJournal(host: ActorHost, request: ExecuteRequest): AttemptJournal {
  return {
    ask: async (event, id) => {
      const local = await dispatchToRun(host, request.run, event, id);
      return local.outcome === "applied" ? local.value : undefined;
    },
    receipt: async (receipt, cost_cents) => {
      const answer = await dispatchToRun(
        host,
        request.run,
        { type: "effect.receipt", ...fenceOf(request), receipt, ...(cost_cents ? { cost_cents } : {}) },
        `receipt/${receipt.key}/${request.attempt}/${request.lease_epoch}`,
      );
      return answer.outcome === "applied" && answer.value?.outcome === "recorded";
    },
  };
}
