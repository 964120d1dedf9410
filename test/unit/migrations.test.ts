// The migration table (actors/records/migrations.ts), one test per step, driven from the stored records
// of test/fixtures/records/v1/ (byte for byte as version 1 stored them): every step brings every
// fixture of its version forward, deterministically, and the host's read (`decodeActor`) gives
// the same snapshot the steps give, one after the other.
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { executionMachine, isHeadV1, TERMINAL, type RunContext } from "../../machines/index.js";
import { actorRecordCodec, decodeActor, migratedSnapshot, type ActorRecord } from "../../runtime/index.js";
import { snapshotVersion } from "../../runtime/actor/migrate.js";
import { MIGRATIONS, RECORD_VERSIONS } from "../../actors/records/migrations.js";
import { RUN_RECORD } from "../../actors/run/actor.js";
import { TENANT_RECORD } from "../../actors/tenant/tenants.js";

const FIXTURES = resolve("test/fixtures/records/v1");
const index = JSON.parse(readFileSync(join(FIXTURES, "index.json"), "utf8")) as {
  records: { kind: string; id: string; file: string; snapshot_version: number; machine_state: string }[];
};

/** The fixtures of `kind` stored at snapshot version 1, decoded (the envelope only: their snapshots as stored). */
function stored(kind: string): { id: string; state: string; bytes: Uint8Array; record: ActorRecord }[] {
  return index.records
    .filter((r) => r.kind === kind && r.snapshot_version === 1)
    .map((r) => {
      const bytes = readFileSync(join(FIXTURES, r.file));
      const decoded = actorRecordCodec.decode(bytes);
      if (!decoded.ok) throw new Error(`fixture ${r.file}: ${decoded.detail}`);
      return { id: r.id, state: r.machine_state, bytes, record: decoded.value };
    });
}

type Persisted = { value: unknown; context: { run: RunContext | null } };
const runs = stored("run");

