/** Public surface of the workflow-definition layer (pure: zod only). */
export { canonicalJson, formatPath, isJson, jsonEqual, nestingDepth, utf8Length, MAX_JSON_DEPTH, type Json } from "./canonical.js";
export {
  ConditionSchema,
  DefinitionSchema,
  NeedSchema,
  NodeSchema,
  RetrySchema,
  DEFAULT_TIMEOUT_MS,
  DEFAULT_WAIT_TIMEOUT_MS,
  MAX_SLEEP_MS,
  MAX_TIMEOUT_MS,
  NODE_ID,
  WorkflowNameSchema,
  ToolServerNameSchema,
  SignalNameSchema,
  type AgentNode,
  type BranchNode,
  type CodeNode,
  type CompareOp,
  type Condition,
  type Definition,
  type DefinitionNode,
  type MapNode,
  type Need,
  type NeedWhen,
  type ParallelNode,
  type Retry,
  type SleepNode,
  type SubworkflowNode,
  type ToolApprovals,
  type ToolGate,
  type GatedClass,
  type Template,
  type TestOp,
} from "./definition.js";
export { DEFAULT_AGENT_TIMEOUT_MS, DEFAULT_AGENT_TOOL_CALLS, DEFAULT_AGENT_TURNS, type PlanAgent } from "./agent-node.js";
export {
  MODEL_STOP_REASONS,
  ModelResponseSchema,
  type ModelMessage,
  type ModelRequest,
  type ModelResponse,
  type ModelStopReason,
  type ModelTool,
  type ModelToolCall,
  type ModelUsage,
} from "./conversation.js";
export { A2A_SERVER_PREFIX, MAX_AGENT_URL, a2aAuthOf, type A2ANode } from "./a2a.js";
export { checkSchemaSubset, validateAgainstSchema, type SchemaIssue, type SchemaValidation } from "./json-schema.js";
export {
  compileDefinition,
  DEFAULT_LIMITS,
  type CompileContext,
  type CompileError,
  type CompileErrorCode,
  type CompileResult,
  type Limits,
} from "./compile.js";
export {
  PLAN_VERSION,
  PlanNodeSchema,
  PlanSchema,
  SETTLED,
  planIndex,
  type NodeState,
  type NodeStates,
  type NodeStatus,
  type Plan,
  type PlanBranch,
  type PlanBranchEnd,
  type PlanCode,
  type PlanMap,
  type PlanNeed,
  type PlanNode,
  type PlanParallel,
  type PlanRetry,
  type PlanSleep,
  type PlanToolGate,
  type PlanSubworkflow,
  type PlanWhen,
  type Scope,
} from "./plan.js";
export { advance, needSatisfied, readiness, settleSkips, type Readiness } from "./readiness.js";
export { parseRef, readRef, resolveExpr, resolveTemplate, templateRefs, type Ref, type RefSite, type Resolved, type Segment } from "./templates.js";
export { evaluateCondition, truthy, type ConditionResult } from "./conditions.js";
export { joinOutcome, mapItemInput, mapItems, nodeInput, runOutcome, runResult, stepsScope, type MapItems, type RunOutcome } from "./outcome.js";
export { childDepthAllowed, workflowDepth, type DepthResult, type LoadPlan, type PlanLike } from "./depth.js";
export { retryDelay } from "./retry.js";
export { progress, type Fatal, type Progress, type Settled } from "./progress.js";
export {
  CEILING_REASONS,
  CHILD_CODE_AT_PARENT,
  CHILD_START_CODES,
  childCodeAtParent,
  isCeilingReason,
  isPlatformStop,
  PLATFORM_STOP_CODES,
  stopsRun,
  WIDE_APPROVAL_STOP,
  type CeilingReason,
  type ChildStartCode,
  type PlatformStopCode,
} from "./stops.js";
