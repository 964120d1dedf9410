export {
  stepEffect,
  effectOf,
  keepEffect,
  type EffectHolder,
  NO_EFFECT,
  type EffectState,
  type EffectEvent,
  type EffectDecision,
  type EffectStep,
  type EffectIntent,
  type EffectReceipt,
} from "./machine.js";
