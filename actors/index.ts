export { ensureDomainTopology, eventSubject, EVENTS_STREAM, DEFINITIONS_BUCKET, TENANTS_BUCKET, RESULTS_STORE } from "./topology.js";
export { TenantDirectory, TENANT_PATTERN, type TenantRecord } from "./tenants.js";
export { DefinitionStore, type PutDefinitionResult, type ResolveResult, type DefinitionRef, type CompiledPlan } from "./definitions.js";
export { runActor, RUN_KIND } from "./run-actor.js";
export { StepExecutor, RESULT_INLINE_LIMIT } from "./executor.js";
export { recoverPartition } from "./recovery.js";
export { RunService, MAX_INPUT_BYTES, type StartRunRequest, type StartRunResult, type CancelRunResult, type RunView } from "./runs.js";
export { startKey, childStartKey, runIdFor, tenantOfRun } from "./ids.js";
export { NodeMetrics, type MetricSource, type Labels } from "./metrics.js";
