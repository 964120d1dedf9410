import { bound } from "../bound.js";
import { isTerminal, type RunOpEvent } from "../run/index.js";
import { applyStepOp, pendingStep } from "../step/index.js";
import { isCeilingReason, mapItems, progress, resolveTemplate, runOutcome, runResult, stopsRun, type CeilingReason, type PlanNode } from "../workflow/index.js";
import { childPriority } from "../scheduler/index.js";
import { mergeRefs } from "../tools/index.js";
import { DEFAULT_PRIORITY, offer, pumpMap, ready } from "./attempts.js";
import { newMap } from "./items.js";
import { abortAttempts, fail, holdersOf, liveAttempts, MAX_DEPTH, move, publish, scopeOf, states, succeed, WAIT_GRACE_MS, type Draft } from "./draft.js";
import { askExpansion } from "./expansion.js";
import { cancelAskingTask, startApproval } from "./approvals.js";
import { ceilingDrain, stepsHit, stopIdle, wallHit } from "./ceilings.js";
import type { ItemRun, NodeRun, RunError } from "./types.js";

/**
 * How a run moves forward and ends: the walk (start what became ready, skip what never will,
 * settle structural nodes), parking on timers, the terminal write and the word to the parent or
 * the tenant. Every event handler in `reduce.ts` ends in these.
 */

/**
 * The walk: `progress` (machines/workflow) decides skips, structural settles and work to start; the
 * run records them. Starting may settle a node at once (an empty map), so it repeats until nothing
 * changes, then settles the run. A platform stop or a ceiling ends the walk there.
 */
export function advance(d: Draft): void {
  for (let guard = 0; guard < d.plan.nodes.length * 4 + 8; guard++) {
    if (d.stop) return stopRun(d);
    if (d.run.ceiling) return drain(d);
    const step = progress(d.plan, states(d), d.memory.input);
    for (const id of step.skipped) {
      d.run.nodes[id] = { s: "skipped" };
      publish(d, "step_skipped", { node: id });
    }
    const unreadable = new Map(step.fatal.map((f) => [f.id, f]));
    for (const settled of step.settled) {
      const f = unreadable.get(settled.id);
      const kind = d.byId.get(settled.id)?.kind;
      if (f) fail(d, settled.id, { code: f.code, message: `unreadable condition ${f.path}` });
      else if (settled.status === "failed") fail(d, settled.id, { code: "branch_failed", message: `a member of ${settled.id} failed` });
      else if (kind === "branch") {
        d.run.nodes[settled.id]!.taken = settled.taken;
        succeed(d, settled.id);
      } else succeed(d, settled.id);
    }
    if (d.stop) return stopRun(d);
    if (step.ready.length === 0) break;
    for (const id of step.ready) {
      const wall = wallHit(d);
      if (wall) return ceilingStop(d, wall);
      const steps = stepsHit(d);
      if (steps) {
        ceilingDrain(d, steps, "limit_reached");
        return drain(d);
      }
      start(d, d.byId.get(id)!);
      if (d.stop) return stopRun(d);
    }
  }
  settleRun(d);
}

/** Under a draining ceiling (`ceilings.ts`): nothing starts, what is not in flight stops; the run settles once nothing is. */
export function drain(d: Draft): void {
  stopIdle(d);
  // A map's held platform stop settled as it drained: it stops the run as any platform stop does.
  if (d.stop) return stopRun(d);
  settleRun(d);
}

/**
 * A ceiling that stops everything now (attempts aborted and fenced, children cancelled), and the
 * run settles: the wall clock (its time is up), or an action approval's deadline
 * (`approval_expired`: the gated work must not run).
 */
export function ceilingStop(d: Draft, which: string, reason: CeilingReason = "limit_reached"): void {
  if (isTerminal(d.lifecycle.status)) return;
  // A platform stop a map holds was returned before the time ran out: it wins (C063, C064).
  for (const [id, n] of Object.entries(d.run.nodes)) if (n.s === "active" && n.map?.stop) fail(d, id, n.map.stop.error);
  if (d.stop) return stopRun(d);
  ceilingDrain(d, which, reason);
  stopNodes(d, d.run.ceiling!.reason);
  settleRun(d);
}

/** The one status rule, for the run's ceiling: after work (a work node succeeded) a partial success; before any a failure carrying the reason. */
function ceilingEnd(d: Draft): void {
  const { reason, which } = d.run.ceiling!;
  const worked = d.plan.nodes.some((n) => n.kind !== "branch" && n.kind !== "parallel" && n.kind !== "branch_end" && d.run.nodes[n.id]?.s === "succeeded");
  if (worked) {
    d.run.partial_reason = reason;
    finish(d, "succeeded");
  } else finish(d, "failed", { code: reason, message: `the run reached its ${which} before any work`, partial_reason: reason });
}

