export {
  DEFAULT_MAX_TOKENS,
  MODEL_FAILURE_CODES,
  type ModelCallOptions,
  type ModelFailure,
  type ModelFailureCode,
  type ModelOutcome,
  type ModelProvider,
} from "./types.js";
export {
  ModelProviderRecord,
  ModelProviderNameSchema,
  ModelProviderSpecSchema,
  ModelPriceSchema,
  ModelQuotaSchema,
  ModelScriptSchema,
  ScriptedTurnSchema,
  turnCostCents,
  type ModelPrice,
  type ModelProviderKind,
  type ModelProviderSpec,
  type ModelProviderView,
  type ModelScript,
  type ScriptedTurn,
} from "./config.js";
export { classifyHttpFailure, retryAfterMs } from "./failures.js";
export { DEFAULT_RETRY_POLICY, completeWithRetry, retryDecision, type RetryDecision, type RetryDeps, type RetryPolicy } from "./retry.js";
export { createModelProvider } from "./provider.js";
export { scriptedResponse, scriptedTurnIndex } from "./scripted.js";
export { ModelStore, MODELS_BUCKET, ensureModelsBucket, type StoredProviderView } from "./store.js";
export { modelPortOf } from "./port.js";
