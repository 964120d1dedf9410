import { childCodeAtParent, isCeilingReason, isPlatformStop } from "../workflow/index.js";
import { offer, parkAttempt } from "./attempts.js";
import { ceilingDrain } from "./ceilings.js";
import { fail, MAX_DEPTH, publish, succeed, type Draft } from "./draft.js";
import { isAgentNode, withinScope } from "./gates.js";
import { advance, sendChildCreate } from "./progression.js";
import type { ExecutionEvent } from "./requests.js";

/**
 * Subagents: an agent delegates to a published definition its node lists in `agents`, and the
 * delegate is a child run on the subworkflow node's machinery (its create, `child.settled`, the
 * cancel of a tree). The call is an effect keyed like a tool call (`<run>:<node>:turn<i>:<hash>`):
 * the child is started once, the agent's step parks while it runs (no worker held), and the
 * child's end is stored as the call's receipt, so every later attempt reads it from the journal.
 * Here too the end of any child run (`child.settled`), a subagent's or a subworkflow node's.
 */

type On<T extends ExecutionEvent["type"]> = Extract<ExecutionEvent, { type: T }>;

/** What the run stores as a subagent call's receipt value: how its child run ended. */
export type SubagentOutcome = { status: "succeeded"; result: unknown } | { status: "failed" | "cancelled"; error: { code: string; message: string } };

/** An attempt's `effect.child`: the stored outcome, or the child started (once) and the step parked. */
export function onChildCall(d: Draft, e: On<"effect.child">): void {
  const stored = e.memory?.receipt(e.key);
  if (stored?.state === "observed") {
    d.effects.push({ type: "runway.answer", value: { outcome: "observed", value: stored.value } });
    return;
  }
  const node = d.byId.get(e.node)!;
  const n = d.run.nodes[e.node]!;
  const refuse = (code: string, message: string): void => void d.effects.push({ type: "runway.answer", value: { outcome: "refused", code, message } });
  if (!isAgentNode(node) || !node.agent?.agents?.includes(e.workflow)) return refuse("unknown_workflow", `${e.workflow} is not a subagent of ${e.node}`);
  if (n.subagent && n.subagent.key !== e.key) return refuse("subagent_busy", `${e.node} waits on its subagent ${n.subagent.workflow} already`);
  if (!n.subagent) {
    const child = d.event.subagent_child_id;
    const definition = d.event.child_definitions?.[e.workflow];
    if (d.run.depth + 1 > MAX_DEPTH) return refuse("depth_exceeded", `a subagent would be at depth ${d.run.depth + 1}; the limit is ${MAX_DEPTH}`);
    if (!child || !definition) return refuse("unknown_workflow", `workflow ${e.workflow} is not published`);
    n.child = child;
    n.subagent = { key: e.key, workflow: e.workflow, turn: e.turn };
    sendChildCreate(d, e.node, child, definition, e.input ?? null, {
      start_key: `${d.run.id}:${e.key}`,
      ...(e.cost_ceiling_cents !== undefined ? { slice_cents: e.cost_ceiling_cents } : {}),
      tool_scope: withinScope(node.agent.tools ?? [], d.run.tool_scope),
    });
    d.effects.push({
      type: "runway.journal",
      data: {
        t: "intent",
        key: e.key,
        node: e.node,
        attempt: e.attempt,
        server: "agent",
        tool: e.workflow,
        class: "non_idempotent",
        arguments: e.input ?? null,
        at: d.now,
      },
    });
    publish(d, "subagent_started", { node: e.node, attempt: e.attempt, key: e.key, workflow: e.workflow, child });
  }
  // The attempt ends; the child's end offers the step again (given back to its retries, as a park on a person is).
  n.parks = (n.parks ?? 0) + 1;
  parkAttempt(d, n, node, { code: "awaiting_subagent", message: `waits for its subagent ${e.workflow} (${n.child})`, retryable: true });
  d.effects.push({ type: "runway.answer", value: { outcome: "awaiting_subagent", child: n.child! } });
}

/** The subagent's child run ended: its outcome is the call's receipt, and the agent's step is offered again. */
function settleSubagent(d: Draft, e: On<"child.settled">): void {
  const n = d.run.nodes[e.node]!;
  const call = n.subagent!;
  const value: SubagentOutcome =
    e.status === "succeeded"
      ? { status: "succeeded", result: e.result ?? null }
      : { status: e.status, error: { code: e.error?.code ?? `child_${e.status}`, message: e.error?.message ?? `child run ${e.child} ${e.status}` } };
  d.effects.push({ type: "runway.journal", data: { t: "receipt", key: call.key, state: "observed", value, at: d.now } });
  d.run.receipts = (d.run.receipts ?? 0) + 1;
  publish(d, "effect_observed", { node: e.node, key: call.key, server: "agent", tool: call.workflow });
  delete n.subagent;
  delete n.child;
}

/**
 * A child's end settles its node. A child that ended under a platform stop carries its code
 * across: its parent stops too. A child's ceiling travels in a field, never in its code: one that
 * succeeded partially leaves its node succeeded and marks the run; one that stopped before any
 * work stops its node and is a ceiling of the run (whatever `continue_on_error` says).
 */
export function onChildSettled(d: Draft, e: On<"child.settled">): void {
  const n = d.run.nodes[e.node]!;
  if (n.subagent) {
    // An agent's subagent ended: whatever its status, it is the call's result, which the model reads.
    settleSubagent(d, e);
    offer(d, d.byId.get(e.node)!, n, undefined);
    return advance(d);
  }
  const mark = e.status === "failed" ? e.error?.partial_reason : undefined;
  // How the child's failure reads here (stops.ts): a platform stop (or a start its gate could not
  // decide) stops this node whatever it declares; a refused start is `start_refused`; any other,
  // `child_failed`. The child's own code rides beside it, as the node error's `error_code` (C048).
  const code = e.status === "failed" ? childCodeAtParent(e.error?.code) : undefined;
  const own = e.error?.code !== undefined ? { error_code: e.error.code } : {};
  const message = `child run ${e.child}: ${e.error?.message ?? e.status}`;
  if (e.status === "succeeded") {
    succeed(d, e.node, e.result ?? null);
    if (isCeilingReason(e.partial_reason)) d.run.nodes[e.node]!.partial_reason = e.partial_reason;
  } else if (isPlatformStop(code)) fail(d, e.node, { code, message, ...own });
  else if (isCeilingReason(mark)) {
    fail(d, e.node, { code: mark, message, partial_reason: mark, ...own });
    ceilingDrain(d, `child run ${e.child}'s ${mark} (node ${e.node})`, mark);
  } else
    fail(d, e.node, {
      code: code ?? "child_cancelled",
      message: e.error?.message ?? `child run ${e.child} ${e.status}`,
      ...own,
    });
  advance(d);
}
