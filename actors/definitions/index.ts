export { DefinitionStore, DEFINITIONS_BUCKET, type CompiledPlan, type DefinitionRef, type ResolveResult } from "./store.js";
