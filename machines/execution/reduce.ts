import { onIntent, onReceipt, onSettle, onTask, pollTask, recordReceipt } from "./intents.js";
import { onSignal, onSignalTimeout } from "./signals.js";
import { expireApproval, onDecide, onGate, onInput } from "./approvals.js";
import { onChildCall, onChildSettled } from "./subagents.js";
import {
  ADMISSION,
  closeAdmission,
  endUnstarted,
  expireAdmission,
  heldForAdmission,
  holdForAdmission,
  onAdmissionDecide,
  onAdmissionRefused,
} from "./admission.js";
import { cancelRequested, holdUnknown, onCancel, onLateReceipt, onLateResult, settleUnderCancel } from "./cancel.js";
import { queuedLifecycle, type RunOpEvent } from "../run/index.js";
import { applyStepOp, type StepError } from "../step/index.js";
import { planIndex, validateAgainstSchema } from "../workflow/index.js";
import { failurePolicy, holderOf, loseDispatch, offer, policyOf, pumpMap, retryOrFail, settleItem, takeOffer } from "./attempts.js";
import { expireLease, isAlive, leaseHandedOver, onHeartbeat, type AliveAttempt } from "./leases.js";
import { fail, holdersOf, METRICS_CHANNEL, move, PLATFORM_RETRIES, publish, runSummary, succeed, type Draft, type Effect } from "./draft.js";
import { admitItems, askExpansion, releaseExpansions } from "./expansion.js";
import { advance, ceilingStop, finish, stopNodes } from "./progression.js";
import { wallHit } from "./ceilings.js";
import { sweepPlan } from "./sweep.js";
import { draftMap, sealDrafts } from "./items.js";
import { RUN_CONTEXT_VERSION, type ExecutionContext, type MapRun, type NodeRun, type RunContext, type RunMemory } from "./types.js";
import { type ExecutionEvent } from "./requests.js";

export {
  MAX_DEPTH,
  MAP_OUTPUT_LIMIT,
  WAIT_GRACE_MS,
  STEP_ABORT,
  TASK_POLL,
  type TaskPoll,
  STEP_READY,
  STEP_LAPSED,
  type AbortRequest,
  METRICS_CHANNEL,
  type RunLocalChannels,
  type RunAnswer,
  type MachineCounter,
  PLATFORM_RETRIES,
  runSummary,
  type Effect,
} from "./draft.js";
export { LEASE_GRACE_MS, LEASE_AFTER_MS, LEASE_LAPSED, ATTEMPT_INTERRUPTED } from "./attempts.js";

const NO_OUTPUTS = { output: () => undefined, item: () => undefined, receipt: () => undefined };

/**
 * What one decision produced: the run's next data, the effects to perform once it is stored, and
 * the lifecycle ops it took, in order, for the machine to take as transitions (the data's
 * `lifecycle` is left as the machine had it).
 */
export type Decided = { context: ExecutionContext; effects: Effect[]; moves: RunOpEvent[] };

/**
 * The pure decisions behind the run machine's named actions: the DAG walk. A plain reducer on
 * purpose: a step's effect on nodes, items and timers is data, not states a person would draw, and
 * one pass decides the whole event (XState's per-transition cost, paid per node op, would be a
 * step's whole budget). The run's status is not its to write: lifecycle ops go to the machine.
 */
function decide(context: ExecutionContext, event: ExecutionEvent, apply: (d: Draft) => void): Decided {
  const run = event.type === "run.create" ? create(event) : copyForWrite(context.run!);
  const memory: RunMemory = event.type === "run.create" ? { input: event.run.input ?? {}, ...NO_OUTPUTS } : (event.memory ?? { input: {}, ...NO_OUTPUTS });
  const d: Draft = {
    run,
    plan: event.plan,
    byId: planIndex(event.plan),
    now: event.now,
    event,
    effects: [],
    memory,
    fresh: new Map(),
    lifecycle: run.lifecycle,
    moves: [],
  };
  apply(d);
  releaseExpansions(d);
  closeAdmission(d);
  sealDrafts(mapsOf(d.run));
  return { context: { run: d.run }, effects: d.effects, moves: d.moves };
}

type On<T extends ExecutionEvent["type"]> = Extract<ExecutionEvent, { type: T }>;

