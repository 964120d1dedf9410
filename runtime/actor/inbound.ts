/**
 * Reading a command that arrives from outside the process, by the mailbox
 * (`rw.cmd.<partition>.<kind>.<id>`) or as a direct request (`rw.ask.<partition>.<kind>.<id>`):
 * the subject must name this partition, a kind served here and an actor of that partition, and
 * the body must decode. One reading for both, so both refuse the same things the same way.
 */
import { DeadLetterReason } from "./dead-letters.js";
import { ID_PATTERN, type ActorAddress } from "./define.js";
import { commandCodec, type CommandAnswer } from "./wire.js";

export type InboundCommand =
  | { ok: true; address: ActorAddress; event: { type: string } & Record<string, unknown> }
  /** Never applicable: the closed answer for its requester, and why (a dead-letter reason) for a stored copy. */
  | { ok: false; address: ActorAddress; answer: CommandAnswer; reason: DeadLetterReason; detail: string };

export function readInbound(
  subject: string,
  data: Uint8Array,
  partition: number,
  served: { hasKind(kind: string): boolean; partitionOf(address: ActorAddress): number },
): InboundCommand {
  const tokens = subject.split(".");
  const kind = tokens[3] ?? "";
  const id = tokens[4] ?? "";
  const address = { kind, id };
  if (tokens.length !== 5 || Number(tokens[2]) !== partition || !ID_PATTERN.test(id))
    return {
      ok: false,
      address,
      answer: { outcome: "invalid_input", reason: "bad_subject" },
      reason: DeadLetterReason.BadSubject,
      detail: `not ${tokens[0]}.${tokens[1]}.<this partition>.<kind>.<id>`,
    };
  if (!served.hasKind(kind)) return { ok: false, address, answer: { outcome: "unknown_kind", kind }, reason: DeadLetterReason.UnknownKind, detail: kind };
  const home = served.partitionOf(address);
  if (home !== partition)
    return {
      ok: false,
      address,
      answer: { outcome: "invalid_input", reason: "wrong_partition" },
      reason: DeadLetterReason.BadSubject,
      detail: `${kind}.${id} belongs to partition ${home}`,
    };
  const decoded = commandCodec.decode(data);
  if (!decoded.ok)
    return {
      ok: false,
      address,
      answer: { outcome: "invalid_input", reason: decoded.reason },
      reason: DeadLetterReason.Undecodable,
      detail: `${decoded.reason}: ${decoded.detail}`,
    };
  return { ok: true, address, event: decoded.value.event };
}
