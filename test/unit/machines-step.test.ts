import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  DEFAULT_RETRY_POLICY,
  FENCED_STEP_OPS,
  RetryPolicySchema,
  STEP_LEGAL_FROM,
  STEP_NON_TERMINAL,
  STEP_OPS,
  STEP_OP_TARGETS,
  STEP_STATUSES,
  STEP_TERMINAL,
  StepOpEventSchema,
  applyStepOp,
  isStepTerminal,
  pendingStep,
  retryDelay,
  stepShapeViolations,
  type RetryPolicy,
  type StepOp,
  type StepOpEvent,
  type StepState,
  type StepStatus,
} from "../../machines/step/index.js";

const T0 = 1_700_000_000_000;
const policy: RetryPolicy = { max_attempts: 3, backoff_ms: 200, max_backoff_ms: 10_000 };
const transient = { code: "upstream_timeout", message: "timed out", retryable: true };
const permanent = { code: "bad_input", message: "no", retryable: false };

/** A well-formed state in `status`: the step is on its first attempt when it has been leased. */
function stepIn(status: StepStatus): StepState {
  const base = pendingStep();
  switch (status) {
    case "pending":
      return base;
    case "ready":
      return { ...base, status };
    case "leased":
    case "running":
      return { ...base, status, attempt: 1, lease_epoch: 1, started_at: T0 };
    default:
      return { ...base, status, attempt: 1, lease_epoch: 1, started_at: T0, ended_at: T0 + 1 };
  }
}

/** The event for `op` carrying the state's current fence. */
function opEvent(op: StepOp, state: StepState, now: number, error = transient): StepOpEvent {
  const fence = { attempt: state.attempt, lease_epoch: state.lease_epoch };
  switch (op) {
    case "start":
    case "succeed":
      return { op, now, ...fence };
    case "fail":
      return { op, now, ...fence, error, policy };
    default:
      return { op, now } as StepOpEvent;
  }
}

const cells = STEP_STATUSES.flatMap((status) => STEP_OPS.map((op) => ({ status, op, legal: STEP_LEGAL_FROM[op].has(status) })));

describe("the step table", () => {
  it("has 56 cells and no entry names a terminal status", () => {
    expect(cells).toHaveLength(56);
    for (const op of STEP_OPS) for (const s of STEP_LEGAL_FROM[op]) expect(STEP_NON_TERMINAL.has(s)).toBe(true);
    expect([...STEP_TERMINAL].every(isStepTerminal)).toBe(true);
    expect(Object.fromEntries(STEP_OPS.map((op) => [op, [...STEP_LEGAL_FROM[op]].sort()]))).toEqual({
      ready: ["pending"],
      lease: ["ready"],
      start: ["leased"],
      succeed: ["leased", "running"],
      fail: ["leased", "running"],
      skip: ["pending", "ready"],
      cancel: ["leased", "pending", "ready", "running"],
    });
  });
});

describe.each(cells)("$status × $op", ({ status, op, legal }) => {
  const before = stepIn(status);
  const now = T0 + 1_000;
  const event = opEvent(op, before, now);
  const result = applyStepOp(before, event);

  if (legal) {
    it("moves to one of the op's targets and keeps the step's shape", () => {
      expect(result.outcome).toBe("moved");
      if (result.outcome !== "moved") return;
      expect(STEP_OP_TARGETS[op]).toContain(result.state.status);
      expect(stepShapeViolations(result.state)).toEqual([]);
      expect(result.state.ended_at).toBe(STEP_TERMINAL.has(result.state.status) ? now : null);
      if (op === "lease") expect(result.state).toMatchObject({ attempt: before.attempt + 1, lease_epoch: before.lease_epoch + 1, started_at: now });
      else expect(result.state.lease_epoch).toBe(before.lease_epoch);
      if (op === "fail") expect(result).toMatchObject({ retried: true, state: { status: "ready", not_before: now + 200, last_error: transient } });
    });

    if (FENCED_STEP_OPS.has(op)) {
      it("is refused stale_lease with another attempt or lease epoch", () => {
        for (const stale of [
          { attempt: before.attempt, lease_epoch: before.lease_epoch - 1 },
          { attempt: before.attempt + 1, lease_epoch: before.lease_epoch },
        ]) {
          const zombie = { ...event, ...stale } as StepOpEvent;
          expect(applyStepOp(before, zombie)).toEqual({ outcome: "refused", code: "stale_lease", from: status, op, current: { attempt: 1, lease_epoch: 1 } });
        }
      });
    }
  } else {
    it("is refused with illegal_transition and changes nothing", () => {
      expect(result).toEqual({ outcome: "refused", code: "illegal_transition", from: status, op });
      expect(before).toEqual(stepIn(status));
    });
  }
});

