export { ScheduleNameSchema, ScheduleSpecSchema, MissedPolicySchema, MIN_EVERY_MS, MAX_CATCH_UP, type MissedPolicy, type ScheduleSpec } from "./spec.js";
export {
  everyTiming,
  firingPlan,
  nextDue,
  wakeAt,
  createdSchedule,
  replacedSchedule,
  pausedSchedule,
  resumedSchedule,
  firedSchedule,
  MISFIRE_GRACE_MS,
  type Timing,
  type ScheduleState,
  type FiringPlan,
  type FiringResult,
} from "./firings.js";
