export { StepPool, type StepPoolOptions, type StepPoolStats, type StepTask, type StepResult, type TaskRef, type FailureCode } from "./pool.js";
export {
  TerminalError,
  RetryableError,
  isStepError,
  STEP_ERROR_BRAND,
  type Handler,
  type HandlerModule,
  type StepContext,
  type StepErrorKind,
} from "./handler-api.js";
