export { type ModelPort, type TurnOutcome, type TurnPrice } from "./port.js";
export { TextDeltaCoalescer } from "./deltas.js";
export { runAgentAttempt } from "./attempt.js";
