export { runAgent, type TurnMeter } from "./loop.js";
export { type ModelPort, type TurnOutcome, type TurnPrice } from "./port.js";
export { TextDeltaCoalescer } from "./deltas.js";
export { runAgentAttempt, type AgentAttemptDeps } from "./attempt.js";