/** The decisions, one per event the run takes (the machine names each as an action). */
export const decisions = {
  create: (c: ExecutionContext, e: On<"run.create">) => decide(c, e, onCreate),
  result: (c: ExecutionContext, e: On<"step.result">) => decide(c, e, (d) => onResult(d, e)),
  heartbeat: (c: ExecutionContext, e: On<"step.heartbeat">) => decide(c, e, (d) => onHeartbeat(d, e)),
  timer: (c: ExecutionContext, e: On<"timer.fired">) => decide(c, e, (d) => onTimer(d, e)),
  child: (c: ExecutionContext, e: On<"child.settled">) => decide(c, e, (d) => onChildSettled(d, e)),
  cancel: (c: ExecutionContext, e: On<"run.cancel">) => decide(c, e, (d) => onCancel(d, e.reason, e.by)),
  recover: (c: ExecutionContext, e: On<"run.recover">) => decide(c, e, (d) => onRecover(d, e.alive ?? [], e.reason === HANDED_OVER)),
  admitted: (c: ExecutionContext, e: On<"run.admitted">) => decide(c, e, begin),
  admissionRefused: (c: ExecutionContext, e: On<"run.admission_refused">) => decide(c, e, (d) => onAdmissionRefused(d, e)),
  sweep: (c: ExecutionContext, e: On<"run.sweep">) => decide(c, e, (d) => onSweep(d, e.at, e.held ?? [])),
  parentGone: (c: ExecutionContext, e: On<"run.parent_gone">) => decide(c, e, (d) => onParentGone(d, e.parent_status)),
  intent: (c: ExecutionContext, e: On<"effect.intent">) => decide(c, e, (d) => onIntent(d, e)),
  receipt: (c: ExecutionContext, e: On<"effect.receipt">) => decide(c, e, (d) => onReceipt(d, e)),
  settle: (c: ExecutionContext, e: On<"effect.settle">) => decide(c, e, (d) => (cancelRequested(d.run) ? settleUnderCancel(d, e) : onSettle(d, e))),
  task: (c: ExecutionContext, e: On<"effect.task">) => decide(c, e, (d) => onTask(d, e)),
  gate: (c: ExecutionContext, e: On<"effect.gate">) =>
    decide(c, e, (d) => {
      onGate(d, e);
      advance(d);
    }),
  input: (c: ExecutionContext, e: On<"effect.input">) =>
    decide(c, e, (d) => {
      onInput(d, e);
      advance(d);
    }),
  childCall: (c: ExecutionContext, e: On<"effect.child">) =>
    decide(c, e, (d) => {
      onChildCall(d, e);
      advance(d);
    }),
  signal: (c: ExecutionContext, e: On<"run.signal">) => decide(c, e, (d) => onSignal(d, e)),
  approve: (c: ExecutionContext, e: On<"approval.decide">) =>
    decide(c, e, (d) => {
      if (e.node === ADMISSION) return onAdmissionDecide(d, e);
      onDecide(d, e);
      advance(d);
    }),
  lateResult: (c: ExecutionContext, e: On<"step.result">) => decide(c, e, (d) => onLateResult(d, e)),
  lateReceipt: (c: ExecutionContext, e: On<"effect.receipt">) => decide(c, e, (d) => onLateReceipt(d, e)),
  expansionAdmitted: (c: ExecutionContext, e: On<"expansion.admitted">) =>
    decide(c, e, (d) => {
      admitItems(d, e.node);
      advance(d);
    }),
  expansionRefused: (c: ExecutionContext, e: On<"expansion.refused">) =>
    decide(c, e, (d) => {
      fail(d, e.node, { code: e.code, message: e.message });
      advance(d);
    }),
};

/**
 * A copy the reducer may change without touching the previous snapshot: the reducer only ever
 * assigns properties of the run, of its nodes, of a map's live items and of their holders (step
 * states and errors are replaced, never edited), so copying those levels is enough. A map's
 * items are copied when the decision reaches them (items.ts), not all of them up front.
 */
function copyForWrite(run: RunContext): RunContext {
  const nodes: Record<string, NodeRun> = {};
  for (const id in run.nodes) {
    const n = run.nodes[id]!;
    nodes[id] = n.map ? { ...n, map: draftMap(n.map) } : { ...n };
  }
  return { ...run, nodes };
}

function mapsOf(run: RunContext): MapRun[] {
  const maps: MapRun[] = [];
  for (const id in run.nodes) {
    const map = run.nodes[id]!.map;
    if (map) maps.push(map);
  }
  return maps;
}

