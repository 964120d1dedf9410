/**
 * A tenant's membership lives in keys beside its record (`tenant.<id>.<key>`), not in it, so a
 * write costs the same whatever the tenant's population: `m.<run>` (running or queued),
 * `e.<run>` (recently ended, TTL), `q.<lane>.<n>` (a queue slot), `x.<run>.<node>` (an expansion
 * reservation), `b.<run>` (a day-budget reservation). A decision reads them as facts gathered by
 * `prepare` and writes them as `runway.store` effects applied after the record: the record is the
 * commit point, and the keys catch up with it on every load.
 */

/** The lane of runs whose project has no cap: one FIFO for all of them. */
export const SHARED_LANE = "";

/**
 * `f: 1` marks a run admitted `fresh` (its id made up at random for its start): no later
 * admission can name it, so its end leaves no ended mark.
 */
export type Member = { s: "r"; p: string; f?: 1 } | { s: "q"; p: string; l: string; n: number; g: number };
export interface EndedMark {
  at: number;
}
/** A queued run in its lane; `g` is its place in the tenant's whole queue (lower: older). */
export interface QueueEntry {
  r: string;
  p: string;
  g: number;
}
export interface Reservation {
  c: number;
}
/** Cents a run reserved of its tenant's day budget, on UTC day `d`. */
export interface BudgetReservation {
  c: number;
  d: string;
}

const RAW_TOKEN = /^[A-Za-z0-9_][A-Za-z0-9_=-]*$/;

/**
 * A key token for any string: itself when it is subject- and key-safe (no dots), otherwise `=`
 * and its UTF-8 in base64url. No raw token starts with `=`, so the two never meet.
 */
export function keyToken(value: string): string {
  if (RAW_TOKEN.test(value)) return value;
  return `=${base64url(value)}`;
}

function base64url(value: string): string {
  const bytes = new TextEncoder().encode(value);
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  let out = "";
  for (let i = 0; i < bytes.length; i += 3) {
    const n = (bytes[i]! << 16) | ((bytes[i + 1] ?? 0) << 8) | (bytes[i + 2] ?? 0);
    const chars = Math.min(4, Math.ceil(((bytes.length - i) * 8) / 6));
    for (let c = 0; c < chars; c++) out += alphabet[(n >> (18 - 6 * c)) & 63];
  }
  return out;
}

export const memberKey = (run: string): string => `m.${keyToken(run)}`;
export const endedKey = (run: string): string => `e.${keyToken(run)}`;
export const laneToken = (lane: string): string => (lane === SHARED_LANE ? "-" : keyToken(lane));
export const entryKey = (lane: string, n: number): string => `q.${laneToken(lane)}.${n}`;
export const reservationKey = (run: string, node: string): string => `x.${keyToken(run)}.${keyToken(node)}`;
export const budgetKey = (run: string): string => `b.${keyToken(run)}`;
/** Facts whose name starts with this are counts, not keys: `#running.<project>`. */
export const COUNT_FACT = "#running.";
/** The fact a settings change asks for when a project gains a cap: how many of its runs are running. */
export const runningCountFact = (project: string): string => `${COUNT_FACT}${project}`;
/** The fact a start under a day budget asks for: cents the tenant's runs spent on a UTC day (read from the meter, not a key). */
export const SPENT_FACT = "#spent.";
export const spentFact = (day: string): string => `${SPENT_FACT}${day}`;
export const MEMBER_PREFIX = "m.";

/** The full key of a tenant's membership key in its partition bucket. */
export function tenantKey(tenant: string, key: string): string {
  return `tenant.${tenant}.${key}`;
}

/** A write the decision asks for: `value` null removes the key. */
export interface StoreOp {
  key: string;
  value: unknown;
  ttl_ms?: number;
}

/** What a decision read, by key (relative to `tenant.<id>.`); null: the key holds nothing. */
export type Facts = Readonly<Record<string, unknown>>;

/** Thrown by a decision that needs keys it was not given; `prepare` reads them and decides again. */
export class MissingFacts extends Error {
  constructor(readonly keys: readonly string[]) {
    super(`tenant decision needs ${keys.join(", ")}`);
    this.name = "MissingFacts";
  }
}

/** Reads facts for a decision; a key not in `facts` throws {@link MissingFacts} (with `more`, read together). */
export class FactReader {
  /**
   * `written`: keys this same transition writes (a migration chunk), read as written: the
   * decision sees them though they reach the store only after the record.
   */
  constructor(
    private readonly facts: Facts | undefined,
    private readonly written: ReadonlyMap<string, unknown> = new Map(),
  ) {}

  private has(key: string): boolean {
    return this.written.has(key) || (this.facts !== undefined && Object.hasOwn(this.facts, key));
  }

  get<T>(key: string, more: readonly string[] = []): T | null {
    if (this.written.has(key)) return (this.written.get(key) ?? null) as T | null;
    if (!this.has(key)) throw new MissingFacts([key, ...more.filter((k) => !this.has(k))]);
    return (this.facts![key] ?? null) as T | null;
  }

  member(run: string): Member | null {
    return this.get<Member>(memberKey(run), [endedKey(run)]);
  }

  ended(run: string): EndedMark | null {
    return this.get<EndedMark>(endedKey(run));
  }

  /** Slot `n` of `lane`; on a miss, the next few slots before `end` are read too. */
  entry(lane: string, n: number, end: number): QueueEntry | null {
    const more: string[] = [];
    for (let i = n + 1; i < Math.min(end, n + 16); i++) more.push(entryKey(lane, i));
    return this.get<QueueEntry>(entryKey(lane, n), more);
  }

  spentOn(day: string): number {
    return this.get<number>(spentFact(day)) ?? 0;
  }

  runningIn(project: string): number {
    return this.get<number>(runningCountFact(project)) ?? 0;
  }
}
