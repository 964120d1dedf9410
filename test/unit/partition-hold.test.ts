import { describe, expect, it } from "vitest";
import { PartitionHold, type HoldSource } from "../../actors/engine/partition-hold.js";
import { decisions } from "../../machines/execution/reduce.js";
import { ATTEMPT_INTERRUPTED, LEASE_LAPSED, type RunContext } from "../../machines/index.js";
import { queuedLifecycle } from "../../machines/run/index.js";
import { deepFreeze, executes, plan, rootSeed } from "./run-driver.js";

/** A node's lease and partitions as the test sets them; time only moves when the test says. */
interface World {
  now: number;
  holdsUntil: number;
  lapses: number;
  epochs: Map<number, number>;
  renew(until: number, lapse?: boolean): void;
  source: HoldSource;
  listeners: Set<() => void>;
}

function world(): World {
  const listeners = new Set<() => void>();
  const w: World = {
    now: 0,
    holdsUntil: 3_000,
    lapses: 0,
    epochs: new Map<number, number>([[0, 11]]),
    renew(until: number, lapse = false) {
      if (lapse) w.lapses++;
      w.holdsUntil = until;
      for (const l of [...listeners]) l();
    },
    source: {
      holdsUntil: () => w.holdsUntil,
      lapses: () => w.lapses,
      onRenewal: (l: () => void) => {
        listeners.add(l);
        return () => listeners.delete(l);
      },
      epochOf: (p: number) => w.epochs.get(p),
      partitionOfRun: () => 0,
      monotonic: () => w.now,
    },
    listeners,
  };
  return w;
}

const timing = { marginMs: 500, maxWaitMs: 60_000 };

describe("41 the partition hold an attempt starts and calls under", () => {
  it("stands at once while the lease is fresh (less the margin)", () => {
    const w = world();
    const hold = new PartitionHold(w.source, timing);
    const token = hold.take("r1");
    expect(token).toEqual({ partition: 0, epoch: 11, lapses: 0 });
    w.now = 2_499;
    expect(hold.held(token)).toBe(true);
  });

  it("a stale lease waits for the next renewal: renewed, it stands; lapsed, it does not (even once taken again)", async () => {
    const w = world();
    const hold = new PartitionHold(w.source, timing);
    const token = hold.take("r1");
    w.now = 2_600;
    const renewed = hold.held(token);
    expect(renewed).toBeInstanceOf(Promise);
    w.renew(5_600);
    await expect(renewed).resolves.toBe(true);
    expect(w.listeners.size).toBe(0);

    w.now = 9_000;
    const lapsed = hold.held(token);
    // The renewal found the record gone: renewing it again gives a fresh lease, but not the partitions held before.
    w.renew(12_000, true);
    await expect(lapsed).resolves.toBe(false);
    expect(hold.held(token)).toBe(false);
  });

  it("does not stand once the partition is served under another epoch, or not at all", () => {
    const w = world();
    const hold = new PartitionHold(w.source, timing);
    const token = hold.take("r1");
    w.epochs.set(0, 12);
    expect(hold.held(token)).toBe(false);
    w.epochs.delete(0);
    expect(hold.take("r1")).toBeUndefined();
    expect(hold.held(undefined)).toBe(false);
    expect(hold.startBy(undefined)).toBe(0);
  });

  it("a stale lease no renewal settles is given up after the wait", async () => {
    const w = world();
    const hold = new PartitionHold(w.source, { marginMs: 500, maxWaitMs: 20 });
    const token = hold.take("r1");
    w.now = 5_000;
    await expect(hold.held(token)).resolves.toBe(false);
    expect(w.listeners.size).toBe(0);
  });

  it("startBy is the hold's end on the wall clock", () => {
    const w = world();
    const hold = new PartitionHold(w.source, timing);
    const token = hold.take("r1");
    w.now = 1_000;
    const before = Date.now();
    const by = hold.startBy(token);
    // 3,000 − 500 − 1,000 ms from now.
    expect(by).toBeGreaterThanOrEqual(before + 1_500);
    expect(by).toBeLessThanOrEqual(Date.now() + 1_500);
  });
});

describe("41 an attempt reported lease_lapsed or attempt_interrupted", () => {
  it("is the platform's failure: a step allowed one attempt is retried at once, outside its own retries", () => {
    const p = plan({
      name: "w",
      nodes: [{ id: "a", kind: "code", handler: "h", retry: { max_attempts: 1, backoff_ms: 100, max_backoff_ms: 100, multiplier: 2 } }],
    });
    const created = decisions.create({ run: null }, { type: "run.create", run: rootSeed({ id: "t_1", root_run_id: "t_1" }), now: 10, plan: p } as never);
    const run: RunContext = deepFreeze({ ...created.context.run!, lifecycle: { ...queuedLifecycle(), status: "running", started_at: 10 } });
    const request = executes(created.effects as never)[0]!;
    const failed = (code: string) =>
      decisions.result({ run }, {
        type: "step.result",
        node: "a",
        attempt: request.attempt,
        lease_epoch: request.lease_epoch,
        outcome: "failed",
        error: { code, message: "m", retryable: true },
        now: 20,
        plan: p,
      } as never);
    for (const code of [LEASE_LAPSED, ATTEMPT_INTERRUPTED]) {
      const lapsed = failed(code);
      const again = executes(lapsed.effects as never);
      expect(again).toHaveLength(1);
      expect(again[0]).toMatchObject({ node: "a", attempt: 2 });
      expect(lapsed.context.run!.nodes.a!.step!.status).toBe("ready");
    }
    // The same failure from the handler uses up the node's one attempt.
    const own = failed("retryable");
    expect(executes(own.effects as never)).toHaveLength(0);
    expect(own.context.run!.nodes.a!.s).toBe("failed");
  });
});
