import { initialTransition, transition, type AnyMachineSnapshot, type EventObject } from "xstate";
import { measuredOutput } from "../../actors/run/actor.js";
import { compileDefinition, executionMachine, RunFacts, type ExecuteRequest, type Plan, type RunContext, type RunFact } from "../../machines/index.js";

/** An effect the run machine emitted, loosely typed for assertions. */
export type Emitted = {
  type: string;
  channel?: string;
  payload?: Record<string, unknown> & { request?: ExecuteRequest };
  to?: { kind: string; id: string };
  event?: Record<string, unknown>;
  value?: Record<string, unknown>;
  data?: unknown;
  name?: string;
  at?: number;
};

export const emitted = (actions: readonly { type: string }[]) =>
  actions.filter((a) => (a.type as string) === "xstate.emit").map((a) => (a as unknown as { params: { event: Emitted } }).params.event);

export function plan(definition: object, handlers: string[] = ["h"]): Plan {
  const c = compileDefinition(definition, { handlers: new Set(handlers), workflowExists: () => true });
  if (!c.ok) throw new Error(JSON.stringify(c.errors));
  return c.plan;
}

/** The attempts a transition handed to the node (offered to its scheduler, run when granted). */
export const executes = (effects: Emitted[]): ExecuteRequest[] => effects.filter((e) => e.channel === "step.ready").map((e) => e.payload!.request!);

/**
 * Freezes a state and everything in it, so a decision that changed the state it was given (not
 * its own copy) throws: the actor decides a batch again from that state when its write fails,
 * and a map's untouched items are shared between one state and the next (machines/execution/items.ts).
 */
export function deepFreeze<T>(value: T): T {
  if (value === null || typeof value !== "object" || Object.isFrozen(value)) return value;
  Object.freeze(value);
  for (const v of Object.values(value)) deepFreeze(v);
  return value;
}

/**
 * The run machine driven the way its actor drives it: each event carries `now`, the plan and the
 * run's memory (its input and outputs) and, for a map item's result, its output's size (as the
 * actor's `prepare` measures it), and the journal facts a transition emits are added to
 * that memory, as the actor does once the transition is stored. Every state it is given is
 * frozen first ({@link deepFreeze}).
 */
export function runDriver(p: Plan, extra: Record<string, unknown> = {}, start = 1_000) {
  let [snap] = initialTransition(executionMachine) as [AnyMachineSnapshot, unknown];
  let memory = new RunFacts();
  let clock = start;
  return {
    get snap() {
      return snap;
    },
    get run() {
      return snap.context.run as RunContext;
    },
    get memory() {
      return memory;
    },
    /** The memory lost (a node that never decided for this run): it is rebuilt from `facts`. */
    forget(facts: RunFact[]) {
      memory = new RunFacts();
      for (const f of facts) memory.add(f);
    },
    can(event: object, now = clock) {
      return snap.can({ ...event, now, plan: p, memory, ...extra, ...measuredOutput(event as EventObject) } as never);
    },
    send(event: object, now = clock++) {
      deepFreeze(snap.context);
      const [next, actions] = transition(executionMachine, snap, {
        ...event,
        now,
        plan: p,
        memory,
        ...extra,
        ...measuredOutput(event as EventObject),
      } as never);
      snap = next;
      const effects = emitted(actions);
      for (const e of effects) if (e.type === "runway.journal") memory.add(e.data as RunFact);
      return effects;
    },
    /** Reports an attempt's result as the executor would. */
    result(e: ExecuteRequest, outcome: "succeeded" | "failed" = "succeeded", output: unknown = e.input, error?: object) {
      return this.send({
        type: "step.result",
        node: e.node,
        ...(e.item !== undefined ? { item: e.item } : {}),
        attempt: e.attempt,
        lease_epoch: e.lease_epoch,
        outcome,
        ...(outcome === "succeeded" ? { output } : { error: error ?? { code: "handler_error", message: "failed", retryable: true } }),
      });
    },
  };
}

/** A top-level run's seed (`t_1`, batch, empty input), with `over` on top. */
export const rootSeed = (over: Record<string, unknown> = {}) => ({
  id: "t_1",
  tenant: "t",
  root_run_id: "t_1",
  parent_run_id: null,
  parent_node: null,
  depth: 0,
  definition: { name: "w", version: 1, digest: "d" },
  source: "api",
  start_key: "k",
  lane: "batch" as const,
  input: {},
  ...over,
});
