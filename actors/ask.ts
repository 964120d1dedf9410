import type { ActorAddress, ActorHost, CommandAnswer, MailboxClient } from "../runtime/index.js";

export type AskAnswer = CommandAnswer | { outcome: "timeout" } | { outcome: "not_stored"; detail: string };

/**
 * Sends a command and waits for the actor's stored answer. When this node serves the actor's
 * partition the command is applied here, bypassing the partition's mailbox (and any queue of
 * other actors' commands in it); otherwise, or if the local attempt could not be stored, it goes
 * through the durable mailbox. Both paths answer only after the transition is stored, and both
 * dedupe on `id`, so a retry through either meets the first.
 */
export async function askActor(deps: { host?: ActorHost; mailbox: MailboxClient }, address: ActorAddress, event: { type: string } & Record<string, unknown>, id: string, timeoutMs: number): Promise<AskAnswer> {
  if (deps.host) {
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<{ outcome: "timeout" }>((resolve) => (timer = setTimeout(() => resolve({ outcome: "timeout" }), timeoutMs)));
    // Like a mailbox request, a local one that times out may still be applied later.
    const local = await Promise.race([deps.host.dispatch(address, event, id), expired]).finally(() => clearTimeout(timer));
    if (local.outcome !== "not_served" && local.outcome !== "kept") return local;
  }
  return deps.mailbox.request(address, event, id, timeoutMs);
}
