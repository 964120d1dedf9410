export { readParent, readTenantGate, runActor, RUN_KIND, RUN_RECORD } from "./actor.js";
export { attemptJournal } from "./dispatch.js";
export type { RunTypes } from "./protocol.js";
export { recordFacts, RunMemories } from "./memory.js";
export { EndedRunCompaction } from "./compaction.js";
export { everyRun, LiveRunIndex, LIVE_BUCKET } from "./live-runs.js";
export { createdSubject, CURSOR_PATTERN, endedSubject, partsHolding, RunIndex, RUNS_STREAM, runsStreamConfig, summaryOf } from "./runs-index.js";
export { compactedView, view, type RunSummary, type RunView } from "./views.js";
export { readRunEvents, type RunEvent } from "./events.js";
export {
  effectKey,
  EFFECT_KEY_META,
  type TaskPollOutcome,
  type ToolCallOutcome,
  type ToolCallRequest,
  type SamplingAsk,
  type SamplingAnswer,
  type ToolInputRequest,
  type ToolLookup,
  type ToolPort,
} from "./tool-calls.js";
export {
  callThroughJournal,
  fenceOf,
  INTERRUPTED_BY,
  interruptedError,
  refsWritten,
  settleCall,
  toolResult,
  type BoundedRef,
  type ToolAnswer,
  type ToolCall,
} from "./tool-step.js";
export { ReplayTools, type ReplayPort } from "./replay-tools.js";
export { compareTrajectories, readTrajectory, type TrajectoryLine } from "./trajectory.js";
export { APPROVALS_BUCKET, awaitedInboxItem, getInboxItem, INBOX_PAGE_MAX, listInbox } from "./approvals.js";
export { listReconciliations, RECONCILE_BUCKET } from "./reconciliations.js";
export { attemptSpan, chatSpan, parseTraceparent, SPAN_CLOSED_BY_RUN, toolSpan, type SpanRecord, type SpanSink } from "./spans.js";
