export { DefinitionStore, DEFINITIONS_BUCKET, type CompiledPlan } from "./store.js";
