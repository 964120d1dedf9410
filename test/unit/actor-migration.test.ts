// The migration hook of runtime/actor (issue 9, item 5): an actor kind declares the version of
// its stored snapshot and how to migrate an older one; the host applies it when it loads a
// record (see test/integration/actor-migration.test.ts for the host doing so on a real server).
import { describe, expect, it, vi } from "vitest";
import { initialTransition, transition, type AnyMachineSnapshot } from "xstate";
import { actorRecordCodec, defineActor, isFault, type ActorRecord } from "../../runtime/index.js";
import { currentSnapshot, snapshotVersion } from "../../runtime/actor/migrate.js";
import { packMsgpack } from "../../runtime/codec.js";
import { migrateTally, tallyMachineV1, tallyMachineV2, tallyV1, tallyV2, type TallyV2 } from "../fixtures/tally-actor.js";

/** A version-1 tally after `adds`, as its record stores it (XState's persisted snapshot). */
function storedV1(...adds: number[]): unknown {
  let [s] = initialTransition(tallyMachineV1, undefined);
  for (const by of adds) [s] = transition(tallyMachineV1, s, { type: "add", by, now: 1 });
  return tallyMachineV1.getPersistedSnapshot(s);
}

function faultCode(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    return isFault(err) ? err.code : String(err);
  }
  return undefined;
}

describe("actor snapshot versions and migrations", () => {
  it("a kind that declares no version writes version 1, and a record without a version is version 1", () => {
    expect(snapshotVersion(tallyV1)).toBe(1);
    expect(snapshotVersion(tallyV2)).toBe(2);
    const snapshot = storedV1(2);
    // Version 1 code reads a record written before versions existed as it is.
    expect(currentSnapshot(tallyV1, { snapshot })).toBe(snapshot);
  });

  it("a record of an older version is migrated, and the migrated snapshot resolves in today's machine and takes the next event", () => {
    const migrate = vi.fn(migrateTally);
    const kind = { ...tallyV2, migrations: { 1: migrate } };
    const snapshot = storedV1(2, 3);
    const current = currentSnapshot(kind, { snapshot });
    expect(migrate).toHaveBeenCalledWith(snapshot);
    expect((current as { context: TallyV2 }).context).toEqual({ total: 5, added: [] });
    const resolved: AnyMachineSnapshot = tallyMachineV2.resolveState(current as never);
    expect(resolved.value).toBe("open");
    const [next] = transition(tallyMachineV2, resolved, { type: "add", by: 4, now: 2 });
    expect(next.context).toEqual({ total: 9, added: [4] });
    // The same record migrated twice gives the same snapshot: loading may happen many times before a write.
    expect(currentSnapshot(kind, { snapshot })).toEqual(current);
  });

  it("a record of the current version is handed over as stored, without calling migrate", () => {
    const migrate = vi.fn(migrateTally);
    const snapshot = { status: "active", value: "open", context: { total: 1, added: [1] }, children: {}, historyValue: {} };
    expect(currentSnapshot({ ...tallyV2, migrations: { 1: migrate } }, { snapshot, version: 2 })).toBe(snapshot);
    expect(migrate).not.toHaveBeenCalled();
  });

  it("a record newer than the code is refused (record_too_new), and an older one without migrate (no_migration)", () => {
    const snapshot = { status: "active", value: "open", context: { total: 1, added: [] }, children: {}, historyValue: {} };
    expect(faultCode(() => currentSnapshot(tallyV1, { snapshot, version: 2 }))).toBe("record_too_new");
    expect(faultCode(() => currentSnapshot({ kind: "tally", version: 3 }, { snapshot, version: 2 }))).toBe("no_migration");
  });

  it("defineActor refuses a version that is not a positive integer, or above 1 without migrate", () => {
    const base = { kind: "tally", machine: tallyMachineV2, events: tallyV2.events };
    expect(faultCode(() => defineActor({ ...base, version: 0 }))).toBe("invalid_version");
    expect(faultCode(() => defineActor({ ...base, version: 1.5 }))).toBe("invalid_version");
    expect(faultCode(() => defineActor({ ...base, version: 2 }))).toBe("invalid_version");
    expect(defineActor({ ...base, version: 2, migrations: { 1: migrateTally } }).version).toBe(2);
  });

  it("the snapshot version sits in the record body beside the envelope's own: rw.actor@1 with it and without it", () => {
    const record: ActorRecord = {
      kind: "tally",
      id: "t",
      snapshot: storedV1(1),
      applied: [],
      outbox: [],
      transitions: 1,
      writer: { node: "n", epoch: 1 },
      at: 1,
      version: 2,
    };
    const bytes = actorRecordCodec.encode(record);
    expect(actorRecordCodec.decode(bytes)).toEqual({ ok: true, value: record });
    const { version: _version, ...before } = record;
    expect(actorRecordCodec.decode(packMsgpack({ s: "rw.actor", v: 1, b: before }))).toEqual({ ok: true, value: before });
    expect(actorRecordCodec.decode(packMsgpack({ s: "rw.actor", v: 1, b: { ...before, version: 0 } }))).toMatchObject({ ok: false, reason: "invalid_body" });
  });
});
