import { packMsgpack } from "../codec.js";
import { BUCKET_PATTERN, EffectSchema, ID_PATTERN, KIND_PATTERN, STORE_KEY_PATTERN, type Effect } from "./define.js";

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
 * answers) have nothing to check beyond a non-empty name, so they skip the schema, a visible cost
 * on the hot path; sends and stores are checked field by field as the schema would; whatever that
 * does not accept, and publishes and timers, go through the schema, which says why.
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
    case "runway.store":
      if (isStore(e as StoreFields)) return e as Effect;
      break;
    case "runway.send":
      if (isSend(e as SendFields)) return e as Effect;
      break;
  }
  const parsed = EffectSchema.safeParse(emitted);
  if (!parsed.success) throw new Error(`machine emitted an invalid effect: ${JSON.stringify(emitted)}: ${parsed.error.message}`);
  return parsed.data;
}

interface StoreFields {
  key?: unknown;
  ttl_ms?: unknown;
  bucket?: unknown;
  last?: unknown;
}

/** What EffectSchema's `runway.store` accepts (its `value` is anything). */
function isStore(e: StoreFields): boolean {
  return (
    typeof e.key === "string" &&
    e.key.length <= 1_000 &&
    STORE_KEY_PATTERN.test(e.key) &&
    (e.ttl_ms === undefined || (Number.isInteger(e.ttl_ms) && (e.ttl_ms as number) > 0)) &&
    (e.bucket === undefined || (typeof e.bucket === "string" && BUCKET_PATTERN.test(e.bucket))) &&
    (e.last === undefined || e.last === true)
  );
}

interface SendFields {
  to?: { kind?: unknown; id?: unknown } | null;
  event?: { type?: unknown } | null;
  last?: unknown;
}

/** What EffectSchema's `runway.send` accepts. */
function isSend(e: SendFields): boolean {
  const { to, event } = e;
  return (
    typeof to === "object" &&
    to !== null &&
    typeof to.kind === "string" &&
    KIND_PATTERN.test(to.kind) &&
    typeof to.id === "string" &&
    ID_PATTERN.test(to.id) &&
    typeof event === "object" &&
    event !== null &&
    !Array.isArray(event) &&
    typeof event.type === "string" &&
    event.type.length > 0 &&
    (e.last === undefined || e.last === true)
  );
}

/** A fact's encoded size; one that cannot be encoded counts nothing here (the record's encoding refuses it). */
export function factBytes(fact: unknown): number {
  try {
    return packMsgpack(fact).length;
  } catch {
    return 0;
  }
}