/** A platform stop: everything still pending or active is stopped (children cancelled, attempts fenced), and the run fails with the stop's code. */
function stopRun(d: Draft): void {
  if (isTerminal(d.lifecycle.status)) return;
  const { node, error } = d.stop!;
  stopNodes(d, "parent_failed");
  finish(d, "failed", { code: error.code, message: `${node}: ${error.message}`, nodes: [node], ...(error.error_code ? { error_code: error.error_code } : {}) });
}

export function start(d: Draft, node: PlanNode): void {
  const n = d.run.nodes[node.id]!;
  if (node.kind !== "branch" && node.kind !== "parallel" && node.kind !== "branch_end") {
    const usage = d.run.usage ?? { steps: 0, tool_calls: 0 };
    d.run.usage = { ...usage, steps: usage.steps + 1 };
  }
  switch (node.kind) {
    case "code": {
      n.s = "active";
      n.step = ready(pendingStep(), d.now);
      offer(d, node, n, undefined);
      return;
    }
    case "map":
      return startMap(d, node, n);
    case "subworkflow":
      return startChild(d, node, n);
    case "sleep": {
      n.s = "active";
      n.wake_at = d.now + node.duration_ms;
      d.effects.push({ type: "runway.timer.set", name: `sleep-${node.id}`, at: n.wake_at, event: { type: "timer.fired", kind: "sleep", node: node.id } });
      publish(d, "step_started", { node: node.id, wake_at: n.wake_at });
      return;
    }
    case "approval":
      return startApproval(d, node);
    case "wait": {
      n.s = "active";
      n.wake_at = d.now + node.timeout_ms;
      d.effects.push({ type: "runway.timer.set", name: `wait-${node.id}`, at: n.wake_at, event: { type: "timer.fired", kind: "signal", node: node.id } });
      publish(d, "step_started", { node: node.id, signal: node.signal, until: n.wake_at });
      return;
    }
    // Structural nodes (branch, parallel, branch_end) are settled by the walk, never started.
    default:
      return;
  }
}

/** A map starts its items (after its tenant admits them, when it must ask), or succeeds at once with none. */
function startMap(d: Draft, node: Extract<PlanNode, { kind: "map" }>, n: NodeRun): void {
  const items = mapItems(node, scopeOf(d));
  if (!items.ok) return fail(d, node.id, { code: items.code, message: items.detail });
  if (items.items.length === 0) {
    n.map = newMap(0);
    return succeed(d, node.id);
  }
  n.s = "active";
  if (d.event.expansion_admission) return askExpansion(d, node.id, items.items.length);
  n.map = newMap(items.items.length);
  pumpMap(d, node);
}

/** A subworkflow node creates its child run (its id and pinned definition came with the event). */
function startChild(d: Draft, node: Extract<PlanNode, { kind: "subworkflow" }>, n: NodeRun): void {
  const child = d.event.child_ids?.[node.id];
  const definition = d.event.child_definitions?.[node.workflow];
  if (d.run.depth + 1 > MAX_DEPTH)
    return fail(d, node.id, { code: "depth_exceeded", message: `a child would be at depth ${d.run.depth + 1}; the limit is ${MAX_DEPTH}` });
  if (!child || !definition) return fail(d, node.id, { code: "definition_not_found", message: `workflow ${node.workflow} is not published` });
  const input = resolveTemplate(node.input ?? null, scopeOf(d));
  if (!input.ok) return fail(d, node.id, { code: "reference_unreadable", message: `unreadable reference ${input.path}` });
  n.s = "active";
  n.child = child;
  sendChildCreate(d, node.id, child, definition, input.value);
  publish(d, "step_started", { node: node.id, child });
}

/**
 * The `run.create` of a child of node `nodeId` (a subworkflow node's, or an agent's subagent):
 * batch lane, its parent's project and deadline, a priority below its parent's, and the tree's
 * money ceiling (a subagent's `slice` lowers it for that child).
 */
