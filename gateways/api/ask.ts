import type { ActorAddress, ActorHost, Asked, MailboxClient } from "../../runtime/index.js";

/** A command's answer, its value not yet read as a protocol says (see `RunHandle`, `TenantService`). */
export type AskAnswer = Asked<unknown>;

/**
 * Sends a command and waits for the actor's stored answer: applied here when this node serves the
 * actor's partition, otherwise (or if that could not be stored) through the durable mailbox. One id
 * never travels both paths at once: a local attempt slow to answer is moved to the mailbox only if
 * it still waits in its lane; one being applied is waited for, since a copy could apply twice once
 * the actor's applied window forgot its id.
 */
export async function askActor(
  deps: {
    host?: ActorHost;
    mailbox: MailboxClient;
    /** Resolves once `ms` have passed (default: a timer). A test passes its own, to say when half the time is gone. */
    elapsed?(ms: number): Promise<void>;
  },
  address: ActorAddress,
  event: { type: string } & Record<string, unknown>,
  id: string,
  timeoutMs: number,
  /**
   * `trusted`: the caller built `event` from input already validated at the API: applied here
   * without parsing it again (the mailbox path still parses). `fresh`: the actor's id was made
   * up at random for this command, so it has no record to read first (see `Delivery.fresh`).
   */
  options: { trusted?: boolean; fresh?: boolean } = {},
): Promise<AskAnswer> {
  const deadline = Date.now() + timeoutMs;
  if (deps.host) {
    let withdraw: (() => boolean) | undefined;
    const local = deps.host.dispatch(address, event, id, { ...options, onQueued: (w) => (withdraw = w) });
    const elapsed = deps.elapsed ?? afterTimer;
    let answer = await within(local, elapsed(Math.floor(timeoutMs / 2)));
    // Taken back, it settles `kept` at once; otherwise it is being applied: wait for it.
    if (answer.outcome === "timeout") answer = withdraw?.() ? await local : await within(local, elapsed(deadline - Date.now()));
    if (answer.outcome !== "not_served" && answer.outcome !== "kept") return answer;
  }
  return deps.mailbox.request(address, event, id, Math.max(1, deadline - Date.now()));
}

/** The answer, or `timeout` once `expired` resolves first. */
function within<T>(answer: Promise<T>, expired: Promise<void> & { cancel?(): void }): Promise<T | { outcome: "timeout" }> {
  return Promise.race([answer, expired.then(() => ({ outcome: "timeout" }) as const)]).finally(() => expired.cancel?.());
}

/** Resolves after `ms`; `cancel` clears the timer once the answer came first. */
function afterTimer(ms: number): Promise<void> & { cancel(): void } {
  let timer: NodeJS.Timeout | undefined;
  const done = new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(0, ms))));
  return Object.assign(done, { cancel: () => clearTimeout(timer) });
}
