export { ScheduleService, scheduleView, MAX_SCHEDULES_PER_TENANT, type ScheduleAnswer, type ScheduleView } from "./service.js";
export { ScheduleFirer, firingStart, SCHEDULE_SOURCE, type FiringReport } from "./firer.js";
export { ScheduleStore, ensureSchedulesBucket, scheduleKey, SCHEDULES_BUCKET, type ScheduleRecord } from "./store.js";
export { cronTiming, timingOf, isRefusal, type TimingRefusal } from "./cron.js";
