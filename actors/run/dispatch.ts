import { answerOf, type ActorHost, type AnswerTo, type Dispatched, type WithValue } from "../../runtime/index.js";
import { RUN_KIND } from "./actor.js";
import type { RunTypes } from "./protocol.js";

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