function moved(state: StepState, event: StepOpEvent): StepState {
  const result = applyStepOp(state, event);
  if (result.outcome !== "moved") throw new Error(`expected ${event.op} to move from ${state.status}, got ${JSON.stringify(result)}`);
  return result.state;
}

describe("attempts, leases and retries", () => {
  it("a retry goes back to ready with not_before, an early lease is refused, and a later lease mints a new epoch", () => {
    let s = moved(moved(pendingStep(), { op: "ready", now: T0 }), { op: "lease", now: T0 });
    s = moved(s, { op: "start", now: T0 + 1, attempt: 1, lease_epoch: 1 });
    const failed = applyStepOp(s, { op: "fail", now: T0 + 10, attempt: 1, lease_epoch: 1, error: transient, policy });
    expect(failed).toMatchObject({
      outcome: "moved",
      retried: true,
      state: { status: "ready", not_before: T0 + 210, attempt: 1, lease_epoch: 1, last_error: transient },
    });
    if (failed.outcome !== "moved") return;
    expect(applyStepOp(failed.state, { op: "lease", now: T0 + 209 })).toEqual({
      outcome: "refused",
      code: "not_before",
      from: "ready",
      op: "lease",
      not_before: T0 + 210,
    });
    expect(applyStepOp(failed.state, { op: "lease", now: T0 + 209 }).outcome).toBe("refused");
    const again = moved(failed.state, { op: "lease", now: T0 + 210 });
    expect(again).toMatchObject({ status: "leased", attempt: 2, lease_epoch: 2, not_before: null, started_at: T0 });
    // The first attempt's holder is now a zombie.
    expect(applyStepOp(again, { op: "succeed", now: T0 + 300, attempt: 1, lease_epoch: 1 })).toMatchObject({ outcome: "refused", code: "stale_lease" });
    expect(applyStepOp(again, { op: "succeed", now: T0 + 300, attempt: 2, lease_epoch: 2 })).toMatchObject({
      outcome: "moved",
      state: { status: "succeeded", ended_at: T0 + 300 },
    });
  });

  it("the last allowed attempt's failure is terminal, and so is a non-retryable one", () => {
    let s = moved(pendingStep(), { op: "ready", now: T0 });
    let now = T0;
    for (let attempt = 1; attempt <= policy.max_attempts; attempt++) {
      now = (s.not_before ?? now) + 1;
      s = moved(s, { op: "lease", now });
      const result = applyStepOp(s, { op: "fail", now, attempt, lease_epoch: s.lease_epoch, error: transient, policy });
      if (result.outcome !== "moved") throw new Error("refused");
      expect(result.retried).toBe(attempt < policy.max_attempts);
      s = result.state;
    }
    expect(s).toMatchObject({ status: "failed", attempt: 3, ended_at: now, not_before: null });
    const leased = moved(moved(pendingStep(), { op: "ready", now: T0 }), { op: "lease", now: T0 });
    expect(applyStepOp(leased, { op: "fail", now: T0 + 1, attempt: 1, lease_epoch: 1, error: permanent, policy })).toMatchObject({
      outcome: "moved",
      retried: false,
      state: { status: "failed", last_error: permanent },
    });
  });

  it("terminal states absorb", () => {
    for (const status of STEP_TERMINAL) {
      const state = stepIn(status);
      for (const op of STEP_OPS) expect(applyStepOp(state, opEvent(op, state, T0 + 5)).outcome).toBe("refused");
    }
  });
});

