export { AgentStore, ensureA2aBuckets, type ExposedAgent } from "./agents.js";
export { startA2a } from "./start.js";
export type { A2aServer } from "./server.js";
export { A2ACaller, withA2A, A2A_WIRE, type A2ACallerOptions } from "./client.js";
