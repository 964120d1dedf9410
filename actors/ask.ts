import type { ActorAddress, ActorHost, CommandAnswer, MailboxClient } from "../runtime/index.js";

export type AskAnswer = CommandAnswer | { outcome: "timeout" } | { outcome: "not_stored"; detail: string };

/**
 * Sends a command and waits for the actor's stored answer. When this node serves the actor's
 * partition the command is applied here, bypassing the partition's mailbox (and any queue of
 * other actors' commands in it); otherwise, or if the local attempt could not be stored, it goes
 * through the durable mailbox (also when the local attempt did not answer in half the time).
 * Both paths answer only after the transition is stored, and both dedupe on `id`, so a retry
 * through either meets the first.
 */
export async function askActor(
  deps: { host?: ActorHost; mailbox: MailboxClient },
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
  let left = timeoutMs;
  if (deps.host) {
    // Half the budget here: a partition handed over mid-command may never answer locally. The
    // same id through the mailbox then meets the first attempt if it was applied after all.
    const budget = Math.floor(timeoutMs / 2);
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<{ outcome: "timeout" }>((resolve) => (timer = setTimeout(() => resolve({ outcome: "timeout" }), budget)));
    const local = await Promise.race([deps.host.dispatch(address, event, id, options), expired]).finally(() => clearTimeout(timer));
    if (local.outcome !== "not_served" && local.outcome !== "kept" && local.outcome !== "timeout") return local;
    if (local.outcome === "timeout") left = timeoutMs - budget;
  }
  return deps.mailbox.request(address, event, id, left);
}
