export {
  STEP_STATUSES,
  STEP_OPS,
  STEP_NON_TERMINAL,
  STEP_TERMINAL,
  STEP_LEGAL_FROM,
  STEP_OP_TARGETS,
  FENCED_STEP_OPS,
  isStepTerminal,
  isStepStatus,
  type StepStatus,
  type StepOp,
} from "./table.js";
export { RetryPolicySchema, DEFAULT_RETRY_POLICY, retryDelay, type RetryPolicy } from "./retry.js";
export { StepErrorSchema, StepOpEventSchema, type StepError, type StepOpEvent } from "./events.js";
export { applyStepOp, pendingStep, stepShapeViolations, type StepState, type StepOpResult, type StepShapeViolation } from "./apply.js";
