/**
 * A map's live items under copy-on-write (machines/execution/items.ts): a decision costs the
 * items it reaches, not the map's width. Checked over random decisions against what a full walk
 * would say: the previous state is never changed, the load carried through decisions (items in
 * flight, waiting) is the load counted afresh, and the keys a decision says it reached cover
 * every item that differs between the two states.
 */
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { addItem, changedKeys, draftMap, itemLoad, liveItem, newMap, removeItem, sealDrafts } from "../../machines/execution/items.js";
import type { ItemRun } from "../../machines/index.js";
import type { MapRun } from "../../machines/execution/index.js";

type Status = ItemRun["step"]["status"];
const STATUSES: Status[] = ["pending", "ready", "leased", "running", "succeeded", "failed"];

type Op =
  | { op: "reach"; key: number; status: Status; offered: boolean }
  | { op: "add"; key: number; status: Status; offered: boolean }
  | { op: "remove"; key: number }
  | { op: "load" };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ op: fc.constant("reach" as const), key: fc.nat(40), status: fc.constantFrom(...STATUSES), offered: fc.boolean() }),
  fc.record({ op: fc.constant("add" as const), key: fc.nat(40), status: fc.constantFrom(...STATUSES), offered: fc.boolean() }),
  fc.record({ op: fc.constant("remove" as const), key: fc.nat(40) }),
  fc.constant({ op: "load" as const }),
);

function item(status: Status, offered: boolean): ItemRun {
  return {
    step: { status, attempt: 1, lease_epoch: 1, not_before: null, last_error: null, started_at: null, ended_at: null },
    ...(offered ? { offered: 1 } : {}),
  } as ItemRun;
}

/** The load as a walk over every live item counts it. */
function counted(map: MapRun): { size: number; inFlight: number; waiting: number } {
  let inFlight = 0;
  let waiting = 0;
  for (const it of Object.values(map.live)) {
    if (it.step.status === "leased" || it.step.status === "running" || it.offered !== undefined) inFlight++;
    else if (it.step.status === "ready") waiting++;
  }
  return { size: Object.keys(map.live).length, inFlight, waiting };
}

/** One decision: a draft of `state`, the ops applied as the reducer would, sealed. */
function decide(state: MapRun, ops: Op[]): MapRun {
  const draft = draftMap(state);
  try {
    for (const o of ops) {
      if (o.op === "load") expect(itemLoad(draft)).toEqual(counted(draft));
      else if (o.op === "remove") removeItem(draft, String(o.key));
      else if (o.op === "add") addItem(draft, String(o.key), item(o.status, o.offered));
      else {
        const it = liveItem(draft, String(o.key));
        if (!it) continue;
        it.step = { ...it.step, status: o.status };
        if (o.offered) it.offered = 2;
        else delete it.offered;
      }
    }
  } finally {
    sealDrafts([draft]);
  }
  return draft;
}

describe("a map's live items, copied on write", () => {
  it("never changes the previous state; the carried load and the reached keys agree with a full walk", () => {
    fc.assert(
      fc.property(fc.array(fc.array(opArb, { maxLength: 12 }), { minLength: 1, maxLength: 25 }), fc.boolean(), (decisions, askFirst) => {
        // A map made by a decision (as a map node starts), then decided on again and again.
        let state = newMap(40);
        for (let i = 0; i < 10; i++) addItem(state, String(i), item(i % 2 ? "running" : "ready", i % 3 === 0));
        sealDrafts([state]);
        if (askFirst) expect(itemLoad(state)).toEqual(counted(state));
        for (const ops of decisions) {
          const frozen = structuredClone(state);
          const before = state;
          const next = decide(state, ops);
          expect(before).toEqual(frozen);
          expect(itemLoad(next)).toEqual(counted(next));
          const reached = changedKeys(before.live, next.live);
          if (next.live === before.live) expect(reached).toBeUndefined();
          else {
            expect(reached).toBeDefined();
            for (const key of new Set([...Object.keys(before.live), ...Object.keys(next.live)]))
              if (before.live[key] !== next.live[key]) expect(reached!.has(key)).toBe(true);
          }
          state = next;
        }
      }),
      { numRuns: 300 },
    );
  });

  it("a decision that reaches no item shares the index it started from", () => {
    const state = newMap(3);
    addItem(state, "0", item("running", false));
    sealDrafts([state]);
    const next = decide(state, [
      { op: "reach", key: 7, status: "ready", offered: false },
      { op: "remove", key: 9 },
    ]);
    expect(next.live).toBe(state.live);
  });

  it("what a sealed index remembers of its lineage does not keep the earlier indexes alive", async () => {
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    let state = newMap(2);
    addItem(state, "0", item("running", false));
    sealDrafts([state]);
    itemLoad(state);
    const first = new WeakRef(state.live);
    // A long-lived map: many decisions, each making a new index from the last.
    for (let i = 0; i < 50; i++) state = decide(state, [{ op: "reach", key: 0, status: i % 2 ? "running" : "ready", offered: false }, { op: "load" }]);
    expect(changedKeys(first.deref(), state.live)).toBeUndefined();
    const current = state.live;
    // WeakRefs are cleared between turns of the event loop, by a collection after them.
    for (let i = 0; i < 5 && first.deref() !== undefined; i++) {
      await new Promise((r) => setTimeout(r, 0));
      gc();
    }
    expect(first.deref()).toBeUndefined();
    expect(current).toBe(state.live);
  });
});
