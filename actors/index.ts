export { ensureDomainTopology, eventSubject, AUDIT_STREAM, DEFINITIONS_BUCKET, RESULTS_STORE } from "./topology.js";
export { readRunEvents, eventsOf, MAX_EVENTS_BYTES, type RunEvent, type RunEventsPage } from "./run/events.js";
export {
  TenantService,
  tenantActor,
  listMembers,
  membershipReader,
  TENANT_KIND,
  type TenantPolicyView,
  type TenantActorOptions,
  type TenantMember,
} from "./tenant/tenants.js";
export { DefinitionStore, type PutDefinitionResult, type ResolveResult, type DefinitionRef, type CompiledPlan } from "./definitions/store.js";
export { readParent, runActor, RUN_KIND } from "./run/actor.js";
export { RunMemories } from "./run/memory.js";
export { EndedRunCompaction } from "./run/compaction.js";
export { StepExecutor, RESULT_INLINE_LIMIT, MAX_ERROR_MESSAGE, type HeartbeatOutcome, type ReportOutcome, type StepReport } from "./engine/executor.js";
export { recoverPartition, recoverPartitionPatiently, buildLiveIndex, type RecoveryLog, type RecoveryReport } from "./engine/recovery.js";
export { LiveRunIndex, LIVE_BUCKET, type LiveEntry } from "./run/live-runs.js";
export { CURSOR_PATTERN as RUNS_CURSOR_PATTERN, RunIndex, RUNS_STREAM, type RunSummaryEntry, type IndexPage } from "./run/runs-index.js";
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
} from "../gateways/api/run-service.js";
export type { RunView, RunSummary } from "./run/views.js";
export { startKey, childStartKey, runIdFor, tenantOfRun } from "./records/ids.js";
export { NodeMetrics, type MetricSource, type Labels } from "./engine/metrics.js";
export { Dispatcher, DEFAULT_SCHEDULER, type LeaseDecision, type QuotaGrant } from "./engine/dispatcher.js";
export { QuotaGate, QUOTA_STREAM, type QuotaTake, type QuotaLimits } from "./tenant/quota.js";
export { UsageMeter, METER_STREAM, type Charge, type ChargeRequest } from "./tenant/meter.js";
export { Sweeper, type SweepReport } from "./engine/sweeper.js";
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
} from "./run/tool-calls.js";
export { MAX_TOOL_OUTPUT } from "./run/tool-step.js";
export { listReconciliations, RECONCILE_BUCKET, type ReconcileItem } from "./run/reconciliations.js";
export { RunReplays, type ReplayResult, type TrajectoryResult } from "../gateways/api/replays.js";
export { ReplayTools } from "./run/replay-tools.js";
export { readTrajectory, compareTrajectories, type TrajectoryLine } from "./run/trajectory.js";
export { listInbox, getInboxItem, APPROVALS_BUCKET, INBOX_PAGE_MAX, type InboxItem, type InboxPage } from "./run/approvals.js";