function create(event: Extract<ExecutionEvent, { type: "run.create" }>): RunContext {
  const { input: _input, ...seed } = event.run;
  const nodes: Record<string, NodeRun> = {};
  for (const n of event.plan.nodes) nodes[n.id] = { s: "pending" };
  // A plain key first: V8 (Node 20) gives an object literal that starts with a spread and adds
  // keys a hidden class of its own, so every run's head would carry one (memory, and megamorphic code).
  return {
    v: RUN_CONTEXT_VERSION,
    ...seed,
    // The machine's create transition enters `queued`: the seed's columns say so.
    lifecycle: queuedLifecycle(),
    created_at: event.now,
    cancellation_epoch: 0,
    nodes,
    result: null,
    result_truncated: false,
    error: null,
    cancel: null,
  };
}

function onCreate(d: Draft): void {
  // The input is stored once, as the first fact of the run's journal.
  d.effects.push({ type: "runway.journal", data: { t: "input", value: d.memory.input } });
  const refused = d.run.parent_run_id !== null ? d.event.refused : undefined;
  if (refused) {
    // A child its start gate refused exists, already failed under the gate's code: it runs
    // nothing, and its parent reads that code from the `child.settled` it is sent (C047, C048).
    endUnstarted(d, { code: refused.code, message: refused.message });
    d.effects.push({ type: "runway.answer", value: { outcome: "started", run: runSummary(d.run, d.lifecycle), error_code: refused.code } });
    return;
  }
  if (heldForAdmission(d.plan, d.run)) {
    // A person admits it first: held in this very write, it asks its tenant only once approved.
    holdForAdmission(d);
  } else if (d.run.admission === "queued") {
    // Behind its tenant's caps: it starts on `run.admitted`. Its slot may already have been
    // given (the tenant may have admitted it before this create was stored): ask once now.
    publish(d, "run_queued", { definition: d.run.definition });
    d.effects.push({ type: "runway.send", to: { kind: "tenant", id: d.run.tenant }, event: { type: "tenant.recheck", run_id: d.run.id } });
  } else {
    begin(d);
  }
  d.effects.push({ type: "runway.answer", value: { outcome: "started", run: runSummary(d.run, d.lifecycle) } });
}

/** The run starts: queued → running, its input checked against the definition's schema, its first nodes started. */
function begin(d: Draft): void {
  move(d, "claim");
  publish(d, "run_started", { definition: d.run.definition, parent: d.run.parent_run_id });
  const schema = d.plan.input_schema;
  const checked = schema ? validateAgainstSchema(schema, d.memory.input) : ({ ok: true } as const);
  if (!checked.ok) {
    finish(d, "failed", { code: "invalid_input", message: checked.errors.map((e) => `${e.path}: ${e.message}`).join("; ") });
  } else {
    const wall = d.plan.limits?.max_wall_ms;
    if (wall !== undefined)
      d.effects.push({ type: "runway.timer.set", name: "ceiling-wall", at: d.now + wall, event: { type: "timer.fired", kind: "ceiling", node: "(run)" } });
    advance(d);
  }
}

/** A step's result: it leases the offered attempt it ran as (if no heartbeat did) and settles it. */
function onResult(d: Draft, e: Extract<ExecutionEvent, { type: "step.result" }>): void {
  const node = d.byId.get(e.node)!;
  const n = d.run.nodes[e.node]!;
  const holder = holderOf(n, e.item)!;
  if (holder.step!.status === "ready") takeOffer(d, holder);
  // The receipt the output is (a tool node's answer), when this write journals it: the output names it, not a second copy.
  let once: string | undefined;
  for (const receipt of e.receipts ?? [])
    if (recordReceipt(d, e.node, e.item, holder, receipt) && receipt.key === e.output_receipt && receipt.state === "observed") once = receipt.key;
  delete holder.task;
  const step = holder.step!;
  const error: StepError = e.error ?? { code: "handler_error", message: "failed", retryable: true };
  const r =
    e.outcome === "succeeded"
      ? applyStepOp(step, { op: "succeed", now: d.now, attempt: e.attempt, lease_epoch: e.lease_epoch })
      : applyStepOp(step, { op: "fail", now: d.now, attempt: e.attempt, lease_epoch: e.lease_epoch, error, policy: failurePolicy(node, holder, error) });
  if (r.outcome !== "moved") return;
  holder.step = r.state;
  delete holder.lease_expires_at;
  const output = e.outcome === "succeeded" ? resultOutput(d, e) : undefined;
  if (r.state.status === "ready") {
    publish(d, "step_retrying", {
      node: e.node,
      ...(e.item !== undefined ? { item: e.item } : {}),
      attempt: e.attempt,
      error,
      not_before: r.state.not_before,
    });
  }
  if (node.kind === "map") {
    settleItem(d, node, e.item!, output, e.output_bytes);
    if (n.s === "active") pumpMap(d, node);
  } else if (r.state.status === "succeeded") {
    // A tool node's write keeps the refs it reported with its result (C074).
    if (e.refs?.length && node.kind === "code" && node.tool) n.refs = e.refs;
    succeed(d, e.node, output, e.attempt, once);
  } else {
    retryOrFail(d, node, undefined, error);
  }
  advance(d);
}

