export { MAX_ERROR_MESSAGE, RESULTS_STORE, StepExecutor, type HeartbeatOutcome, type StepReport } from "./executor.js";
export { Dispatcher, DEFAULT_SCHEDULER } from "./dispatcher.js";
export { buildLiveIndex, recoverPartitionPatiently } from "./recovery.js";
export { Sweeper } from "./sweeper.js";
export { NodeMetrics } from "./metrics.js";
export { PartitionHold } from "./partition-hold.js";