describe("the migration table", () => {
  it("has one step per earlier version of each kind, and the kinds' formats read from it", () => {
    for (const [kind, steps] of Object.entries(MIGRATIONS)) {
      const current = RECORD_VERSIONS[kind as keyof typeof RECORD_VERSIONS];
      expect(Object.keys(steps).map(Number).sort()).toEqual(Array.from({ length: current - 1 }, (_, i) => i + 1));
    }
    expect(snapshotVersion(RUN_RECORD)).toBe(RECORD_VERSIONS.run);
    expect(RUN_RECORD.migrations).toBe(MIGRATIONS.run);
    expect(snapshotVersion(TENANT_RECORD)).toBe(1);
  });

  it("run 1 → 2: every stored v1 head becomes bounded (no input, no inline outputs or items), its machine state and lifecycle kept", () => {
    expect(runs.length).toBeGreaterThan(10);
    for (const { id, record } of runs) {
      const before = record.snapshot as { value: unknown; context: { run: Record<string, unknown> } };
      expect(isHeadV1(before.context.run), id).toBe(true);
      const after = MIGRATIONS.run[1](record.snapshot) as Persisted;
      const run = after.context.run!;
      expect(isHeadV1(run), id).toBe(false);
      expect(run.v, id).toBe(2);
      expect("input" in run, id).toBe(false);
      for (const node of Object.values(run.nodes)) {
        expect("items" in node, id).toBe(false);
        expect("output" in node, id).toBe(false);
      }
      expect(after.value, id).toBe(before.value);
      expect(run.lifecycle, id).toEqual(before.context.run.lifecycle);
      // Pure: the same record migrated again (loaded many times before a write) gives the same snapshot.
      expect(MIGRATIONS.run[1](record.snapshot), id).toEqual(after);
    }
  });

  it("run 2 → 3: the machine's live/ended becomes the run's status, and the result (taken on by step 3) resolves in today's machine", () => {
    for (const { id, state, record } of runs) {
      const v2 = MIGRATIONS.run[1](record.snapshot) as Persisted;
      expect(v2.value, id).toBe(state);
      const v3 = MIGRATIONS.run[2](v2) as Persisted;
      const status = v2.context.run!.lifecycle.status;
      expect(v3.value, id).toBe(status);
      expect(TERMINAL.has(status), id).toBe(state === "ended");
      expect(executionMachine.resolveState(MIGRATIONS.run[3](v3) as never).value, id).toEqual(TERMINAL.has(status) ? status : { live: status });
      expect(MIGRATIONS.run[2](v2), id).toEqual(v3);
    }
  });

  it("run 3 → 4: a live status becomes a child of `live`, an ended one and `new` stay, and the result resolves in today's machine", () => {
    const statuses = new Set<string>();
    for (const { id, record } of runs) {
      const v3 = MIGRATIONS.run[2](MIGRATIONS.run[1](record.snapshot)) as Persisted;
      const status = v3.context.run!.lifecycle.status;
      statuses.add(status);
      const v4 = MIGRATIONS.run[3](v3) as Persisted;
      const expected = TERMINAL.has(status) ? status : { live: status };
      expect(v4.value, id).toEqual(expected);
      expect(v4.context, id).toBe(v3.context);
      const resolved = executionMachine.resolveState(v4 as never);
      expect(resolved.value, id).toEqual(expected);
      expect(resolved.matches((TERMINAL.has(status) ? status : { live: status }) as never), id).toBe(true);
      expect(MIGRATIONS.run[3](v3), id).toEqual(v4);
    }
    // The fixtures hold both a live and an ended run, so both branches of the step are exercised.
    expect([...statuses].some((s) => TERMINAL.has(s as never))).toBe(true);
    expect([...statuses].some((s) => !TERMINAL.has(s as never))).toBe(true);
    // The other live statuses and `new`, stored at version 3 as the machine wrote them.
    for (const value of ["queued", "waiting"]) expect((MIGRATIONS.run[3]({ value, context: { run: null } }) as Persisted).value).toEqual({ live: value });
    expect((MIGRATIONS.run[3]({ value: "new", context: { run: null } }) as Persisted).value).toBe("new");
  });

  it("run 4 → 5 changes nothing (5 marks journals that may hold an output as its receipt, which a node of format 4 must refuse)", () => {
    for (const { id, record } of runs) {
      const v4 = MIGRATIONS.run[3](MIGRATIONS.run[2](MIGRATIONS.run[1](record.snapshot)));
      expect(MIGRATIONS.run[4](v4), id).toBe(v4);
    }
  });

  it("the host's read decodes each stored run and runs the steps from its version: the snapshot the steps give, one after the other", () => {
    for (const { id, bytes, record } of runs) {
      const read = decodeActor(RUN_RECORD, { outcome: "found", message: { subject: `$KV.x.run.${id}`, seq: 7, data: bytes, headers: {} } });
      expect(read.outcome, id).toBe("found");
      if (read.outcome !== "found") continue;
      const chained = MIGRATIONS.run[4](MIGRATIONS.run[3](MIGRATIONS.run[2](MIGRATIONS.run[1](record.snapshot)))) as Persisted;
      expect(read.persisted, id).toEqual(chained);
      expect(read.snapshot, id).toEqual({ value: chained.value, context: chained.context });
      expect(read.revision, id).toBe(7);
      expect(migratedSnapshot(RUN_RECORD, record), id).toEqual(read.snapshot);
    }
  });

  it("the host's read hands a stored tenant over as stored (version 1 is current), and refuses what is not a record", () => {
    const tenants = stored("tenant");
    expect(tenants.length).toBeGreaterThan(5);
    for (const { id, bytes, record } of tenants) {
      const read = decodeActor(TENANT_RECORD, { outcome: "found", message: { subject: `$KV.x.tenant.${id}`, seq: 1, data: bytes, headers: {} } });
      expect(read.outcome === "found" && read.persisted, id).toEqual(record.snapshot);
    }
    const removed = decodeActor(RUN_RECORD, {
      outcome: "found",
      message: { subject: "s", seq: 2, data: new Uint8Array(), headers: { "KV-Operation": "PURGE" } },
    });
    expect(removed).toEqual({ outcome: "missing" });
    const garbage = decodeActor(RUN_RECORD, { outcome: "found", message: { subject: "s", seq: 3, data: new Uint8Array([1, 2, 3]), headers: {} } });
    expect(garbage).toMatchObject({ outcome: "corrupt", revision: 3 });
  });
});
