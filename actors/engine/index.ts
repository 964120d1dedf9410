export { StepExecutor, type HeartbeatOutcome } from "./executor.js";
export type { StepReport } from "./attempt-reports.js";
export { MAX_ERROR_MESSAGE, RESULTS_STORE } from "./attempt-results.js";
export { Dispatcher, DEFAULT_SCHEDULER } from "./dispatcher.js";
export { buildLiveIndex, recoverPartitionPatiently } from "./recovery.js";
export { Sweeper } from "./sweeper.js";
export { NodeMetrics } from "./metrics.js";
export { PartitionHold } from "./partition-hold.js";
