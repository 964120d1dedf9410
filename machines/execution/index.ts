export { executionMachine } from "./machine.js";
export { createRefusal, type CreateRefusal } from "./create.js";
export { sweepPlan, parentGone, DEFAULT_SWEEP, type SweepAction, type SweepSettings } from "./sweep.js";
export {
  reduce,
  runSummary,
  MAX_DEPTH,
  WAIT_GRACE_MS,
  STEP_EXECUTE,
  STEP_READY,
  STEP_LAPSED,
  STEP_ABORT,
  type AbortRequest,
  METRICS_CHANNEL,
  MAP_OUTPUT_LIMIT,
  PLATFORM_RETRIES,
  LEASE_GRACE_MS,
  type Effect,
} from "./reduce.js";
export {
  RunCommandSchema,
  RunSeedSchema,
  type RunCommand,
  type RunSeed,
  type RunContext,
  type NodeRun,
  type ItemRun,
  type RunError,
  type ExecutionContext,
  type ExecutionEvent,
  type ExecuteRequest,
  type ReadyTicket,
  type DefinitionRef,
  type Lane,
  type Prepared,
  type ParentView,
} from "./types.js";
