import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  LEGAL_FROM,
  NON_TERMINAL,
  RUN_OPS,
  RUN_OP_TARGET,
  RUN_STATUSES,
  RunOpEventSchema,
  TERMINAL,
  applyRunOp,
  isTerminal,
  queuedLifecycle,
  runShapeViolations,
  type RunLifecycle,
  type RunOp,
  type RunOpEvent,
  type RunStatus,
} from "../../machines/run/index.js";
import { executionMachine } from "../../machines/index.js";
import { reachableFrom } from "../../machines/execution/index.js";

const T0 = 1_700_000_000_000;
const HOUR = 3_600_000;
const root = { id: "r1", root_run_id: "r1", parent_run_id: null };

/** A well-formed lifecycle in `status`, as the primitive would have left it. */
function lifecycleIn(status: RunStatus): RunLifecycle {
  const base = { ...queuedLifecycle(), status };
  switch (status) {
    case "queued":
      return base;
    case "running":
      return { ...base, started_at: T0 };
    case "waiting":
      return { ...base, started_at: T0, waiting_on: "approval", waiting_ref: "appr-1", waiting_expires_at: T0 + HOUR };
    default:
      return { ...base, started_at: T0, ended_at: T0 + 1 };
  }
}

function opEvent(op: RunOp, now: number): RunOpEvent {
  return op === "mark_waiting" ? { op, now, on: "event", ref: "node-7", expires_at: now + HOUR } : ({ op, now } as RunOpEvent);
}

type StateNodeLike = {
  key: string;
  states: Record<string, StateNodeLike>;
  always?: { target?: { key: string }[] }[];
  transitions: Map<string, { target?: { key: string }[] }[]>;
};
const machineRoot = (executionMachine as unknown as { root: StateNodeLike }).root;

/** The machine state of `status`: a live status is a child of the compound `live` state, an ended one a top-level state. */
function stateNodeOf(status: RunStatus): StateNodeLike {
  return NON_TERMINAL.has(status) ? machineRoot.states.live!.states[status]! : machineRoot.states[status]!;
}

/** The statuses the production run machine moves to from `status` (its generated structure). */
function movesOf(status: RunStatus): RunStatus[] {
  const node = stateNodeOf(status);
  const targets = new Set<string>();
  for (const t of node.always ?? []) for (const n of t.target ?? []) targets.add(n.key);
  for (const ts of node.transitions.values()) for (const t of ts) for (const n of t.target ?? []) targets.add(n.key);
  targets.delete(status);
  return RUN_STATUSES.filter((s) => targets.has(s));
}

const cells = RUN_STATUSES.flatMap((status) => RUN_OPS.map((op) => ({ status, op, legal: LEGAL_FROM[op].has(status) })));

describe("the run table", () => {
  it("has 48 cells and no entry names a terminal status", () => {
    expect(cells).toHaveLength(48);
    for (const op of RUN_OPS) for (const s of LEGAL_FROM[op]) expect(NON_TERMINAL.has(s)).toBe(true);
    expect(cells.filter((c) => c.legal)).toHaveLength(3 + 3 + 2 + 1 + 2 + 3 + 3 + 1);
    expect([...TERMINAL].every(isTerminal)).toBe(true);
    expect([...NON_TERMINAL].some(isTerminal)).toBe(false);
  });

  it("matches the seed exactly", () => {
    const table = Object.fromEntries(RUN_OPS.map((op) => [op, [...LEGAL_FROM[op]].sort()]));
    expect(table).toEqual({
      admit: ["waiting"],
      claim: ["queued", "running", "waiting"],
      mark_waiting: ["queued", "running", "waiting"],
      advance: ["running", "waiting"],
      resume: ["waiting"],
      succeed: ["running", "waiting"],
      fail: ["queued", "running", "waiting"],
      cancel: ["queued", "running", "waiting"],
    });
  });
});

describe.each(cells)("$status × $op", ({ status, op, legal }) => {
  const before = lifecycleIn(status);
  const event = opEvent(op, T0 + 2 * HOUR);
  const result = applyRunOp(before, event);

  if (legal) {
    it("moves to the op's target and keeps every shape invariant", () => {
      expect(result.outcome).toBe("moved");
      if (result.outcome !== "moved") return;
      const target = RUN_OP_TARGET[op] ?? status;
      expect(result.state.status).toBe(target);
      expect(runShapeViolations({ ...result.state, ...root })).toEqual([]);
      if (op === "advance") expect(result.state).toEqual(before);
      if (op === "mark_waiting") expect(result.state).toMatchObject({ waiting_on: "event", waiting_ref: "node-7", waiting_expires_at: T0 + 3 * HOUR });
      if (target !== "waiting") expect(result.state).toMatchObject({ waiting_on: null, waiting_ref: null, waiting_expires_at: null });
      expect(result.state.ended_at).toBe(TERMINAL.has(target) ? event.now : null);
    });

    // Generated only where the op moves: a cell whose op keeps its status has no move to find.
    const to = RUN_OP_TARGET[op] ?? status;
    if (to !== status)
      it("the production run machine has a move from this status to the op's target", () => {
        expect(movesOf(status)).toContain(to);
      });
  } else {
    it("is refused with illegal_transition and changes nothing", () => {
      expect(result).toEqual({ outcome: "refused", code: "illegal_transition", from: status, op });
      expect(before).toEqual(lifecycleIn(status));
    });

    if (TERMINAL.has(status))
      it("a terminal status has no move at all in the production run machine", () => {
        expect(movesOf(status)).toEqual([]);
      });
  }
});

