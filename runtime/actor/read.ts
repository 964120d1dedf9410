/**
 * Reading an actor's stored record: the one decoder of `rw.actor` records and the one place a
 * stored snapshot is brought to its kind's current format (the kind's migration table, see
 * `ActorDefinition.migrations`). The host's own load and every reader outside it (the API's run
 * and tenant reads, recovery, the sweep) go through here, so each sees today's format.
 */
import type { NatsConnection } from "@nats-io/transport-node";
import type { AnyStateMachine } from "xstate";
import { isRemoval, readFirst, readLast, type ReadOutcome } from "../nats/jetstream.js";
import { partitionOf } from "../partitions/hash.js";
import { kvSubject, partitionBucket, partitionStream } from "../topology.js";
import type { ActorDefinition, ActorTypes } from "./define.js";
import { currentSnapshot, snapshotVersion } from "./migrate.js";
import { actorRecordCodec, type ActorRecord } from "./wire.js";

/** What reading a kind's records needs of its definition: its kind, its format version and its migration table. */
export type RecordFormat<T extends ActorTypes = ActorTypes> = Pick<ActorDefinition<AnyStateMachine, T>, "kind" | "key" | "version" | "migrations" | "types">;

/** An actor's stored machine snapshot in its kind's current format: its state value and context. */
export interface StoredSnapshot<S> {
  value: unknown;
  context: S | undefined;
}

export type ActorRead<S> =
  | {
      outcome: "found";
      /** The snapshot, migrated when an earlier version stored it. */
      snapshot: StoredSnapshot<S>;
      /** XState's persisted snapshot as migrated (what a host resolves in the kind's machine). */
      persisted: unknown;
      /** The record as stored (its outbox, journal facts, applied ids, snapshot version). */
      record: ActorRecord;
      revision: number;
    }
  | { outcome: "missing" }
  | { outcome: "unavailable"; detail: string }
  /** Stored but unreadable: not a record, or a migration step failed on it (`revision`: the message's). */
  | { outcome: "corrupt"; detail: string; revision: number };

/**
 * A read of one key decoded as a record of `format`'s kind. A record written by a later version
 * of the kind (`newer`): `throw` raises `record_too_new` (a host never decides on it), `as_stored`
 * hands its snapshot over as it is (a reader outside the host reads what it can of it, as it
 * always has). A migration step that throws makes the record `corrupt`.
 */
export function decodeActor<T extends ActorTypes>(
  format: RecordFormat<T>,
  read: ReadOutcome,
  newer: "throw" | "as_stored" = "as_stored",
): ActorRead<T["state"]> {
  if (read.outcome === "unavailable") return read;
  // A deleted or purged key's last message is its marker: no record.
  if (read.outcome === "missing" || isRemoval(read.message)) return { outcome: "missing" };
  const decoded = actorRecordCodec.decode(read.message.data);
  if (!decoded.ok) return { outcome: "corrupt", detail: `${decoded.reason}: ${decoded.detail}`, revision: read.message.seq };
  const record = decoded.value;
  let persisted: unknown;
  try {
    persisted = newer === "as_stored" && (record.version ?? 1) > snapshotVersion(format) ? record.snapshot : currentSnapshot(format, record);
  } catch (err) {
    if (newer === "throw") throw err;
    return { outcome: "corrupt", detail: `migration: ${String(err)}`, revision: read.message.seq };
  }
  return { outcome: "found", snapshot: snapshotOf<T>(persisted), persisted, record, revision: read.message.seq };
}

/**
 * The snapshot of a record already decoded (a journal's entry), in today's format: the same
 * migration as {@link decodeActor}; a record newer than the code is read as stored.
 */
export function migratedSnapshot<T extends ActorTypes>(format: RecordFormat<T>, record: Pick<ActorRecord, "snapshot" | "version">): StoredSnapshot<T["state"]> {
  return snapshotOf<T>((record.version ?? 1) > snapshotVersion(format) ? record.snapshot : currentSnapshot(format, record));
}

function snapshotOf<T extends ActorTypes>(persisted: unknown): StoredSnapshot<T["state"]> {
  // The kind's format, as its migration table leaves it: typed by the kind's declared state.
  const p = persisted as { value?: unknown; context?: T["state"] } | undefined;
  return { value: p?.value, context: p?.context };
}

/**
 * Reads actor `<kind>.<id>` of `format`'s kind straight from its partition's bucket (one direct
 * read; no actor is woken): its last record, or with `first` the first one a journaled actor
 * stored (its journal's first entry), decoded and in today's format.
 */
export async function readActor<T extends ActorTypes>(
  store: { nc: NatsConnection; partitions: number },
  format: RecordFormat<T>,
  id: string,
  which: "last" | "first" = "last",
): Promise<ActorRead<T["state"]>> {
  const p = partitionOf(format.key?.(id) ?? id, store.partitions);
  const subject = kvSubject(partitionBucket(p), `${format.kind}.${id}`);
  const read = which === "first" ? await readFirst(store.nc, partitionStream(p), subject) : await readLast(store.nc, partitionStream(p), subject);
  return decodeActor(format, read);
}
