import { emit, enqueueActions, setup } from "xstate";
import { TERMINAL } from "../run/index.js";
import { holderOf, isAlive, isLeased, isOffered } from "./attempts.js";
import { holdersOf, liveAttempts } from "./draft.js";
import { createRefusal } from "./create.js";
import { reduce } from "./reduce.js";
import { sweepPlan } from "./sweep.js";
import type { ExecutionContext, ExecutionEvent, NodeRun } from "./types.js";

function activeHolder(n: NodeRun | undefined, item: number | undefined) {
  return n && n.s === "active" ? holderOf(n, item) : undefined;
}

/** The report comes from the attempt the holder runs now: leased under it, or offered as it (granted in memory). */
function isCurrentAttempt(n: NodeRun | undefined, item: number | undefined, attempt: number, leaseEpoch: number): boolean {
  const h = activeHolder(n, item);
  return isLeased(h, attempt, leaseEpoch) || isOffered(h, attempt, leaseEpoch);
}

/**
 * The run actor's machine: `new` until created, `live` while queued, running or waiting, and
 * `ended` (absorbing: only late reports are answered there, and nothing changes) once the run is terminal. Guards keep stale inputs out — a result
 * from an attempt or lease epoch that is no longer current, a timer for a node that moved on, a
 * child that is not the node's — so they are refused with a closed answer and cost no write.
 */
export const executionMachine = setup({
  types: { context: {} as ExecutionContext, events: {} as ExecutionEvent },
  guards: {
    /** The seed breaks the tree shape, or (a child) its parent was cancelled, ended or stopped waiting on it: nothing is created. */
    createRefused: ({ event }) => event.type === "run.create" && createRefusal(event.run, event.parent) !== null,
    terminal: ({ context }) => context.run !== null && TERMINAL.has(context.run.lifecycle.status),
    resultIsCurrent: ({ context, event }) =>
      event.type === "step.result" && isCurrentAttempt(context.run?.nodes[event.node], event.item, event.attempt, event.lease_epoch),
    timerIsCurrent: ({ context, event }) => {
      if (event.type !== "timer.fired") return false;
      if (event.kind === "wait") return context.run?.lifecycle.status === "waiting";
      const n = context.run?.nodes[event.node];
      if (!n || n.s !== "active") return false;
      if (event.kind === "sleep") return n.wake_at !== undefined;
      if (event.kind === "lease") return isLeased(holderOf(n, event.item), event.attempt ?? 0, event.lease_epoch ?? 0);
      return holdersOf(n).some(([, h]) => h.step?.status === "ready");
    },
    heartbeatIsCurrent: ({ context, event }) =>
      event.type === "step.heartbeat" && isCurrentAttempt(context.run?.nodes[event.node], event.item, event.attempt, event.lease_epoch),
    /** The report was dispatched before the run's last cancellation (of the run, or of its tree): fenced by the cancellation epoch. */
    cancelEpochStale: ({ context, event }) =>
      (event.type === "step.result" || event.type === "step.heartbeat") &&
      event.cancellation_epoch !== undefined &&
      !!context.run &&
      event.cancellation_epoch < context.run.cancellation_epoch,
    childIsCurrent: ({ context, event }) =>
      event.type === "child.settled" && context.run?.nodes[event.node]?.s === "active" && context.run.nodes[event.node]?.child === event.child,
    /** Something in flight is lost: an offer, or a leased or running attempt not still executing in the claiming process. */
    recoverable: ({ context, event }) => {
      const alive = event.type === "run.recover" ? (event.alive ?? []) : [];
      return Object.entries(context.run?.nodes ?? {}).some(
        ([id, n]) => n.s === "active" && liveAttempts(id, holdersOf(n)).some((a) => !isAlive(alive, id, a.item, a)),
      );
    },
    queued: ({ context }) => context.run?.lifecycle.status === "queued",
    expansionPending: ({ context, event }) =>
      (event.type === "expansion.admitted" || event.type === "expansion.refused") &&
      context.run?.nodes[event.node]?.s === "active" &&
      context.run.nodes[event.node]?.expansion?.state === "pending",
    /** Only a sweep with something to repair is applied (and written); the rest cost no write. */
    sweepRepairs: ({ context, event }) =>
      event.type === "run.sweep" && !!context.run && sweepPlan(context.run, event.at, event.sweep, event.held).some((a) => a.action !== "recheck_admission"),
    isChild: ({ context }) => context.run?.parent_run_id !== null && context.run?.parent_run_id !== undefined,
  },
  actions: {
    answerStale: emit({ type: "runway.answer", value: { outcome: "stale_lease" } } as never),
    answerStaleCancel: emit({ type: "runway.answer", value: { outcome: "stale_cancel_epoch" } } as never),
    answerCreateRefused: enqueueActions(({ event, enqueue }) => {
      if (event.type === "run.create") enqueue.emit({ type: "runway.answer", value: createRefusal(event.run, event.parent) } as never);
    }),
    reduce: enqueueActions(({ context, event, enqueue }) => {
      const next = reduce(context, event);
      enqueue.assign(() => next.context);
      for (const effect of next.effects) enqueue.emit(effect as never);
    }),
  },
}).createMachine({
  id: "run",
  context: { run: null },
  initial: "new",
  states: {
    new: {
      on: {
        "run.create": [
          { guard: "createRefused", actions: "answerCreateRefused" },
          { target: "live", actions: "reduce" },
        ],
      },
    },
    live: {
      always: { guard: "terminal", target: "ended" },
      on: {
        // A report from an attempt that is no longer current is answered, never applied.
        "step.result": [
          { guard: "cancelEpochStale", actions: "answerStaleCancel" },
          { guard: "resultIsCurrent", actions: "reduce" },
          { actions: "answerStale" },
        ],
        "step.heartbeat": [
          { guard: "cancelEpochStale", actions: "answerStaleCancel" },
          { guard: "heartbeatIsCurrent", actions: "reduce" },
          { actions: "answerStale" },
        ],
        "timer.fired": { guard: "timerIsCurrent", actions: "reduce" },
        "child.settled": { guard: "childIsCurrent", actions: "reduce" },
        "run.cancel": { actions: "reduce" },
        "run.recover": { guard: "recoverable", actions: "reduce" },
        "run.admitted": { guard: "queued", actions: "reduce" },
        "run.sweep": { guard: "sweepRepairs", actions: "reduce" },
        "run.parent_gone": { guard: "isChild", actions: "reduce" },
        "expansion.admitted": { guard: "expansionPending", actions: "reduce" },
        "expansion.refused": { guard: "expansionPending", actions: "reduce" },
      },
    },
    // Absorbing: nothing changes an ended run. A late report from one of its attempts is still
    // answered with a closed code (the worker learns why), at no write.
    ended: {
      on: {
        "step.result": [{ guard: "cancelEpochStale", actions: "answerStaleCancel" }, { actions: "answerStale" }],
        "step.heartbeat": [{ guard: "cancelEpochStale", actions: "answerStaleCancel" }, { actions: "answerStale" }],
      },
    },
  },
});
