export { StepPool, type StepPoolOptions, type StepPoolStats, type StepTask, type StepResult, type TaskRef, type FailureCode } from "./pool.js";
export type { ToolCallAnswer } from "./wire.js";
export {
  TerminalError,
  RetryableError,
  ToolError,
  isStepError,
  STEP_ERROR_BRAND,
  type Handler,
  type HandlerModule,
  type StepContext,
  type StepErrorKind,
} from "./handler-api.js";
