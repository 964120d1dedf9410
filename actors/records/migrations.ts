import { isHeadV1, migrateHeadV1, type RunContext } from "../../machines/index.js";
import type { MigrationStep } from "../../runtime/index.js";

/** A stored snapshot as XState persists it: the fields a migration step reads. */
type Persisted = { value?: unknown; context?: { run?: unknown } } | undefined;

/**
 * Every stored record format this code reads, one table: actor kind × stored version → the pure step
 * to the next version, run by the host on every read, so every reader sees today's format. Each step
 * is tested against stored fixtures of its version (`test/fixtures/records/`). A tenant's older
 * in-record members move out over its own transitions (`machines/tenant/migrate.ts`), not on load.
 */
export const MIGRATIONS = {
  run: {
    /** A head stored before journals held its input and outputs: it becomes bounded (its record still holds them for the journal's facts). */
    1: (snapshot: unknown) => {
      const p = snapshot as Persisted;
      const stored = p?.context?.run;
      const run = stored && isHeadV1(stored) ? migrateHeadV1(stored as never) : (stored as RunContext | null | undefined);
      return { ...p, context: { ...p?.context, run: run ?? null } };
    },
    /** The machine's states became the run's statuses (2 had `new`/`live`/`ended`). */
    2: (snapshot: unknown) => {
      const p = snapshot as Persisted;
      const run = (p?.context?.run ?? null) as RunContext | null;
      const value = p?.value === "live" || p?.value === "ended" ? (run?.lifecycle.status ?? "new") : p?.value;
      return { ...p, value, context: { ...p?.context, run } };
    },
    /** The live statuses became children of one `live` state that takes their shared events once (3 had `queued`/`running`/`waiting` at the top). */
    3: (snapshot: unknown) => {
      const p = snapshot as Persisted;
      const value = p?.value === "queued" || p?.value === "running" || p?.value === "waiting" ? { live: p.value } : p?.value;
      return { ...p, value };
    },
    /**
     * Nothing in the snapshot changes. From 5 a run's journal may store a tool step's output as the
     * receipt it is (`{t:"output", receipt}`, machines/effect): a node of format 4 would read that
     * output as missing, so it must refuse such a run's record (too new) rather than decide on it.
     */
    4: (snapshot: unknown) => snapshot,
  },
} as const satisfies Record<string, Readonly<Record<number, MigrationStep>>>;

/** The version records of each kind are written with now: one past the table's last step. */
export const RECORD_VERSIONS = { run: 5 } as const;
