import { eventLoopSpin, SPIN_OFF, type SpinPolicy } from "../runtime/index.js";
import { envSetting } from "./env-setting.js";

/**
 * A node's event loop polls for an answer it expects within 0.25 ms (the last answer on its
 * connection, or from its pool, came that soon), for up to a millisecond after such a request,
 * while it waits for at most four answers (runtime/event-loop-spin.ts). A sleeping loop wakes to
 * cold caches; four answers outstanding keep the loop busy by themselves, and an answer that
 * comes slower (a write the server syncs to disk) is waited for asleep. It assumes no core count:
 * it costs CPU only while an answer is expected soon. docs/tuning.md (`RUNWAY_EVENT_LOOP_SPIN`).
 */
export const SPIN_ON: SpinPolicy = { windowMs: 1, soonMs: 0.25, maxOutstanding: 4 };

export type EventLoopSpinSetting = "on" | "off";

/** `RUNWAY_EVENT_LOOP_SPIN`: unset or `on` spins as {@link SPIN_ON} says, `off` never. */
export const EVENT_LOOP_SPIN = envSetting<EventLoopSpinSetting>("RUNWAY_EVENT_LOOP_SPIN", ["on", "off"]);

/** Applies the setting to this process's event loop; returns how a log line or a benchmark says it. */
export function applyEventLoopSpin(setting: EventLoopSpinSetting): string {
  eventLoopSpin.configure(setting === "on" ? SPIN_ON : SPIN_OFF);
  return setting === "on"
    ? `on (answers expected within ${SPIN_ON.soonMs} ms, polled for up to ${SPIN_ON.windowMs} ms, at most ${SPIN_ON.maxOutstanding} at once)`
    : "off";
}
