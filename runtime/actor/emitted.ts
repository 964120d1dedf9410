import { packMsgpack } from "../codec.js";
import { EffectSchema, type Effect } from "./define.js";

/**
 * What a machine's transition asks the host to do: its `emit` actions, each checked as an
 * {@link Effect}. A machine that emits nonsense throws here, and its command is dead-lettered
 * as a machine fault by the cell.
 */
export function collectEffects(actions: readonly { type: string; params?: unknown }[]): Effect[] {
  const out: Effect[] = [];
  for (const action of actions) {
    if (action.type !== "xstate.emit") continue;
    out.push(checkedEffect((action.params as { event?: unknown } | undefined)?.event));
  }
  return out;
}

/**
 * An emitted effect, checked. The kinds every step emits (events, journal facts, hand-overs,
 * answers) have nothing to check beyond a non-empty name, so they skip the schema, which was
 * a few percent of a step's CPU; sends, publishes, timers and stores, whose addresses and keys
 * the host trusts, go through it.
 */
function checkedEffect(emitted: unknown): Effect {
  const e = emitted as { type?: unknown; subject?: unknown; channel?: unknown } | null | undefined;
  switch (e?.type) {
    case "runway.event":
      if (typeof e.subject === "string" && e.subject.length > 0) return e as Effect;
      break;
    case "runway.local":
      if (typeof e.channel === "string" && e.channel.length > 0) return e as Effect;
      break;
    case "runway.journal":
    case "runway.answer":
      return e as Effect;
  }
  const parsed = EffectSchema.safeParse(emitted);
  if (!parsed.success) throw new Error(`machine emitted an invalid effect: ${JSON.stringify(emitted)}: ${parsed.error.message}`);
  return parsed.data;
}

/** A fact's encoded size; one that cannot be encoded counts nothing here (the record's encoding refuses it). */
export function factBytes(fact: unknown): number {
  try {
    return packMsgpack(fact).length;
  } catch {
    return 0;
  }
}
