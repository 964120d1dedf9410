export { ApiKeyNameSchema, ApiKeyStore, ensureKeysBucket, ReviewerGroupSchema } from "./store.js";
