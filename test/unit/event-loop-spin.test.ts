import { describe, expect, it } from "vitest";
import { applyEventLoopSpin, SPIN_ON } from "../../cluster/event-loop-spin.js";
import { eventLoopSpin, SPIN_OFF } from "../../runtime/index.js";
import { EventLoopSpin, type SpinScheduler } from "../../runtime/event-loop-spin.js";
import { waitFor } from "../harness/index.js";

/** A loop whose turns run when the test says, on a clock the test moves. */
class FakeLoop {
  at = 0;
  readonly #queued: (() => void)[] = [];
  readonly scheduler: SpinScheduler = { now: () => this.at, later: (tick) => void this.#queued.push(tick) };

  /** Pending turns (a spin has at most one). */
  get pending(): number {
    return this.#queued.length;
  }

  /** Runs the next turn, `ms` after the last. */
  turn(ms = 0.1): void {
    this.at += ms;
    this.#queued.shift()?.();
  }
}

describe("the event loop's spin (runtime/event-loop-spin.ts)", () => {
  it("off, a request never makes the loop poll", () => {
    const loop = new FakeLoop();
    const spin = new EventLoopSpin(SPIN_OFF, loop.scheduler);
    spin.register(() => 1);
    spin.expectAnswer();
    expect(loop.pending).toBe(0);
    expect(spin.spinning).toBe(false);
  });

  it("polls while an answer is outstanding, and parks once it came", () => {
    const loop = new FakeLoop();
    const spin = new EventLoopSpin({ windowMs: 1, soonMs: 1, maxOutstanding: 4 }, loop.scheduler);
    let outstanding = 1;
    spin.register(() => outstanding);
    spin.expectAnswer();
    for (let i = 0; i < 5; i++) loop.turn();
    expect(spin.turns).toBe(5);
    expect(loop.pending).toBe(1);
    outstanding = 0;
    loop.turn();
    expect(spin.spinning).toBe(false);
    expect(loop.pending).toBe(0);
    expect(spin.turns).toBe(5);
  });

  it("parks a window after the last request even if its answer has not come (a long handler)", () => {
    const loop = new FakeLoop();
    const spin = new EventLoopSpin({ windowMs: 1, soonMs: 1, maxOutstanding: 4 }, loop.scheduler);
    spin.register(() => 1);
    spin.expectAnswer();
    while (loop.pending > 0) loop.turn(0.25);
    expect(spin.spinning).toBe(false);
    expect(loop.at).toBeLessThanOrEqual(1.25);
    expect(spin.turns).toBe(3);
    // The next request polls again.
    spin.expectAnswer();
    expect(spin.spinning).toBe(true);
  });

  it("a request while it polls moves the window on, with one chain of turns", () => {
    const loop = new FakeLoop();
    const spin = new EventLoopSpin({ windowMs: 1, soonMs: 1, maxOutstanding: 4 }, loop.scheduler);
    spin.register(() => 1);
    spin.expectAnswer();
    loop.turn(0.9);
    spin.expectAnswer();
    spin.expectAnswer();
    expect(loop.pending).toBe(1);
    loop.turn(0.9);
    expect(spin.spinning).toBe(true);
    loop.turn(0.2);
    expect(spin.spinning).toBe(false);
  });

  it("parks as usual above its limit of outstanding answers, and counts every source", () => {
    const loop = new FakeLoop();
    const spin = new EventLoopSpin({ windowMs: 1, soonMs: 1, maxOutstanding: 4 }, loop.scheduler);
    spin.register(() => 3);
    const second = spin.register(() => 2);
    spin.expectAnswer();
    loop.turn();
    expect(spin.spinning).toBe(false);
    expect(spin.turns).toBe(0);
    second();
    spin.expectAnswer();
    loop.turn();
    expect(spin.turns).toBe(1);
  });

  it("waits parked for an answer expected later than soon (a handler that runs long, a write synced to disk)", () => {
    const loop = new FakeLoop();
    const spin = new EventLoopSpin({ windowMs: 1, soonMs: 1, maxOutstanding: 4 }, loop.scheduler);
    spin.register(() => 1);
    spin.expectAnswer(2);
    expect(loop.pending).toBe(0);
    spin.expectAnswer(0.5);
    expect(spin.spinning).toBe(true);
    // A request expected late while it polls: the spin ends at its next turn.
    loop.turn();
    spin.expectAnswer(2);
    loop.turn();
    expect(spin.spinning).toBe(false);
    expect(loop.pending).toBe(0);
  });

  it("on a real event loop, ends by itself when nothing answers", async () => {
    // A window a busy machine cannot skip before the first turn (5 ms was: a CI run saw 0 turns).
    const spin = new EventLoopSpin({ windowMs: 500, soonMs: 500, maxOutstanding: 4 });
    spin.register(() => 1);
    spin.expectAnswer();
    expect(spin.spinning).toBe(true);
    await waitFor(() => !spin.spinning, { timeoutMs: 5_000, describe: "the spin parked" });
    expect(spin.turns).toBeGreaterThan(0);
  });

  // How RUNWAY_EVENT_LOOP_SPIN is read: env-settings.test.ts.
  it("RUNWAY_EVENT_LOOP_SPIN: applying on or off configures the process's spin and says how", () => {
    try {
      expect(applyEventLoopSpin("on")).toBe("on (answers expected within 0.25 ms, polled for up to 1 ms, at most 4 at once)");
      expect(eventLoopSpin.policy).toEqual(SPIN_ON);
      expect(applyEventLoopSpin("off")).toBe("off");
      expect(eventLoopSpin.policy).toEqual(SPIN_OFF);
    } finally {
      eventLoopSpin.configure(SPIN_OFF);
    }
  });
});
