export { type ModelPort, type TurnOutcome, type TurnPrice } from "./port.js";
export { TextDeltaCoalescer } from "./deltas.js";
export { runAgentAttempt, turnMeter } from "./attempt.js";
export { serveSampling } from "./sampling.js";
