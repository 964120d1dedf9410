import { assign, emit, enqueueActions, setup } from "xstate";
import { applyRunOp, LEGAL_FROM, RUN_OP_TARGET, RUN_OPS, RUN_STATUSES, TERMINAL, type RunStatus } from "../run/index.js";
import { holderOf, isLeased, isOffered } from "./attempts.js";
import { isAlive } from "./leases.js";
import { holdersOf, liveAttempts } from "./draft.js";
import { createRefusal } from "./create.js";
import { decisions, type Decided } from "./reduce.js";
import type { Effect } from "./draft.js";
import { sweepPlan } from "./sweep.js";
import { completedClaim, intentInFlight, reconciling } from "./intents.js";
import { gateWaits, intentNeedsApproval, openGate } from "./gates.js";
import { cancelRequested, isLateReceipt } from "./cancel.js";
import { signalProblem, waitingFor } from "./signals.js";
import { admissionAsked, admissionPending, decisionAnswer } from "./admission.js";
import type { ExecutionContext, NodeRun } from "./types.js";
import type { ExecutionEvent, LifecycleEvent, RunMachineEvent } from "./requests.js";

function activeHolder(n: NodeRun | undefined, item: number | undefined) {
  return n && n.s === "active" ? holderOf(n, item) : undefined;
}

/** The report comes from the attempt the holder runs now: leased under it, or offered as it (granted in memory). */
function isCurrentAttempt(n: NodeRun | undefined, item: number | undefined, attempt: number, leaseEpoch: number): boolean {
  const h = activeHolder(n, item);
  return isLeased(h, attempt, leaseEpoch) || isOffered(h, attempt, leaseEpoch);
}

/** A command from outside, not a lifecycle op a decision raised. */
function isCommand(event: RunMachineEvent): event is ExecutionEvent {
  return !event.type.startsWith("lifecycle.");
}

/** A report from an attempt: a result, a heartbeat, or one of its effects' questions. */
type Report = Extract<
  ExecutionEvent,
  { type: "step.result" | "step.heartbeat" | "effect.intent" | "effect.receipt" | "effect.task" | "effect.gate" | "effect.input" | "effect.child" }
>;

function isReport(event: RunMachineEvent): event is Report {
  return (
    event.type === "step.result" ||
    event.type === "step.heartbeat" ||
    event.type === "effect.intent" ||
    event.type === "effect.receipt" ||
    event.type === "effect.task" ||
    event.type === "effect.gate" ||
    event.type === "effect.input" ||
    event.type === "effect.child"
  );
}

/** The report was dispatched before the run's last cancellation (of the run, or of its tree): fenced by the cancellation epoch. */
function cancelStale(context: ExecutionContext, event: RunMachineEvent): boolean {
  return isReport(event) && event.cancellation_epoch !== undefined && !!context.run && event.cancellation_epoch < context.run.cancellation_epoch;
}

/**
 * The statuses a run can reach from `from` by ops of the run table (`LEGAL_FROM`, `RUN_OP_TARGET`),
 * directly or through others (one event may claim a run and settle it).
 */
export function reachableFrom(from: RunStatus): RunStatus[] {
  const seen = new Set<RunStatus>();
  const visit = (s: RunStatus) => {
    for (const op of RUN_OPS) {
      const to = RUN_OP_TARGET[op];
      if (!LEGAL_FROM[op].has(s) || to === null || to === s || seen.has(to)) continue;
      seen.add(to);
      visit(to);
    }
  };
  visit(from);
  seen.delete(from);
  return RUN_STATUSES.filter((s) => seen.has(s));
}

/**
 * The named action that applies one decision (`reduce.ts`): the run's next data, its effects
 * emitted, and each lifecycle op it took raised, so the machine takes it as a transition.
 */
function decision<T extends ExecutionEvent["type"]>(type: T, decide: (c: ExecutionContext, e: Extract<ExecutionEvent, { type: T }>) => Decided) {
  return enqueueActions<ExecutionContext, RunMachineEvent, undefined, RunMachineEvent, never, never, never, never, Effect>(({ context, event, enqueue }) => {
    if (event.type !== type) return;
    const next = decide(context, event as Extract<ExecutionEvent, { type: T }>);
    enqueue.assign(() => next.context);
    for (const effect of next.effects) enqueue.emit(effect);
    for (const move of next.moves) enqueue.raise({ type: `lifecycle.${move.op}`, move } as LifecycleEvent);
  });
}