export function sendChildCreate(
  d: Draft,
  nodeId: string,
  child: string,
  definition: NonNullable<Draft["event"]["child_definitions"]>[string],
  input: unknown,
  options: { start_key?: string; slice_cents?: number; tool_scope?: string[] } = {},
): void {
  const scope = options.tool_scope ?? d.run.tool_scope;
  const startKey = options.start_key;
  const ceiling = options.slice_cents === undefined ? d.run.cost_ceiling_cents : Math.min(options.slice_cents, d.run.cost_ceiling_cents ?? options.slice_cents);
  const r = d.run;
  d.effects.push({
    type: "runway.send",
    to: { kind: "run", id: child },
    event: {
      type: "run.create",
      run: {
        id: child,
        tenant: r.tenant,
        root_run_id: r.root_run_id,
        parent_run_id: r.id,
        parent_node: nodeId,
        depth: r.depth + 1,
        definition,
        source: "workflow_step",
        start_key: startKey ?? `${r.id}:${nodeId}`,
        // Every child is batch, counts under its parent's project, and never outranks its parent.
        lane: "batch",
        ...(r.project ? { project: r.project } : {}),
        priority: childPriority(r.priority ?? DEFAULT_PRIORITY),
        ...(r.deadline != null ? { deadline: r.deadline } : {}),
        // Money is one bill: the child spends its root's ceiling, whatever its own definition says.
        ...(ceiling !== undefined ? { cost_ceiling_cents: ceiling } : {}),
        // No more tools than its delegator: a subagent's scope, or its parent's.
        ...(scope !== undefined ? { tool_scope: scope } : {}),
        // One tree, one trace: the root's trace context goes down to every child.
        ...(r.trace ? { trace: r.trace } : {}),
        input,
      },
    },
  });
}

/**
 * Nothing more is scheduled: pending and active nodes are cancelled, running attempts fenced by a
 * new cancellation epoch, children told. Holders `spare` names (a call in flight that a cancel
 * lets finish) keep running, and their node stays active.
 */
export function stopNodes(d: Draft, childReason: string, spare: (h: ItemRun | NodeRun) => boolean = () => false): void {
  d.run.cancellation_epoch++;
  // A spared attempt waiting on an MCP task is still told: its task is asked to stop (it then ends cancelled, its receipt says so).
  const live = Object.entries(d.run.nodes).flatMap(([id, n]) =>
    n.s === "active"
      ? liveAttempts(
          id,
          holdersOf(n).filter(([, h]) => !spare(h) || h.task),
        )
      : [],
  );
  abortAttempts(d, live, childReason);
  for (const [id, n] of Object.entries(d.run.nodes)) {
    if (n.s !== "pending" && n.s !== "active") continue;
    const spared = holdersOf(n).some(([, h]) => spare(h));
    if (!spared) n.s = "cancelled";
    // A pending approval leaves the reviewers' inbox: nobody can decide a stopped node.
    if (n.approval?.state === "pending") {
      // A remote task that asked for the input is cancelled with it.
      cancelAskingTask(d, id, n.approval, childReason);
      n.approval = { id: n.approval.id, state: "cancelled", by: null, at: d.now };
    }
    for (const [, holder] of holdersOf(n)) {
      if (spare(holder)) continue;
      const r = applyStepOp(holder.step!, { op: "cancel", now: d.now });
      if (r.outcome === "moved") holder.step = r.state;
      delete holder.offered;
    }
    if (n.child) d.effects.push({ type: "runway.send", to: { kind: "run", id: n.child }, event: { type: "run.cancel", reason: childReason, by: d.run.id } });
  }
}

export function settleRun(d: Draft): void {
  if (isTerminal(d.lifecycle.status)) return;
  const outcome = runOutcome(d.plan, states(d));
  if (!outcome.done) {
    parkOrRun(d);
    return;
  }
  // A record stored before platform stops ended the walk at once may hold one that was walked past.
  const stops = Object.entries(d.run.nodes)
    .filter(([, n]) => n.s === "failed" && stopsRun(n.error?.code))
    .map(([id]) => id);
  if (stops.length > 0) {
    const first = d.run.nodes[stops[0]!]!.error!;
    return finish(d, "failed", { code: first.code, message: first.message, nodes: stops });
  }
  // A node a child's ceiling stopped fails nothing by itself: the run's ceiling settles it.
  const failed = outcome.failed.filter((id) => !isCeilingReason(d.run.nodes[id]?.error?.partial_reason));
  if (failed.length > 0) {
    const first = d.run.nodes[failed[0]!]?.error;
    return finish(d, "failed", { code: "node_failed", message: first ? `${failed[0]}: ${first.message}` : "a node failed", nodes: failed });
  }
  if (d.run.ceiling) return ceilingEnd(d);
  finish(d, "succeeded");
}

/**
 * Whether the run is `waiting`, and on what. It waits while any branch waits on a person (an
 * approval node, or a tool node's gated call) or a signal (its siblings go on meanwhile: their steps are offered and leased as in a running run),
 * or when its only pending work is timers (a delay). It names the oldest pending approval first
 * (then a signal, then a delay), and its one expiry clock is the latest wake-up of what it waits
 * on, plus the grace window.
 */
