import { initialTransition, transition, type SnapshotFrom } from "xstate";
import {
  COUNT_FACT,
  missingFacts,
  SPENT_FACT,
  tenantKey,
  tenantMachine,
  type Member,
  type MembershipReader,
  type QueueEntry,
  type TenantCommand,
  type TenantContext,
  type TenantEffect,
} from "../../machines/tenant/index.js";

type Snap = SnapshotFrom<typeof tenantMachine>;

/**
 * The in-memory twin of a tenant's partition bucket keys (`tenant.<id>.…`), for machine tests
 * without a server: it answers the decision's facts as the actor's `prepare` would (the same
 * `missingFacts` loop over the same keys) and applies `runway.store` effects as the host does
 * after a write (a removal or a per-message TTL included).
 */
export class MemoryMembership {
  readonly keys = new Map<string, { value: unknown; expires?: number }>();
  /** What the meter says the tenant spent, in cents, per UTC day. */
  readonly spent = new Map<string, number>();
  reads = 0;

  constructor(readonly tenant: string) {}

  private value(key: string, now: number): unknown {
    const held = this.keys.get(key);
    if (!held) return null;
    if (held.expires !== undefined && held.expires <= now) {
      this.keys.delete(key);
      return null;
    }
    return held.value;
  }

  /** Facts for `event`, read the way `prepare` reads them. */
  facts(context: TenantContext, event: TenantCommand & { now: number; retention_ms?: number }): Record<string, unknown> {
    const facts: Record<string, unknown> = {};
    for (let missing = missingFacts(context, event, facts); missing !== null; missing = missingFacts(context, event, facts)) {
      for (const key of missing) {
        this.reads++;
        facts[key] = key.startsWith(COUNT_FACT)
          ? (this.runningByProject(event.now)[key.slice(COUNT_FACT.length)] ?? 0)
          : key.startsWith(SPENT_FACT)
            ? (this.spent.get(key.slice(SPENT_FACT.length)) ?? 0)
            : this.value(tenantKey(this.tenant, key), event.now);
      }
    }
    return facts;
  }

  /** The same keys as a `MembershipReader` (for `gatherFacts`). */
  reader(now: number): MembershipReader {
    return {
      read: async (keys) => Object.fromEntries(keys.map((k) => [k, this.value(tenantKey(this.tenant, k), now)])),
      runningByProject: async () => this.runningByProject(now),
      spentOn: async (day) => this.spent.get(day) ?? 0,
    };
  }

  apply(effects: readonly TenantEffect[], now: number): void {
    for (const e of effects) {
      if (e.type !== "runway.store") continue;
      if (!e.key.startsWith(`tenant.${this.tenant}.`)) throw new Error(`store outside the tenant: ${e.key}`);
      if (e.value === null || e.value === undefined) this.keys.delete(e.key);
      else this.keys.set(e.key, { value: e.value, ...(e.ttl_ms ? { expires: now + e.ttl_ms } : {}) });
    }
  }

  private members(now: number): [string, Member][] {
    const prefix = `tenant.${this.tenant}.m.`;
    return [...this.keys.keys()]
      .filter((k) => k.startsWith(prefix) && this.value(k, now) !== null)
      .map((k) => [k.slice(prefix.length), this.value(k, now) as Member]);
  }

  runningByProject(now = 0): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const [, m] of this.members(now)) if (m.s === "r") counts[m.p] = (counts[m.p] ?? 0) + 1;
    return counts;
  }

  /** Running runs: run id → project. */
  running(now = 0): Record<string, string> {
    return Object.fromEntries(this.members(now).flatMap(([run, m]) => (m.s === "r" ? [[run, m.p]] : [])));
  }

  /** Queued runs, oldest first (by queue position): [run id, project]. */
  queued(now = 0): [string, string][] {
    return this.members(now)
      .flatMap(([run, m]) => (m.s === "q" ? [[run, m.p, m.g] as const] : []))
      .sort((a, b) => a[2] - b[2])
      .map(([run, p]) => [run, p]);
  }

  /** Queue slots still held, by key. */
  slots(): Record<string, QueueEntry> {
    const prefix = `tenant.${this.tenant}.q.`;
    return Object.fromEntries([...this.keys].filter(([k]) => k.startsWith(prefix)).map(([k, v]) => [k.slice(prefix.length), v.value as QueueEntry]));
  }
}

