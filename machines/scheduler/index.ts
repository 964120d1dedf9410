export {
  TICKET_CLASSES,
  MAX_PRIORITY,
  STARVATION_AGING_MULTIPLE,
  TicketClassSchema,
  TicketSchema,
  TenantPolicySchema,
  SchedulerConfigSchema,
  type TicketClass,
  type Ticket,
  type TicketInput,
  type TenantPolicy,
  type SchedulerConfig,
} from "./types.js";
export { TokenBucketSchema, newBucket, refill, tryTake, type TokenBucket, type TakeResult } from "./bucket.js";
export {
  emptyScheduler,
  enqueue,
  remove,
  release,
  schedulerViolations,
  type SchedulerState,
  type TenantQueue,
  type TicketLocation,
  type QueuedTicket,
  type PriorityLevels,
  type ClassCounts,
} from "./state.js";
export { ticketsOf, type Level } from "./level.js";
export { next, agingBoost, effectivePriority, type ScheduleContext, type Decision, type IdleReason, type QuotaWait } from "./next.js";
export { metrics, type SchedulerMetrics } from "./metrics.js";
export {
  admitExpansion,
  childPriority,
  ADMISSION_CODES,
  ExpansionRequestSchema,
  ExpansionLimitsSchema,
  type AdmissionCode,
  type AdmissionResult,
  type ExpansionRequest,
  type ExpansionLimits,
} from "./admission.js";
