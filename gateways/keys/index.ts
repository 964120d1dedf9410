export {
  ApiKeyNameSchema,
  ApiKeyStore,
  ensureKeysBucket,
  KEYS_BUCKET,
  ReviewerGroupSchema,
  type ApiKeyView,
  type CreateKeyResult,
  type KeyCaller,
} from "./store.js";