/** A successful result's output: its own, or (a tool node's) the value of the observed receipt it names, sent with it or stored before. */
function resultOutput(d: Draft, e: Extract<ExecutionEvent, { type: "step.result" }>): unknown {
  if (e.output_receipt === undefined) return e.output === undefined ? null : e.output;
  const key = e.output_receipt;
  const r = e.receipts?.find((x) => x.key === key && x.state === "observed") ?? d.memory.receipt(key);
  return r?.state === "observed" ? r.value : e.output === undefined ? null : e.output;
}

function onTimer(d: Draft, e: Extract<ExecutionEvent, { type: "timer.fired" }>): void {
  const node = d.byId.get(e.node);
  const n = d.run.nodes[e.node];
  if (e.kind === "admission") return expireAdmission(d, d.now);
  if (e.kind === "ceiling") {
    const hit = wallHit(d);
    if (hit) ceilingStop(d, hit);
    return;
  }
  if (e.kind === "wait") {
    // One expiry clock per wait: a run still parked past its deadline and grace is abandoned.
    const lc = d.lifecycle;
    if (lc.status === "waiting" && lc.waiting_expires_at !== null && d.now >= lc.waiting_expires_at) {
      finish(d, "failed", { code: "wait_abandoned", message: `waiting on ${lc.waiting_on} past ${new Date(lc.waiting_expires_at).toISOString()}` });
    }
    return;
  }
  if (!node || !n) return;
  if (e.kind === "task") return pollTask(d, e.node, e.item);
  if (e.kind === "approval") {
    // An expired action approval ends the run: after work a success with partial_reason, before any a failure.
    if (expireApproval(d, e.node)) return ceilingStop(d, `approval deadline (${e.node})`, "approval_expired");
  } else if (e.kind === "signal") onSignalTimeout(d, e.node);
  else if (e.kind === "sleep") {
    succeed(d, e.node);
  } else if (e.kind === "lease" && cancelRequested(d.run)) {
    const holder = holderOf(n, e.item);
    if (holder) holdUnknown(d, holder);
  } else if (e.kind === "lease") {
    expireLease(d, node, e.item);
  } else if (node.kind === "map") {
    pumpMap(d, node);
  } else {
    offer(d, node, n, undefined);
  }
  advance(d);
}

/**
 * The sweep's repairs (see `sweep.ts`), decided again here on the run as it is now. They are
 * judged at the sweeper's clock `at` (so a test or an operator can sweep "three days later") and
 * stamped with the actor's own clock (a retry's backoff counts from now).
 */
function onSweep(d: Draft, at: number, held: readonly string[]): void {
  const maps = new Set<string>();
  for (const a of sweepPlan(d.run, at, d.event.sweep, held)) {
    if (a.action === "recheck_admission") continue;
    d.effects.push({ type: "runway.local", channel: METRICS_CHANNEL, payload: { counter: "sweep_actions", tenant: d.run.tenant, action: a.action } });
    if (a.action === "wait_abandoned") {
      // A held run whose timer was lost expires as its timer would have expired it.
      if (d.run.admission_approval?.state === "pending") return expireAdmission(d, at);
      const lc = d.lifecycle;
      finish(d, "failed", {
        code: "wait_abandoned",
        message: `waiting on ${lc.waiting_on} past ${new Date(lc.waiting_expires_at ?? d.now).toISOString()} (recovery sweep)`,
      });
      return;
    }
    const node = d.byId.get(a.node);
    const n = d.run.nodes[a.node];
    if (!node || !n || n.s !== "active") continue;
    if (a.action === "recheck_expansion") {
      askExpansion(d, a.node, n.expansion!.children);
    } else if (a.action === "expire_lease") {
      expireLease(d, node, a.item, at);
    } else if (a.action === "dispatch_lost") {
      loseDispatch(d, node, a.item, at);
    } else {
      const holder = holderOf(n, a.item);
      if (!holder) continue;
      delete holder.offered;
      holder.reoffered = true;
      if (node.kind === "map") maps.add(a.node);
      else offer(d, node, holder, undefined);
    }
  }
  for (const id of maps) {
    const node = d.byId.get(id)!;
    if (node.kind === "map" && d.run.nodes[id]!.s === "active") pumpMap(d, node);
  }
  advance(d);
}