describe("run lifecycle rules", () => {
  it("terminal states absorb: nothing moves them, through applyRunOp or the production machine", () => {
    for (const status of TERMINAL) {
      for (const op of RUN_OPS) {
        const state = lifecycleIn(status);
        expect(applyRunOp(state, opEvent(op, T0 + HOUR)).outcome).toBe("refused");
      }
      expect(movesOf(status)).toEqual([]);
    }
  });

  it("a re-claim after an hour of running leaves started_at unchanged", () => {
    const first = applyRunOp(queuedLifecycle(), { op: "claim", now: T0 });
    expect(first.outcome === "moved" && first.state.started_at).toBe(T0);
    if (first.outcome !== "moved") return;
    const again = applyRunOp(first.state, { op: "claim", now: T0 + HOUR });
    expect(again).toEqual({ outcome: "moved", state: { ...first.state, started_at: T0 } });
  });

  it("cancelling a waiting run clears the waiting three, and the shape check accepts it", () => {
    const result = applyRunOp(lifecycleIn("waiting"), { op: "cancel", now: T0 + HOUR });
    expect(result.outcome).toBe("moved");
    if (result.outcome !== "moved") return;
    expect(result.state).toMatchObject({ status: "cancelled", waiting_on: null, waiting_ref: null, waiting_expires_at: null, ended_at: T0 + HOUR });
    expect(runShapeViolations({ ...result.state, ...root })).toEqual([]);
  });

  it("claim of a run waiting on an admission approval clears waiting_on and keeps the shape", () => {
    const parked = applyRunOp(queuedLifecycle(), { op: "mark_waiting", now: T0, on: "approval", ref: null, expires_at: T0 + HOUR });
    expect(parked.outcome).toBe("moved");
    if (parked.outcome !== "moved") return;
    expect(parked.state.started_at).toBeNull();
    const claimed = applyRunOp(parked.state, { op: "claim", now: T0 + 5 });
    expect(claimed.outcome === "moved" && claimed.state).toEqual({ ...queuedLifecycle(), status: "running", started_at: T0 + 5 });
    if (claimed.outcome === "moved") expect(runShapeViolations({ ...claimed.state, ...root })).toEqual([]);
  });

  it("succeed cannot overwrite a run cancelled a moment earlier", () => {
    const cancelled = applyRunOp(lifecycleIn("running"), { op: "cancel", now: T0 + 1 });
    if (cancelled.outcome !== "moved") throw new Error("cancel refused");
    expect(applyRunOp(cancelled.state, { op: "succeed", now: T0 + 2 })).toMatchObject({ outcome: "refused", from: "cancelled", op: "succeed" });
  });

  it("advance on a waiting run keeps it pointed at what it waits on", () => {
    const waiting = lifecycleIn("waiting");
    expect(applyRunOp(waiting, { op: "advance", now: T0 + 9 })).toEqual({ outcome: "moved", state: waiting });
  });
});

describe("runShapeViolations", () => {
  const ok = { ...lifecycleIn("running"), ...root };
  it("accepts a well-formed row and names each broken invariant", () => {
    expect(runShapeViolations(ok)).toEqual([]);
    expect(runShapeViolations({ ...ok, waiting_on: "event" })).toEqual(["waiting_shape"]);
    expect(runShapeViolations({ ...ok, waiting_ref: "appr-1" })).toEqual(["waiting_ref"]);
    expect(runShapeViolations({ ...ok, waiting_expires_at: T0 })).toEqual(["wait_deadline"]);
    expect(runShapeViolations({ ...ok, ended_at: T0 })).toEqual(["ended_shape"]);
    expect(runShapeViolations({ ...ok, parent_run_id: "p1" })).toEqual(["tree_shape"]);
    expect(runShapeViolations({ ...ok, root_run_id: "other" })).toEqual(["tree_shape"]);
    expect(runShapeViolations({ ...ok, status: "retrying" as RunStatus })).toContain("status");
    expect(runShapeViolations({ ...lifecycleIn("waiting"), ...root, waiting_expires_at: null })).toEqual(["wait_deadline"]);
    expect(runShapeViolations({ ...lifecycleIn("waiting"), ...root, waiting_ref: null })).toEqual([]);
    expect(runShapeViolations({ ...lifecycleIn("failed"), ...root, ended_at: null })).toEqual(["ended_shape"]);
    expect(runShapeViolations({ ...ok, id: "c1", root_run_id: "r1", parent_run_id: "r1" })).toEqual([]);
  });
});

