export { ensureDomainTopology, eventSubject, AUDIT_STREAM, DEFINITIONS_BUCKET, RESULTS_STORE } from "./topology.js";
export { readRunEvents, eventsOf, MAX_EVENTS_BYTES, type RunEvent, type RunEventsPage } from "./run-events.js";
export {
  TenantService,
  tenantActor,
  listMembers,
  membershipReader,
  TENANT_KIND,
  type TenantPolicyView,
  type TenantActorOptions,
  type TenantMember,
} from "./tenants.js";
export { DefinitionStore, type PutDefinitionResult, type ResolveResult, type DefinitionRef, type CompiledPlan } from "./definitions.js";
export { readParent, runActor, RUN_KIND } from "./run-actor.js";
export { RunMemories } from "./run-memory.js";
export { EndedRunCompaction } from "./compaction.js";
export { StepExecutor, RESULT_INLINE_LIMIT, MAX_ERROR_MESSAGE, type HeartbeatOutcome, type ReportOutcome, type StepReport } from "./executor.js";
export { recoverPartition, recoverPartitionPatiently, buildLiveIndex, type RecoveryLog, type RecoveryReport } from "./recovery.js";
export { LiveRunIndex, LIVE_BUCKET, type LiveEntry } from "./live-runs.js";
export { CURSOR_PATTERN as RUNS_CURSOR_PATTERN, RunIndex, RUNS_STREAM, type RunSummaryEntry, type IndexPage } from "./run-index.js";
export {
  RunService,
  MAX_INPUT_BYTES,
  type StartRunRequest,
  type StartRunResult,
  type CancelRunResult,
  type ReconcileResult,
  type SignalResult,
  type DecideResult,
  type RunEventsResult,
} from "./runs.js";
export type { RunView, RunSummary } from "./run-views.js";
export { startKey, childStartKey, runIdFor, tenantOfRun } from "./ids.js";
export { NodeMetrics, type MetricSource, type Labels } from "./metrics.js";
export { Dispatcher, DEFAULT_SCHEDULER, type LeaseDecision, type QuotaGrant } from "./dispatcher.js";
export { QuotaGate, QUOTA_STREAM, type QuotaTake, type QuotaLimits } from "./quota.js";
export { UsageMeter, METER_STREAM, type Charge, type ChargeRequest } from "./meter.js";
export { Sweeper, type SweepReport } from "./sweeper.js";
export {
  effectKey,
  EFFECT_KEY_META,
  type ToolPort,
  type ToolLookup,
  type ToolCallOutcome,
  type ToolCallRequest,
  type ToolInputRequest,
  type TaskPollOutcome,
  type ToolResultOutcome,
} from "./tool-calls.js";
export { MAX_TOOL_OUTPUT } from "./tool-step.js";
export { listReconciliations, RECONCILE_BUCKET, type ReconcileItem } from "./reconciliations.js";
export { RunReplays, type ReplayResult, type TrajectoryResult } from "./run-replay.js";
export { ReplayTools } from "./replay.js";
export { readTrajectory, compareTrajectories, type TrajectoryLine } from "./trajectory.js";
export { listInbox, getInboxItem, APPROVALS_BUCKET, INBOX_PAGE_MAX, type InboxItem, type InboxPage } from "./approvals.js";
