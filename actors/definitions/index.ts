export { DefinitionStore, DEFINITIONS_BUCKET, type CompiledPlan, type ResolveResult } from "./store.js";
