import { assign, setup } from "xstate";
import { applyRunOp, queuedLifecycle, type RunLifecycle } from "./apply.js";
import { toRunOpEvent, type RunMachineEvent } from "./events.js";
import { LEGAL_FROM, RUN_OPS, RUN_OP_TARGET, RUN_STATUSES, TERMINAL, type RunStatus } from "./table.js";

type Transition = { target?: RunStatus; guard: "legal"; actions: ["apply", "effects"] };
type StateConfig = { type: "final" } | { on: Record<string, Transition> };

/**
 * The state nodes, generated from {@link LEGAL_FROM}: one per status, terminal ones final, and in
 * each non-terminal status exactly the ops the table allows. A dash has no transition, so
 * `snapshot.can()` is false for it and `transition()` leaves the snapshot unchanged.
 */
function statesFromTable(): Record<RunStatus, StateConfig> {
  const states = {} as Record<RunStatus, StateConfig>;
  for (const status of RUN_STATUSES) {
    if (TERMINAL.has(status)) {
      states[status] = { type: "final" };
      continue;
    }
    const on: Record<string, Transition> = {};
    for (const op of RUN_OPS) {
      if (!LEGAL_FROM[op].has(status)) continue;
      const target = RUN_OP_TARGET[op];
      // advance names no target status: a targetless transition, so a waiting run stays in place.
      on[`run.${op}`] = target === null ? { guard: "legal", actions: ["apply", "effects"] } : { target, guard: "legal", actions: ["apply", "effects"] };
    }
    states[status] = { on };
  }
  return states;
}

/**
 * The run lifecycle as an XState v5 machine, generated from the table; its context is the
 * {@link RunLifecycle} and every transition applies {@link applyRunOp}, so the machine and the
 * primitive cannot disagree. Works with the pure `initialTransition()` / `transition()` and
 * `snapshot.can()`. Events are `run.<op>` with `now` (see `RunMachineEventSchema`). It emits no
 * effects itself: every transition runs the named action `effects` after `apply`, a no-op that
 * actors/ replaces with `.provide({ actions: { effects: … } })` (e.g. `enqueueActions` + `emit`).
 */
export const runLifecycleMachine = setup({
  types: { context: {} as RunLifecycle, events: {} as RunMachineEvent },
  guards: {
    legal: ({ context, event }) => applyRunOp(context, toRunOpEvent(event)).outcome === "moved",
  },
  actions: {
    apply: assign(({ context, event }) => {
      const result = applyRunOp(context, toRunOpEvent(event));
      return result.outcome === "moved" ? result.state : context;
    }),
    /** A seam for actors/: runs after `apply` (it sees the new context); a no-op here. */
    effects: () => {},
  },
}).createMachine({
  id: "run",
  initial: "queued",
  context: () => queuedLifecycle(),
  states: statesFromTable(),
});

export type RunLifecycleMachine = typeof runLifecycleMachine;
