/**
 * A scheduler priority level shares its backing array between versions (machines/scheduler/
 * level.ts): a ticket joining the end is pushed onto it, the first one leased moves the view on.
 * Checked here over random branching histories against plain copied arrays: every version keeps
 * reading what it held when it was made, whichever versions changed after it, and its flags
 * (deadline count, seq order) are true of what it holds.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { emptyLevel, inserted, ticketsOf, without, type Level } from "../../machines/scheduler/level.js";

interface Q {
  ticket: { id: string; enqueued_at: number; deadline: number | null };
  seq: number;
}

type Op = { op: "insert"; from: number; at: number; deadline: boolean } | { op: "remove"; from: number; index: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ op: fc.constant("insert" as const), from: fc.nat(), at: fc.nat(20), deadline: fc.boolean() }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("remove" as const), from: fc.nat(), index: fc.nat(8) }) },
);

/** The model: (enqueued_at, seq) order, a new entry after the ones enqueued at or before its time. */
function modelInsert(model: readonly Q[], entry: Q): Q[] {
  const i = model.findIndex((q) => q.ticket.enqueued_at > entry.ticket.enqueued_at);
  return i < 0 ? [...model, entry] : [...model.slice(0, i), entry, ...model.slice(i)];
}

describe("a scheduler level shared between versions", () => {
  it("every version reads what it held when made, whatever was done to the others", () => {
    fc.assert(
      fc.property(fc.array(opArb, { minLength: 1, maxLength: 80 }), fc.boolean(), (ops, linear) => {
        const versions: { level: Level<Q>; model: Q[] }[] = [{ level: emptyLevel<Q>(), model: [] }];
        let seq = 0;
        for (const o of ops) {
          // Mostly the latest version (as the dispatcher uses them), sometimes an older one.
          const from = versions[linear ? versions.length - 1 : o.from % versions.length]!;
          if (o.op === "insert") {
            const entry: Q = { ticket: { id: `t${seq}`, enqueued_at: o.at, deadline: o.deadline ? o.at + 5 : null }, seq: seq++ };
            versions.push({ level: inserted(from.level, entry), model: modelInsert(from.model, entry) });
          } else if (from.model.length > 0) {
            const i = o.index % from.model.length;
            versions.push({ level: without(from.level, i), model: from.model.filter((_, j) => j !== i) });
          }
          for (const v of versions) {
            expect(ticketsOf(v.level)).toEqual(v.model);
            expect(v.level.size).toBe(v.model.length);
            expect(v.level.deadlines).toBe(v.model.filter((q) => q.ticket.deadline !== null).length);
            if (v.level.bySeq) for (let i = 1; i < v.model.length; i++) expect(v.model[i]!.seq).toBeGreaterThan(v.model[i - 1]!.seq);
          }
        }
      }),
      { numRuns: 300 },
    );
  });

  it("a level that flows for long holds only what it holds: its backing array is compacted", () => {
    let level = emptyLevel<Q>();
    for (let i = 0; i < 10_000; i++) {
      level = inserted(level, { ticket: { id: `t${i}`, enqueued_at: i, deadline: null }, seq: i });
      if (i >= 4) level = without(level, 0);
    }
    expect(level.size).toBe(4);
    expect(level.items.length).toBeLessThanOrEqual(2 * 32 + 4);
  });
});
