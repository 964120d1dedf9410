export { runAgent } from "./loop.js";
export { type ModelPort, type TurnOutcome, type TurnRequest } from "./port.js";