export interface Delivered {
  snap: Snap;
  refused: boolean;
  answer: { outcome: string; [k: string]: unknown };
  effects: TenantEffect[];
  audits: TenantEffect[];
  /** Runs told `run.admitted` by this command and by the self-sent commands it led to. */
  admitted: string[];
}

const emitted = (actions: readonly { type: string }[]): TenantEffect[] =>
  actions.filter((a) => a.type === "xstate.emit").map((a) => (a as unknown as { params: { event: TenantEffect } }).params.event);

/**
 * What the host does with one command: refuse it when the machine has no transition, else
 * gather its facts, transition, apply its store effects, and (with `settle`) deliver the
 * commands the tenant sent itself until none is left, as its mailbox would.
 */
export function deliver(snap: Snap, command: TenantCommand, now: number, store: MemoryMembership, settle = true): Delivered {
  // As the host: `prepare` (the facts) first, then whether the state takes the command at all.
  const plain = { ...command, now };
  const event = snap.value === "new" ? plain : { ...plain, facts: store.facts(snap.context, plain) };
  if (!snap.can(event)) return { snap, refused: true, answer: { outcome: "refused", state: snap.value }, audits: [], effects: [], admitted: [] };
  const [next, actions] = transition(tenantMachine, snap, event);
  const effects = emitted(actions);
  store.apply(effects, now);
  const answers = effects.filter((e) => e.type === "runway.answer");
  if (answers.length !== 1 || effects[0]?.type !== "runway.answer") throw new Error(`expected exactly one answer first: ${JSON.stringify(effects)}`);
  const admitted = effects.flatMap((e) => (e.type === "runway.send" && e.to.kind === "run" && e.event.type === "run.admitted" ? [e.to.id] : []));
  let result: Delivered = {
    snap: next,
    refused: false,
    answer: answers[0]!.value as Delivered["answer"],
    audits: effects.filter((e) => e.type === "runway.publish"),
    effects,
    admitted,
  };
  if (!settle) return result;
  for (const e of effects) {
    if (e.type !== "runway.send" || e.to.kind !== "tenant") continue;
    const more = deliver(result.snap, e.event as TenantCommand, now, store, true);
    result = { ...result, snap: more.snap, admitted: [...result.admitted, ...more.admitted] };
  }
  return result;
}

/** A tenant created (unless `settings` is null) with its twin store, and a clock the test moves. */
export function tenantDriver(id: string, t0: number, settings?: Record<string, unknown> | null) {
  const store = new MemoryMembership(id);
  let [snap] = initialTransition(tenantMachine, { id });
  let now = t0;
  const d = {
    store,
    get snap() {
      return snap;
    },
    get ctx() {
      return snap.context;
    },
    get now() {
      return now;
    },
    at(t: number) {
      now = t;
      return d;
    },
    send(command: TenantCommand, settle = true) {
      const r = deliver(snap, command, now, store, settle);
      snap = r.snap;
      return r;
    },
    admit: (run_id: string, project = "p") => d.send({ type: "tenant.admit_run", run_id, project }).answer,
    end: (run_id: string, project = "p") => d.send({ type: "tenant.run_ended", run_id, project }).answer,
    running: () => store.running(now),
    queued: () => store.queued(now),
  };
  if (settings !== null) d.send({ type: "tenant.create", ...(settings ? { settings } : {}) } as TenantCommand);
  return d;
}