describe("retry policy", () => {
  it("doubles from backoff_ms by default and caps at max_backoff_ms", () => {
    expect([1, 2, 3, 4, 5, 6, 7, 8].map((a) => retryDelay(policy, a))).toEqual([200, 400, 800, 1600, 3200, 6400, 10_000, 10_000]);
    expect(retryDelay({ ...policy, multiplier: 1.5 }, 3)).toBe(450);
    expect(retryDelay({ ...policy, multiplier: 1 }, 9)).toBe(200);
    expect(retryDelay(policy, 0)).toBe(200);
    expect(retryDelay(policy, 5_000)).toBe(10_000);
  });

  it("the schema fills defaults and refuses nonsense", () => {
    expect(RetryPolicySchema.parse({})).toEqual(DEFAULT_RETRY_POLICY);
    expect(RetryPolicySchema.safeParse({ max_attempts: 0 }).success).toBe(false);
    expect(RetryPolicySchema.safeParse({ backoff_ms: -1 }).success).toBe(false);
    expect(RetryPolicySchema.safeParse({ multiplier: 0.5 }).success).toBe(false);
  });

  it("event schemas parse every op and fill the policy defaults", () => {
    for (const op of STEP_OPS) {
      const e = opEvent(op, stepIn("running"), T0);
      expect(StepOpEventSchema.parse(e)).toEqual(e);
    }
    const parsed = StepOpEventSchema.parse({ op: "fail", now: T0, attempt: 1, lease_epoch: 1, error: transient, policy: {} });
    expect(parsed).toMatchObject({ policy: DEFAULT_RETRY_POLICY });
    expect(StepOpEventSchema.safeParse({ op: "succeed", now: T0 }).success).toBe(false);
  });
});

describe("property", () => {
  const opArb = fc.record({
    op: fc.constantFrom(...STEP_OPS),
    dt: fc.nat({ max: 5_000 }),
    /** 0: the current fence; otherwise an older one (a zombie). */
    staleness: fc.oneof(fc.constant(0), fc.constant(0), fc.integer({ min: 1, max: 3 })),
    retryable: fc.boolean(),
  });

  it("lease_epoch never decreases, attempt never exceeds max_attempts, terminal states absorb", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 4 }), fc.array(opArb, { maxLength: 60 }), (maxAttempts, ops) => {
        const p: RetryPolicy = { max_attempts: maxAttempts, backoff_ms: 100, max_backoff_ms: 1_000 };
        let state = pendingStep();
        let now = T0;
        for (const { op, dt, staleness, retryable } of ops) {
          now += dt;
          const fence = { attempt: state.attempt - staleness, lease_epoch: state.lease_epoch - staleness };
          const event: StepOpEvent =
            op === "start" || op === "succeed"
              ? { op, now, ...fence }
              : op === "fail"
                ? { op, now, ...fence, policy: p, error: { ...transient, retryable } }
                : ({ op, now } as StepOpEvent);
          const result = applyStepOp(state, event);
          if (staleness > 0 && FENCED_STEP_OPS.has(op)) expect(result.outcome).toBe("refused");
          if (STEP_TERMINAL.has(state.status)) expect(result.outcome).toBe("refused");
          const next = result.outcome === "moved" ? result.state : state;
          expect(next.lease_epoch).toBeGreaterThanOrEqual(state.lease_epoch);
          expect(next.attempt).toBeLessThanOrEqual(maxAttempts);
          expect(stepShapeViolations(next)).toEqual([]);
          state = next;
        }
      }),
      { numRuns: 500 },
    );
  });
});
