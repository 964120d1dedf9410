export {
  RUN_STATUSES,
  RUN_OPS,
  WAITING_ON,
  NON_TERMINAL,
  TERMINAL,
  LEGAL_FROM,
  RUN_OP_TARGET,
  isTerminal,
  isRunStatus,
  type RunStatus,
  type RunOp,
  type WaitingOn,
} from "./table.js";
export { RunOpEventSchema, type RunOpEvent } from "./events.js";
export { applyRunOp, queuedLifecycle, type RunLifecycle, type RunOpResult } from "./apply.js";
export { runShapeViolations, type RunShape, type RunShapeViolation } from "./shape.js";