/**
 * The lifecycle transitions out of `from`, one per op of the run table legal there
 * (`LEGAL_FROM`, `RUN_OP_TARGET`): each writes the run's lifecycle columns (`applyMove`), and
 * moves to the op's status (a live one is a child of `live`). An op that names no status
 * (`advance`), or `from` itself, is no move.
 */
function lifecycleMoves(from: RunStatus) {
  const on: Partial<Record<LifecycleEvent["type"], { target?: string; actions: "applyMove" }>> = {};
  for (const op of RUN_OPS) {
    const to = RUN_OP_TARGET[op];
    if (to === null || !LEGAL_FROM[op].has(from)) continue;
    on[`lifecycle.${op}`] = to === from ? { actions: "applyMove" } : { target: stateOf(to), actions: "applyMove" };
  }
  return on;
}

/** The machine state of a status, by id: a live status is a child of `live`, an ended one a top-level state. */
function stateOf(status: RunStatus): string {
  return TERMINAL.has(status) ? `#run.${status}` : `#run.live.${status}`;
}

/** What a live run does with an attempt's reports: a report that is no longer current is answered, never applied. */
const REPORTS = {
  "step.result": [{ guard: "lateReceipt", actions: "applyLateResult" }, { guard: "reportApplies", actions: "applyResult" }, { actions: "answerNotCurrent" }],
  "step.heartbeat": [
    { guard: "letsFinish", actions: "answerLetFinish" },
    { guard: "reportApplies", actions: "applyHeartbeat" },
    { actions: "answerNotCurrent" },
  ],
  // A zombie (stale lease or cancellation epoch) records neither an intent nor a receipt.
  "effect.intent": [
    { guard: "cancelEpochStale", actions: "answerStaleCancel" },
    { guard: "claimCompleted", actions: "answerClaim" },
    { guard: "intentInFlight", actions: "answerInFlight" },
    { guard: "intentNeedsApproval", actions: "answerNeedsApproval" },
    { guard: "effectIsCurrent", actions: "recordIntent" },
    { actions: "answerNotCurrent" },
  ],
  "effect.receipt": [
    { guard: "lateReceipt", actions: "recordLateReceipt" },
    { guard: "reportApplies", actions: "recordReceipt" },
    { actions: "answerNotCurrent" },
  ],
  "effect.task": [{ guard: "reportApplies", actions: "recordTask" }, { actions: "answerNotCurrent" }],
  // A tool node's gated call (or an agent's gated proposal) asks before its charge and intent: its approval's decision, or it parks.
  "effect.gate": [
    { guard: "cancelEpochStale", actions: "answerStaleCancel" },
    { guard: "gateOpen", actions: "answerGateOpen" },
    { guard: "gateWaits", actions: "parkOnGate" },
    { guard: "effectIsCurrent", actions: "answerNeedsApproval" },
    { actions: "answerNotCurrent" },
  ],
  // The server asked for a person's input: the forms are filed and the step parks (no worker held).
  "effect.input": [{ guard: "reportApplies", actions: "parkOnInput" }, { actions: "answerNotCurrent" }],
  // An agent delegates to a subagent: the child's stored end, or the child started once and the step parked.
  "effect.child": [{ guard: "reportApplies", actions: "callSubagent" }, { actions: "answerNotCurrent" }],
} as const;

/**
 * What every live status (queued, running, waiting) takes alike: an attempt's reports, a person's
 * settle, decision and signal, timers, a child's end, cancel, recovery, sweep and expansions.
 * Declared once, on `live`; a child state's own transitions are tried first.
 */
