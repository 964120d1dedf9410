import { assign, setup } from "xstate";
import { applyStepOp, pendingStep, type StepState } from "./apply.js";
import { toStepOpEvent, type StepMachineEvent } from "./events.js";
import { STEP_LEGAL_FROM, STEP_OPS, STEP_OP_TARGETS, STEP_STATUSES, STEP_TERMINAL, type StepStatus } from "./table.js";

type Transition = { target: StepStatus; guard: { type: "movesTo"; params: { to: StepStatus } }; actions: ["apply", "effects"] };
type StateConfig = { type: "final" } | { on: Record<string, Transition[]> };

/**
 * The state nodes, generated from {@link STEP_LEGAL_FROM} and {@link STEP_OP_TARGETS}: one per
 * status, terminal ones final; in each non-terminal status one guarded transition per
 * (legal op × possible target). The guard asks {@link applyStepOp} where the event goes, so a
 * stale lease or an early lease has no enabled transition and `snapshot.can()` is false for it.
 */
function statesFromTable(): Record<StepStatus, StateConfig> {
  const states = {} as Record<StepStatus, StateConfig>;
  for (const status of STEP_STATUSES) {
    if (STEP_TERMINAL.has(status)) {
      states[status] = { type: "final" };
      continue;
    }
    const on: Record<string, Transition[]> = {};
    for (const op of STEP_OPS) {
      if (!STEP_LEGAL_FROM[op].has(status)) continue;
      on[`step.${op}`] = STEP_OP_TARGETS[op].map((to) => ({ target: to, guard: { type: "movesTo", params: { to } }, actions: ["apply", "effects"] }));
    }
    states[status] = { on };
  }
  return states;
}

/**
 * The step/attempt lifecycle as an XState v5 machine generated from the step table; context is
 * the {@link StepState} and every transition applies {@link applyStepOp}. Usable with the pure
 * `initialTransition()` / `transition()` and `snapshot.can()`. Events are `step.<op>` with `now`
 * (see `StepMachineEventSchema`). Emits no effects itself: provide the `effects` action (run
 * after `apply`, so it sees the new context) in actors/.
 */
export const stepMachine = setup({
  types: { context: {} as StepState, events: {} as StepMachineEvent },
  guards: {
    movesTo: ({ context, event }, params: { to: StepStatus }) => {
      const result = applyStepOp(context, toStepOpEvent(event));
      return result.outcome === "moved" && result.state.status === params.to;
    },
  },
  actions: {
    apply: assign(({ context, event }) => {
      const result = applyStepOp(context, toStepOpEvent(event));
      return result.outcome === "moved" ? result.state : context;
    }),
    /** A seam for actors/: runs after `apply` (it sees the new context); a no-op here. */
    effects: () => {},
  },
}).createMachine({
  id: "step",
  initial: "pending",
  context: () => pendingStep(),
  states: statesFromTable(),
});

export type StepMachine = typeof stepMachine;
