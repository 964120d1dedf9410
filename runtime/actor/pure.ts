import { createActor, type ActorScope, type AnyMachineSnapshot, type AnyStateMachine, type EventObject } from "xstate";

/** An action XState asks its executor to run (ours only collect `xstate.emit`). */
export interface ExecutableAction {
  type: string;
  params?: unknown;
}

/**
 * XState's pure `transition()` and `initialTransition()` of one machine, without their per-call
 * cost: each of those builds a throwaway actor, which computes the machine's initial snapshot,
 * before it transitions (a third of a run transition's CPU). This keeps one inert scope per
 * machine and collects the actions of each call, as those functions do. Valid for machines that
 * spawn no children (none of ours does): nothing registers in the shared scope's system.
 */
export class PureMachine {
  private collected: ExecutableAction[] = [];
  private readonly scope: ActorScope<AnyMachineSnapshot, EventObject>;

  constructor(readonly machine: AnyStateMachine) {
    // Never started: only its system and identity are lent to the machine's transition functions.
    const self = createActor(machine);
    this.scope = {
      self,
      id: "",
      sessionId: "",
      logger: () => undefined,
      defer: () => undefined,
      emit: () => undefined,
      stopChild: () => undefined,
      system: self.system,
      actionExecutor: (action: unknown) => void this.collected.push(action as ExecutableAction),
    } as unknown as ActorScope<AnyMachineSnapshot, EventObject>;
  }

  transition(snapshot: AnyMachineSnapshot, event: EventObject): [AnyMachineSnapshot, ExecutableAction[]] {
    const actions: ExecutableAction[] = (this.collected = []);
    const next = this.machine.transition(snapshot, event, this.scope as never) as AnyMachineSnapshot;
    return [next, actions];
  }

  initial(input: unknown): [AnyMachineSnapshot, ExecutableAction[]] {
    const actions: ExecutableAction[] = (this.collected = []);
    const snapshot = this.machine.getInitialSnapshot(this.scope as never, input) as AnyMachineSnapshot;
    return [snapshot, actions];
  }
}

const machines = new WeakMap<AnyStateMachine, PureMachine>();

/** The {@link PureMachine} of `machine`, made once. */
export function pureMachine(machine: AnyStateMachine): PureMachine {
  let pure = machines.get(machine);
  if (!pure) machines.set(machine, (pure = new PureMachine(machine)));
  return pure;
}

/**
 * XState's persisted form of a snapshot, without walking its context for actor references when
 * it has no children (ours never do): XState's own copy recurses through the whole context on
 * every write.
 */
export function persistedSnapshot(machine: AnyStateMachine, snapshot: AnyMachineSnapshot): unknown {
  const children = snapshot.children as Record<string, unknown>;
  for (const _ in children) return machine.getPersistedSnapshot(snapshot);
  const history = snapshot.historyValue as Record<string, unknown>;
  for (const _ in history) return machine.getPersistedSnapshot(snapshot);
  const s = snapshot as AnyMachineSnapshot & { output?: unknown; error?: unknown };
  return { status: s.status, output: s.output, error: s.error, value: s.value, context: s.context, children: {}, historyValue: {} };
}

/**
 * Whether two XState state values name the same state: a string (an atomic state) or an object
 * of a compound state's active child (`{ live: "running" }`). XState builds a new value object on
 * every transition, so a transition that stayed put is told by content, not identity. On the
 * hot path (every command): no allocation, one step per level of nesting.
 */
export function sameStateValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  let keys = 0;
  for (const key in x) {
    if (!Object.hasOwn(y, key) || !sameStateValue(x[key], y[key])) return false;
    keys++;
  }
  for (const key in y) if (Object.hasOwn(y, key)) keys--;
  return keys === 0;
}
