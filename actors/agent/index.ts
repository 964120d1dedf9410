export { runAgent } from "./loop.js";
export { type ModelPort, type TurnOutcome } from "./port.js";
export { TextDeltaCoalescer } from "./deltas.js";