/**
 * A child whose parent ended (or stopped waiting on it): it ends `parent_gone`, and its own children
 * are told the same. A cancelled parent's cancel had not reached it (delayed or lost with a server):
 * it is that cancel, so a cancelled tree's runs all end cancelled (C097).
 */
function onParentGone(d: Draft, parentStatus: string): void {
  if (parentStatus === "cancelled") return onCancel(d, "parent_cancelled", d.run.parent_run_id ?? "sweep");
  stopNodes(d, "parent_gone");
  d.effects.push({ type: "runway.local", channel: METRICS_CHANNEL, payload: { counter: "sweep_actions", tenant: d.run.tenant, action: "parent_gone" } });
  finish(d, "failed", { code: "parent_gone", message: `parent run ${d.run.parent_run_id} is ${parentStatus} (recovery sweep)` });
}

/** `run.recover`'s reason when the partition was handed over by a live owner (it released it). */
export const HANDED_OVER = "handed_over";

/**
 * After a restart or takeover: what lived in the lost process is lost. An attempt offered there
 * (granted in memory, or still queued) or leased there fails `worker_lost` and retries at once,
 * as a new attempt. Attempts still executing in the claiming process are left alone. After a
 * hand-over (`handedOver`) the previous owner lives and reports what it still executes here: its
 * attempts are leased instead (a running one's result is taken; one that never runs there lapses
 * at once, reported `lease_lapsed`, or, lost with its node, at its lease's end).
 */
function onRecover(d: Draft, alive: readonly AliveAttempt[], handedOver = false): void {
  if (cancelRequested(d.run)) {
    // Under a requested cancel nothing runs again: a call it let finish, lost with its node, is a person's to settle.
    for (const [id, n] of Object.entries(d.run.nodes))
      if (n.s === "active") for (const [item, h] of holdersOf(n)) if (h.step && !isAlive(alive, id, item, h.step)) holdUnknown(d, h);
    return;
  }
  const lost: StepError = { code: "worker_lost", message: "the node running this attempt stopped", retryable: true };
  for (const node of d.plan.nodes) {
    const n = d.run.nodes[node.id]!;
    if (n.s !== "active") continue;
    // A lost worker is the platform's failure, not the handler's: it is retried at once and
    // does not use up the node's own retry budget.
    for (const [item, holder] of holdersOf(n)) {
      const own = policyOf(node, holder);
      const policy = { ...own, backoff_ms: 0, max_attempts: own.max_attempts + PLATFORM_RETRIES };
      // An attempt waiting on an MCP task runs nowhere: its durable timer goes on polling the same task.
      if (holder.task) continue;
      if (handedOver) {
        const s = holder.step!;
        const offered = s.status === "ready" && holder.offered !== undefined;
        const attempt = offered ? { attempt: holder.offered!, lease_epoch: s.lease_epoch + 1 } : s;
        if ((offered || s.status === "leased" || s.status === "running") && !isAlive(alive, node.id, item, attempt)) leaseHandedOver(d, node, holder, item);
        continue;
      }
      if (holder.step!.status === "ready" && holder.offered !== undefined) {
        if (isAlive(alive, node.id, item, { attempt: holder.offered, lease_epoch: holder.step!.lease_epoch + 1 })) continue;
        // It may have run in the lost process (or still run there, cut off): it is that attempt's
        // failure, so its number and lease epoch are never run again and a late report is refused.
        takeOffer(d, holder);
      }
      const s = holder.step!;
      if ((s.status !== "leased" && s.status !== "running") || isAlive(alive, node.id, item, s)) continue;
      const r = applyStepOp(s, { op: "fail", now: d.now, attempt: s.attempt, lease_epoch: s.lease_epoch, error: lost, policy });
      if (r.outcome !== "moved") continue;
      holder.step = r.state;
      delete holder.lease_expires_at;
      // Stored with the recovery, so the journal says why the step runs again.
      if (r.state.status === "ready")
        publish(d, "step_retrying", {
          node: node.id,
          ...(item !== undefined ? { item } : {}),
          attempt: s.attempt,
          error: lost,
          not_before: r.state.not_before,
        });
      if (node.kind !== "map") retryOrFail(d, node, undefined, lost);
      else settleItem(d, node, item!, undefined);
    }
    if (node.kind === "code" && n.step?.status === "ready" && n.offered === undefined) offer(d, node, n, undefined);
    if (node.kind === "map" && n.map && n.s === "active") pumpMap(d, node);
  }
  advance(d);
}