/** A tool node whose gated call waits on its approval: parked like an approval node. */
function gatedCall(d: Draft, n: PlanNode): boolean {
  return n.kind === "code" && d.run.nodes[n.id]!.approval?.state === "pending";
}

export function parkOrRun(d: Draft): void {
  const active = d.plan.nodes.filter((n) => d.run.nodes[n.id]!.s === "active");
  const parked = active.filter((n) => n.kind === "sleep" || n.kind === "wait" || n.kind === "approval" || gatedCall(d, n));
  const held = parked.some((n) => n.kind === "wait" || n.kind === "approval" || gatedCall(d, n));
  const lc = d.lifecycle;
  if (held || (active.length > 0 && parked.length === active.length)) {
    const grace = d.event.wait_grace_ms ?? WAIT_GRACE_MS;
    const expires = Math.max(...parked.map((n) => d.run.nodes[n.id]!.wake_at ?? d.now)) + grace;
    const approval = oldestApproval(d, parked);
    const signal = parked.find((n) => n.kind === "wait");
    const on = approval ? "approval" : signal ? "event" : "delay";
    const ref = approval ?? (signal ?? parked[0]!).id;
    if (lc.status !== "waiting" || lc.waiting_expires_at !== expires || lc.waiting_on !== on || lc.waiting_ref !== ref) {
      move(d, "mark_waiting", { on, ref, expires_at: expires } as Partial<RunOpEvent>);
      d.effects.push({ type: "runway.timer.set", name: "wait-deadline", at: expires, event: { type: "timer.fired", kind: "wait", node: ref } });
      publish(d, "run_waiting", { on, ref, until: expires - grace, ...(signal?.kind === "wait" ? { signal: signal.signal } : {}) });
    }
  } else if (lc.status === "waiting") {
    move(d, "resume");
  }
}

/** The id of the pending approval requested first among `parked` (plan order breaks a tie). */
function oldestApproval(d: Draft, parked: PlanNode[]): string | undefined {
  let oldest: { id: string; at: number } | undefined;
  for (const n of parked) {
    const a = d.run.nodes[n.id]!.approval;
    if (a?.state === "pending" && (!oldest || a.requested_at < oldest.at)) oldest = { id: a.id, at: a.requested_at };
  }
  return oldest?.id;
}

export function finish(d: Draft, status: "succeeded" | "failed", error?: RunError): void {
  if (d.lifecycle.status === "waiting") move(d, "resume");
  if (!move(d, status === "succeeded" ? "succeed" : "fail")) return;
  // A child that succeeded partially marks its run: the first such node (in plan order) names the reason.
  if (status === "succeeded" && !d.run.partial_reason) {
    const marked = d.plan.nodes.map((n) => d.run.nodes[n.id]!).find((n) => n.s === "succeeded" && n.partial_reason);
    if (marked) d.run.partial_reason = marked.partial_reason;
  }
  if (status === "succeeded") {
    // What its tool nodes wrote, in declaration order, each resource once (C074).
    const refs = mergeRefs(d.plan.nodes.map((n) => d.run.nodes[n.id]!.refs));
    if (refs.length > 0) d.run.refs = refs;
  }
  const result = runResult(d.plan, states(d), scopeOf(d));
  if (result.ok) {
    const b = bound(result.value);
    d.run.result = b.value;
    d.run.result_truncated = b.truncated;
  }
  d.run.error = error ?? null;
  publish(d, status === "succeeded" ? "run_succeeded" : "run_failed", {
    ...(error ? { error } : {}),
    ...(d.run.partial_reason ? { partial_reason: d.run.partial_reason } : {}),
  });
  notifyParent(d);
}

export function notifyParent(d: Draft): void {
  const r = d.run;
  if (!r.parent_run_id || !r.parent_node) {
    // A top-level run was admitted by its tenant: give the slot back. Last: once its tenant hears
    // it, the run may leave what recovery reads (its member key), so the rest must be out by then.
    d.effects.push({
      type: "runway.send",
      to: { kind: "tenant", id: r.tenant },
      event: { type: "tenant.run_ended", run_id: r.id, project: r.project ?? "default" },
      last: true,
    });
    return;
  }
  const status = d.lifecycle.status as "succeeded" | "failed" | "cancelled";
  d.effects.push({
    type: "runway.send",
    to: { kind: "run", id: r.parent_run_id },
    event: {
      type: "child.settled",
      node: r.parent_node,
      child: r.id,
      status,
      ...(status === "succeeded"
        ? { result: r.result, ...(r.partial_reason ? { partial_reason: r.partial_reason } : {}) }
        : { error: r.error ?? { code: status, message: `child ${status}` } }),
    },
  });
}