describe("event schemas", () => {
  it("parse every op, and refuse a wait without a deadline", () => {
    for (const op of RUN_OPS) {
      const e = opEvent(op, T0);
      expect(RunOpEventSchema.parse(e)).toEqual(e);
    }
    expect(RunOpEventSchema.safeParse({ op: "mark_waiting", now: T0, on: "approval", ref: null }).success).toBe(false);
    expect(RunOpEventSchema.safeParse({ op: "retry", now: T0 }).success).toBe(false);
    expect(RunOpEventSchema.safeParse({ op: "claim" }).success).toBe(false);
  });
});

describe("property", () => {
  const opArb = fc.oneof(
    fc.constantFrom(...RUN_OPS.filter((op) => op !== "mark_waiting")).map((op) => ({ op }) as { op: RunOp }),
    fc.record({
      op: fc.constant("mark_waiting" as const),
      on: fc.constantFrom("approval" as const, "event" as const, "delay" as const),
      ref: fc.option(fc.string({ minLength: 1, maxLength: 8 }), { nil: null }),
      wait: fc.nat({ max: 10 * HOUR }),
    }),
  );
  const stepsArb = fc.array(fc.record({ dt: fc.nat({ max: HOUR }), op: opArb }), { maxLength: 40 });

  it("any op sequence from queued keeps the shape and never leaves a terminal status", () => {
    fc.assert(
      fc.property(stepsArb, (steps) => {
        let state = queuedLifecycle();
        let now = T0;
        let startedAt: number | null = null;
        for (const { dt, op } of steps) {
          now += dt;
          const event: RunOpEvent =
            op.op === "mark_waiting" && "on" in op
              ? { op: "mark_waiting", now, on: op.on, ref: op.ref, expires_at: now + op.wait }
              : ({ op: op.op, now } as RunOpEvent);
          const wasTerminal = isTerminal(state.status);
          const before = state.status;
          const result = applyRunOp(state, event);
          if (result.outcome === "moved") state = result.state;
          // The production machine can follow every move the table made.
          if (result.outcome === "moved" && before !== state.status) expect(movesOf(before)).toContain(state.status);
          if (wasTerminal) expect(result.outcome).toBe("refused");
          expect(runShapeViolations({ ...state, ...root })).toEqual([]);
          if (startedAt !== null) expect(state.started_at).toBe(startedAt);
          startedAt = state.started_at;
        }
      }),
      { numRuns: 500 },
    );
  });
});

describe("the production run machine", () => {
  it("its states are the run's statuses, plus new; a live status moves to exactly what the table lets it reach", () => {
    const states = Object.keys(machineRoot.states).sort();
    expect(states).toEqual(["new", "live", ...TERMINAL].sort());
    expect(Object.keys(machineRoot.states.live!.states).sort()).toEqual([...NON_TERMINAL].sort());
    // Each op of the table legal from a live status is one transition, to the op's status; through them a live status reaches exactly what the table lets it reach.
    for (const status of NON_TERMINAL) {
      const byOp = RUN_OPS.filter((op) => LEGAL_FROM[op].has(status)).map((op) => RUN_OP_TARGET[op]);
      expect(movesOf(status)).toEqual(RUN_STATUSES.filter((s) => s !== status && byOp.includes(s)));
      const seen = new Set<RunStatus>();
      const visit = (s: RunStatus) => {
        for (const to of movesOf(s)) if (!seen.has(to)) (seen.add(to), visit(to));
      };
      visit(status);
      seen.delete(status);
      expect(RUN_STATUSES.filter((s) => seen.has(s))).toEqual(reachableFrom(status));
    }
    for (const status of TERMINAL) expect(movesOf(status)).toEqual([]);
  });

  it("each live status holds only its own events: its lifecycle moves, admission (queued) and the wait's deadline (waiting); the rest live once on `live`", () => {
    const own: Record<string, string[]> = { queued: ["run.admitted", "run.admission_refused"], running: [], waiting: ["timer.fired"] };
    for (const status of NON_TERMINAL) {
      const events = [...stateNodeOf(status).transitions.keys()];
      const legal = RUN_OPS.filter((op) => LEGAL_FROM[op].has(status) && RUN_OP_TARGET[op] !== null).map((op) => `lifecycle.${op}`);
      expect(events.filter((e) => e.startsWith("lifecycle.")).sort(), status).toEqual(legal.sort());
      expect(events.filter((e) => !e.startsWith("lifecycle.")).sort(), status).toEqual(own[status]!.sort());
    }
    const shared = [...machineRoot.states.live!.transitions.keys()];
    expect(
      shared.some((e) => e.startsWith("lifecycle.") || e === "run.admitted"),
      "live holds no status's own event",
    ).toBe(false);
    expect(shared).toEqual(expect.arrayContaining(["step.result", "run.cancel", "timer.fired", "run.signal"]));
  });
});
