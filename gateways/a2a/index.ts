export { AgentStore, ensureA2aBuckets, type ExposedAgent } from "./agents.js";
export { startA2a } from "./start.js";
export type { A2aServer } from "./server.js";
