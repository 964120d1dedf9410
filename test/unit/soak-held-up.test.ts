import { describe, expect, it } from "vitest";
import { holdUps, type RunTrack } from "../soak/held-up.js";

// The 30-minute soak's (seed 11) SIGKILL of soak-node-3 at +812 s and the SIGSTOP of soak-node-2
// 15.3 s later, with the two runs of theirs the report named, as the soak's files held them.
const kill = { firedAt: 1796600315416, downMs: 3080, nextFiredAt: 1796600330680 };
const stop = { firedAt: 1796600330680, downMs: 2887, nextFiredAt: 1796600345181 };

/** A wide run whose start the kill held up: its start request at +242 ms was answered at +2,622 ms. */
const wide: RunTrack = {
  id: "soak-c_e54d9b9b3f2ca4d476d5f591090da150",
  measured: true,
  start: 1796600315658,
  started: 1796600318038,
  end: 1796600318265,
  progress: [1796600318038, 1796600318042, 1796600318073, 1796600318232, 1796600318265],
  soakStarted: true,
  read: true,
};
/**
 * A child started 15.1 s after the kill, 139 ms before soak-node-2 was stopped with its first
 * attempt offered there: the stop held it (`worker_lost` when soak-node-1 took its partition).
 */
const child: RunTrack = {
  id: "soak-a_72954036a2284bb250b9e4fe95112e9d",
  measured: true,
  start: 1796600330541,
  started: 1796600330541,
  end: 1796600333550,
  progress: [1796600330541, 1796600333464, 1796600333478, 1796600333509, 1796600333519, 1796600333550],
  soakStarted: false,
  read: true,
};

describe("the soak's held-up runs of a fault", () => {
  it("a run that starts just before the next fault and is held by it is that fault's, not the kill's (the kill's figure was 18,048 ms)", () => {
    const byKill = holdUps(kill, [wide, child]);
    expect(byKill.held).toEqual([{ run: wide.id, waitedFromMs: 242, movedAtMs: 2622 }]);
    expect(byKill.movingAgainMs).toBe(2622);
    const byStop = holdUps(stop, [wide, child]);
    expect(byStop.held).toEqual([{ run: child.id, waitedFromMs: 0, movedAtMs: 2784 }]);
  });

  it("a run held up over 1 s before the next fault stays the fault's, however long it then waits", () => {
    const long: RunTrack = {
      ...child,
      id: "long",
      start: kill.nextFiredAt - 1_500,
      started: kill.nextFiredAt - 1_500,
      progress: [kill.nextFiredAt - 1_500, kill.nextFiredAt + 2_000],
    };
    expect(holdUps(kill, [long]).movingAgainMs).toBe(kill.nextFiredAt + 2_000 - kill.firedAt);
  });

  it("a run waiting at the fault counts from the fault; one that never moves again is stuck, not held", () => {
    const waiting: RunTrack = {
      ...wide,
      id: "waiting",
      start: kill.firedAt - 500,
      started: kill.firedAt - 480,
      end: undefined,
      progress: [kill.firedAt - 480, kill.firedAt + 8_013],
    };
    const never: RunTrack = { ...waiting, id: "never", progress: [kill.firedAt - 480] };
    const found = holdUps(kill, [waiting, never]);
    expect(found.held).toEqual([{ run: "waiting", waitedFromMs: 0, movedAtMs: 8_013 }]);
    expect(found.stuck).toBe(1);
  });

  it("a started run of an unmeasured kind (a sleeper) is left out; its start held up by the fault counts", () => {
    const sleeping: RunTrack = {
      ...wide,
      id: "sleeping",
      measured: false,
      start: kill.firedAt - 2_000,
      started: kill.firedAt - 1_990,
      progress: [kill.firedAt + 5_000],
    };
    const startHeld: RunTrack = { ...wide, id: "start-held", measured: false, start: kill.firedAt + 100, started: kill.firedAt + 3_100, progress: [] };
    expect(holdUps(kill, [sleeping, startHeld]).held).toEqual([{ run: "start-held", waitedFromMs: 100, movedAtMs: 3_100 }]);
  });
});
