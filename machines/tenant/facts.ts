import type { TenantContext, TenantContextV1 } from "./context.js";
import { applyTenantCommand, likelyFacts } from "./apply.js";
import { COUNT_FACT, MissingFacts, SPENT_FACT, type Facts } from "./members.js";
import type { TenantEvent } from "./events.js";

/** Reads membership keys (relative to `tenant.<id>.`) by name; null for a key that holds nothing. */
export interface MembershipReader {
  read(keys: readonly string[]): Promise<Record<string, unknown>>;
  /** Running runs per project, counted over every `m.<run>` key (asked only when a project gains a cap). */
  runningByProject(): Promise<Record<string, number>>;
  /** Cents the tenant's runs spent on UTC day `day`, from the meter (asked only under a day budget). */
  spentOn(day: string): Promise<number>;
}

/** The facts `event`'s decision still lacks given `facts` (null: none, it can be decided). */
export function missingFacts(context: TenantContext | TenantContextV1, event: TenantEvent, facts: Facts): readonly string[] | null {
  return missingFor(context, { ...event, facts });
}

function missingFor(context: TenantContext | TenantContextV1, event: TenantEvent): readonly string[] | null {
  try {
    applyTenantCommand(context, event);
    return null;
  } catch (err) {
    if (err instanceof MissingFacts) return err.keys;
    throw err;
  }
}

/**
 * `event` with the facts its decision reads, gathered by deciding until nothing is missing: the
 * likely keys first, together, then whatever a try asked for (a lane's next slots come in
 * groups); the machine then decides the event with every fact it reads at hand. Most
 * commands need one round of reads; a run's end that starts queued runs, about one more per
 * sixteen runs started.
 */
export async function withGatheredFacts(context: TenantContext | TenantContextV1, event: TenantEvent, reader: MembershipReader): Promise<TenantEvent> {
  const facts: Record<string, unknown> = {};
  const first = likelyFacts(event as { type: string; run_id?: string; fresh?: boolean });
  if (first.length > 0) Object.assign(facts, await reader.read(first));
  let counts: Record<string, number> | undefined;
  for (;;) {
    // A copy each try: the event handed on holds the facts as they were when its try succeeded.
    const decidable: TenantEvent = { ...event, facts: { ...facts } };
    const missing = missingFor(context, decidable);
    if (missing === null) return decidable;
    const keys = missing.filter((k) => !k.startsWith(COUNT_FACT) && !k.startsWith(SPENT_FACT));
    if (keys.length > 0) Object.assign(facts, await reader.read(keys));
    for (const key of missing.filter((k) => k.startsWith(SPENT_FACT))) facts[key] = await reader.spentOn(key.slice(SPENT_FACT.length));
    for (const key of missing.filter((k) => k.startsWith(COUNT_FACT))) {
      counts ??= await reader.runningByProject();
      facts[key] = counts[key.slice(COUNT_FACT.length)] ?? 0;
    }
  }
}

/** The facts `event`'s decision reads (see {@link withGatheredFacts}). */
export async function gatherFacts(context: TenantContext | TenantContextV1, event: TenantEvent, reader: MembershipReader): Promise<Facts> {
  return (await withGatheredFacts(context, event, reader)).facts ?? {};
}