const LIVE_EVENTS = {
  ...REPORTS,
  "effect.settle": [{ guard: "reconcileOpen", actions: "settleEffect" }, { actions: "answerNotReconciling" }],
  "approval.decide": [{ guard: "decisionRefused", actions: "answerDecisionRefused" }, { actions: "decideApproval" }],
  "run.signal": [
    { guard: "signalInvalid", actions: "answerSignalInvalid" },
    { guard: "signalWaited", actions: "deliverSignal" },
    { actions: "answerNotWaiting" },
  ],
  "timer.fired": { guard: "timerIsCurrent", actions: "applyTimer" },
  "child.settled": { guard: "childIsCurrent", actions: "settleChild" },
  "run.cancel": { actions: "cancel" },
  "run.recover": { guard: "recoverable", actions: "recover" },
  "run.sweep": { guard: "sweepRepairs", actions: "sweep" },
  "run.parent_gone": { guard: "isChild", actions: "parentGone" },
  "expansion.admitted": { guard: "expansionPending", actions: "admitExpansion" },
  "expansion.refused": { guard: "expansionPending", actions: "refuseExpansion" },
} as const;

/** Absorbing: nothing changes an ended run. A late report from one of its attempts is still answered with a closed code (the worker learns why), at no write. */
const endedState = {
  on: {
    "step.result": { actions: "answerNotCurrent" },
    "step.heartbeat": { actions: "answerNotCurrent" },
    "effect.intent": { actions: "answerNotCurrent" },
    "effect.receipt": { actions: "answerNotCurrent" },
    "effect.task": { actions: "answerNotCurrent" },
    "effect.gate": { actions: "answerNotCurrent" },
    "effect.input": { actions: "answerNotCurrent" },
    "effect.child": { actions: "answerNotCurrent" },
    "effect.settle": { actions: "answerNotReconciling" },
    "run.signal": { actions: "answerNotWaiting" },
    "approval.decide": { actions: "answerDecisionRefused" },
  },
} as const;

/**
 * The run actor's machine: its states are the run's lifecycle statuses. Each event a live run takes
 * is a named action whose pure decision is in `reduce.ts`; guards refuse stale inputs (an old
 * attempt or epoch, a timer for a node that moved on) with a closed answer and no write. Lifecycle
 * ops a decision takes are raised as `lifecycle.<op>` and taken only where the run table allows.
 */
