import { RunwayFault } from "../errors.js";
import type { ActorDefinition } from "./define.js";
import type { ActorRecord } from "./wire.js";

/** The snapshot format version records of this kind are written with. */
export function snapshotVersion(definition: Pick<ActorDefinition, "version">): number {
  return definition.version ?? 1;
}

/**
 * The persisted snapshot of `record` in the current format of its kind: as stored when the
 * record's snapshot version is current, else run through the kind's migration table, one step
 * per version. Throws a `RunwayFault` (`record_too_new`) for a record written by a later version
 * of the kind, which this code must not decide on, and (`no_migration`) for an older one it
 * cannot migrate.
 */
export function currentSnapshot(
  definition: Pick<ActorDefinition, "kind" | "version" | "migrations">,
  record: Pick<ActorRecord, "snapshot" | "version">,
): unknown {
  const from = record.version ?? 1;
  const to = snapshotVersion(definition);
  if (from === to) return record.snapshot;
  if (from > to) throw new RunwayFault("record_too_new", `a ${definition.kind} record of snapshot version ${from}; this code reads up to ${to}`);
  let snapshot = record.snapshot;
  for (let v = from; v < to; v++) {
    const step = definition.migrations?.[v];
    if (!step) throw new RunwayFault("no_migration", `a ${definition.kind} record of snapshot version ${v}; version ${to} has no step from it`);
    snapshot = step(snapshot);
  }
  return snapshot;
}
