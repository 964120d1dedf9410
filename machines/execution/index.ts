export { executionMachine, reachableFrom } from "./machine.js";
export { createRefusal, type CreateRefusal } from "./create.js";
export { ADMISSION, heldForAdmission } from "./admission.js";
export { gatedBy, gateToken } from "./gates.js";
export { sweepPlan, parentGone, DEFAULT_SWEEP, type SweepAction, type SweepSettings } from "./sweep.js";
export {
  decisions,
  type Decided,
  runSummary,
  MAX_DEPTH,
  WAIT_GRACE_MS,
  STEP_READY,
  STEP_LAPSED,
  STEP_ABORT,
  TASK_POLL,
  type TaskPoll,
  type AbortRequest,
  METRICS_CHANNEL,
  type RunLocalChannels,
  type RunAnswer,
  type MachineCounter,
  MAP_OUTPUT_LIMIT,
  PLATFORM_RETRIES,
  LEASE_LAPSED,
  ATTEMPT_INTERRUPTED,
  HANDED_OVER,
  LEASE_GRACE_MS,
  LEASE_AFTER_MS,
  type Effect,
} from "./reduce.js";
export { RunFacts, factsOfHeadV1, isHeadV1, migrateHeadV1, outputValue } from "./memory.js";
export { ticketId } from "./attempts.js";
export type { AliveAttempt } from "./leases.js";
export { changedKeys } from "./items.js";
export {
  type RunCommand,
  type RunSeed,
  type RunContext,
  type NodeRun,
  type ItemRun,
  type ApprovalState,
  type GateRule,
  type RunError,
  type ExecutionContext,
  type TraceContext,
  type Receipt,
  type PendingIntent,
  type IntentFact,
  type TaskRef,
  type DefinitionRef,
  type MapRun,
  type RunFact,
  type RunMemory,
  RUN_CONTEXT_VERSION,
} from "./types.js";
export { type ExecutionEvent, type ExecuteRequest, type ReadyTicket, type Prepared, type ParentView } from "./requests.js";
export { RunCommandSchema, RunSeedSchema } from "./commands.js";
