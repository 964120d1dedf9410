import { eventLoopSpin, SPIN_OFF, type SpinPolicy } from "../runtime/index.js";
import { envSetting } from "./env-setting.js";

/**
 * The default spin: poll for an answer expected within 0.25 ms, for up to 1 ms after such a request,
 * while at most four are outstanding (runtime/event-loop-spin.ts). It costs CPU only while an answer
 * is expected soon, so it assumes no core count. docs/tuning.md (`RUNWAY_EVENT_LOOP_SPIN`).
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