export const executionMachine = setup({
  types: { context: {} as ExecutionContext, events: {} as RunMachineEvent, emitted: {} as Effect },
  guards: {
    /** The seed breaks the tree shape, or (a child) its parent was cancelled, ended or stopped waiting on it: nothing is created. */
    createRefused: ({ event }) => event.type === "run.create" && createRefusal(event.run, event.parent) !== null,
    timerIsCurrent: ({ context, event }) => {
      if (event.type !== "timer.fired") return false;
      // A wait's deadline is the waiting state's own event (`waitTimer`).
      if (event.kind === "wait") return false;
      if (event.kind === "ceiling") return !!context.run;
      if (event.kind === "admission") return admissionPending(context.run);
      const n = context.run?.nodes[event.node];
      if (!n || n.s !== "active") return false;
      if (event.kind === "sleep" || event.kind === "signal") return n.wake_at !== undefined;
      if (event.kind === "approval") return n.approval?.state === "pending";
      if (event.kind === "lease") return isLeased(holderOf(n, event.item), event.attempt ?? 0, event.lease_epoch ?? 0);
      if (event.kind === "task") return !!holderOf(n, event.item)?.task && isLeased(holderOf(n, event.item), event.attempt ?? 0, event.lease_epoch ?? 0);
      return holdersOf(n).some(([, h]) => h.step?.status === "ready");
    },
    /** The deadline of the run's wait (taken only while it waits). */
    waitTimer: ({ event }) => event.type === "timer.fired" && event.kind === "wait",
    /** An intent, receipt, task or gate question from the attempt the holder runs now. */
    effectIsCurrent: ({ context, event }) =>
      (event.type === "effect.intent" ||
        event.type === "effect.receipt" ||
        event.type === "effect.task" ||
        event.type === "effect.gate" ||
        event.type === "effect.input") &&
      isCurrentAttempt(context.run?.nodes[event.node], event.item, event.attempt, event.lease_epoch),
    /** The current attempt's gated call is decided: approved (or edited), it goes on with the record's arguments; an agent's rejected proposal is answered too. */
    gateOpen: ({ context, event }) =>
      event.type === "effect.gate" &&
      isCurrentAttempt(context.run?.nodes[event.node], event.item, event.attempt, event.lease_epoch) &&
      openGate(context.run, event) !== undefined,
    /** The current attempt's gated call has no approval yet, or a pending one: filed (once) and the step parked. */
    gateWaits: ({ context, event }) =>
      event.type === "effect.gate" &&
      isCurrentAttempt(context.run?.nodes[event.node], event.item, event.attempt, event.lease_epoch) &&
      gateWaits(context.run, event),
    /** The current attempt's intent is gated and no approval lets it through (a handler's call, or other arguments): never recorded. */
    intentNeedsApproval: ({ context, event }) =>
      event.type === "effect.intent" &&
      isCurrentAttempt(context.run?.nodes[event.node], event.item, event.attempt, event.lease_epoch) &&
      intentNeedsApproval(context.run, event),
    /** The journal holds an `observed` receipt for the intent's key: the claim is complete. */
    claimCompleted: ({ context, event }) => isCommand(event) && completedClaim(context.run, event) !== undefined,
    /** This attempt recorded the same intent already: its one call is in flight. */
    intentInFlight: ({ context, event }) => isCommand(event) && intentInFlight(context.run, event),
    /** A receipt for an intent a requested cancel let finish: recorded whatever the attempt's cancellation epoch. */
    lateReceipt: ({ context, event }) => isCommand(event) && isLateReceipt(context.run, event),
    /** A heartbeat of an attempt a requested cancel lets finish: it goes on (nothing is written). */
    letsFinish: ({ context, event }) =>
      event.type === "step.heartbeat" && cancelRequested(context.run) && !!holderOf(context.run!.nodes[event.node] ?? { s: "pending" }, event.item)?.intents,
    /** The decision cannot be taken: its approval is not pending, or out of time (or an edit of an admission approval). */
    decisionRefused: ({ context, event }) => isCommand(event) && decisionAnswer(context.run, event) !== undefined,
    /** The run asked its tenant after a person admitted it: a refusal is its answer. */
    admissionAsked: ({ context }) => admissionAsked(context.run),
    /** A node of the run waits for this signal. */
    signalWaited: ({ context, event }) => event.type === "run.signal" && waitingFor(context.run, event, event.name).length > 0,
    /** The signal's data does not fit a waiting node's schema: refused before anything is written. */
    signalInvalid: ({ context, event }) => isCommand(event) && signalProblem(context.run, event) !== undefined,
    /** A person may settle the key: a step of the run is held on it. */
    reconcileOpen: ({ context, event }) => event.type === "effect.settle" && reconciling(context.run, event.key) !== undefined,
    /** The report was dispatched before the run's last cancellation (of the run, or of its tree): fenced by the cancellation epoch. */
    cancelEpochStale: ({ context, event }) => cancelStale(context, event),
    /** A report from the attempt the holder runs now, dispatched since the run's last cancellation: it is applied. */
    reportApplies: ({ context, event }) =>
      isReport(event) && !cancelStale(context, event) && isCurrentAttempt(context.run?.nodes[event.node], event.item, event.attempt, event.lease_epoch),
    childIsCurrent: ({ context, event }) =>
      event.type === "child.settled" && context.run?.nodes[event.node]?.s === "active" && context.run.nodes[event.node]?.child === event.child,
    /** Something in flight is lost: an offer, or a leased or running attempt not still executing in the claiming process. */
    recoverable: ({ context, event }) => {
      const alive = event.type === "run.recover" ? (event.alive ?? []) : [];
      return Object.entries(context.run?.nodes ?? {}).some(
        ([id, n]) => n.s === "active" && liveAttempts(id, holdersOf(n)).some((a) => !isAlive(alive, id, a.item, a)),
      );
    },
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
    /** A lifecycle op a decision took: the run's lifecycle columns, as the run table writes them (the stored record keeps them). */
    applyMove: assign(({ context, event }) => {
      if (isCommand(event) || !context.run) return {};
      const r = applyRunOp(context.run.lifecycle, event.move);
      return r.outcome === "moved" ? { run: { ...context.run, lifecycle: r.state } } : {};
    }),
    answerStaleCancel: emit({ type: "runway.answer", value: { outcome: "stale_cancel_epoch" } }),
    /** A report that is not applied: fenced by the cancellation epoch, or from an attempt or lease epoch no longer current. */
    answerNotCurrent: enqueueActions(({ context, event, enqueue }) => {
      enqueue.emit({ type: "runway.answer", value: { outcome: cancelStale(context, event) ? "stale_cancel_epoch" : "stale_lease" } });
    }),
    answerClaim: enqueueActions(({ context, event, enqueue }) => {
      const claim = isCommand(event) ? completedClaim(context.run, event) : undefined;
      if (claim) enqueue.emit({ type: "runway.answer", value: { outcome: "observed", value: claim.value } });
    }),
    answerInFlight: emit({ type: "runway.answer", value: { outcome: "in_flight" } }),
    answerNeedsApproval: emit({ type: "runway.answer", value: { outcome: "needs_approval" } }),
    answerGateOpen: enqueueActions(({ context, event, enqueue }) => {
      const open = isCommand(event) ? openGate(context.run, event) : undefined;
      if (open) enqueue.emit({ type: "runway.answer", value: open });
    }),
    answerLetFinish: emit({ type: "runway.answer", value: { outcome: "let_finish" } }),
    answerNotWaiting: emit({ type: "runway.answer", value: { outcome: "run_not_waiting" } }),
    answerDecisionRefused: enqueueActions(({ context, event, enqueue }) => {
      if (isCommand(event)) enqueue.emit({ type: "runway.answer", value: decisionAnswer(context.run, event) });
    }),
    answerSignalInvalid: enqueueActions(({ context, event, enqueue }) => {
      if (isCommand(event)) enqueue.emit({ type: "runway.answer", value: { outcome: "invalid_input", reason: signalProblem(context.run, event) } });
    }),
    answerNotReconciling: emit({ type: "runway.answer", value: { outcome: "not_reconciling" } }),
    answerCreateRefused: enqueueActions(({ event, enqueue }) => {
      if (event.type === "run.create") enqueue.emit({ type: "runway.answer", value: createRefusal(event.run, event.parent) });
    }),
    create: decision("run.create", decisions.create),
    applyResult: decision("step.result", decisions.result),
    applyHeartbeat: decision("step.heartbeat", decisions.heartbeat),
    applyTimer: decision("timer.fired", decisions.timer),
    settleChild: decision("child.settled", decisions.child),
    cancel: decision("run.cancel", decisions.cancel),
    recover: decision("run.recover", decisions.recover),
    admit: decision("run.admitted", decisions.admitted),
    refuseAdmission: decision("run.admission_refused", decisions.admissionRefused),
    sweep: decision("run.sweep", decisions.sweep),
    parentGone: decision("run.parent_gone", decisions.parentGone),
    recordIntent: decision("effect.intent", decisions.intent),
    recordReceipt: decision("effect.receipt", decisions.receipt),
    settleEffect: decision("effect.settle", decisions.settle),
    recordTask: decision("effect.task", decisions.task),
    parkOnGate: decision("effect.gate", decisions.gate),
    parkOnInput: decision("effect.input", decisions.input),
    callSubagent: decision("effect.child", decisions.childCall),
    deliverSignal: decision("run.signal", decisions.signal),
    decideApproval: decision("approval.decide", decisions.approve),
    applyLateResult: decision("step.result", decisions.lateResult),
    recordLateReceipt: decision("effect.receipt", decisions.lateReceipt),
    admitExpansion: decision("expansion.admitted", decisions.expansionAdmitted),
    refuseExpansion: decision("expansion.refused", decisions.expansionRefused),
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
          { target: "live", actions: "create" },
        ],
      },
    },
    live: {
      // The events every live status takes alike, declared once; each child holds its own.
      initial: "queued",
      on: LIVE_EVENTS,
      states: {
        // Only a queued run is admitted by its tenant.
        queued: {
          on: {
            ...lifecycleMoves("queued"),
            "run.admitted": { actions: "admit" },
            "run.admission_refused": { guard: "admissionAsked", actions: "refuseAdmission" },
          },
        },
        running: { on: lifecycleMoves("running") },
        // Only a waiting run's wait runs out; other timers fall through to `live`.
        waiting: { on: { ...lifecycleMoves("waiting"), "timer.fired": { guard: "waitTimer", actions: "applyTimer" } } },
      },
    },
    ...Object.fromEntries([...TERMINAL].map((status) => [status, endedState])),
  },
});
