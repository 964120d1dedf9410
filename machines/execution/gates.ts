import { z } from "zod";
import { jsonEqual, type Plan, type PlanNode, type PlanToolGate } from "../workflow/index.js";
import type { ToolClass } from "../tools/index.js";
import type { GateRule, RunContext, RunMemory } from "./types.js";
import type { ExecutionEvent } from "./requests.js";

/**
 * Gated tools: which calls ask a person before their intent is recorded. Only the tool gateway knows
 * a tool's class, so the attempt carries the rule and applies it after the lookup; the run checks it
 * again on every intent, so no gated call is made without an approval of exactly those arguments.
 * The record's id names the step and the tool, not the arguments (an edit changes them), so a re-run
 * meets the same record. Replays are never gated.
 */

/** The rule an attempt of `node` carries (undefined: none of its calls is gated). */
export function gateRuleOf(plan: Plan, node: PlanNode, run: Pick<RunContext, "replay_of">): GateRule | undefined {
  if (run.replay_of) return undefined;
  const policy = plan.approvals;
  const own = node.kind === "code" && node.tool && node.approval ? [`${node.tool.server}/${node.tool.tool}`] : [];
  const tools = [...(policy?.tools ?? []), ...own];
  if (tools.length === 0 && !policy?.classes) return undefined;
  return { ...(tools.length > 0 ? { tools } : {}), ...(policy?.classes ? { classes: policy.classes } : {}) };
}

/** Whether the rule gates a call of `server/tool`, a tool of effective class `cls`. */
export function gatedBy(rule: GateRule | undefined, server: string, tool: string, cls: ToolClass): boolean {
  if (!rule) return false;
  if (rule.classes?.includes(cls)) return true;
  return rule.tools?.some((t) => t === `${server}/${tool}` || t === `${server}/*`) ?? false;
}

/**
 * A gated call's approval id after `<run>:` (what `approvals.decide` names after the run). An
 * agent's gated proposal names its turn too (`<node>:turn<i>:approval.<server>/<tool>`): one node
 * may ask about the same tool in many turns, and each turn's decision is its own journal fact.
 */
export function gateToken(node: string, server: string, tool: string, turn?: number): string {
  return turn === undefined ? `${node}:approval.${server}/${tool}` : `${node}:turn${turn}:approval.${server}/${tool}`;
}

/** The node is an agent's (a code plan node carrying `agent`): its gated proposals ask per turn. */
export function isAgentNode(node: PlanNode | undefined): node is Extract<PlanNode, { kind: "code" }> {
  return node?.kind === "code" && node.agent !== undefined;
}

/**
 * A person's decision on an agent's gated proposal, as the run's journal keeps it: a receipt keyed
 * by the approval's id, stored in the decision's own write (so any later attempt, on any node,
 * reads it back from the journal even after the node's record has moved on to a later turn's request).
 */
export type AgentGateDecision = { decision: "approved" | "edited"; by: string; arguments: unknown } | { decision: "rejected"; by: string; reason?: string };

/** The receipt value of an agent's gate decision (see `onDecide`). */
const AgentGateDecisionSchema = z.union([
  z.object({ decision: z.enum(["approved", "edited"]), by: z.string(), arguments: z.unknown() }),
  z.object({ decision: z.literal("rejected"), by: z.string(), reason: z.string().optional() }),
]);

/** The decision stored for an agent's gate `id`, if any. */
export function agentDecision(memory: RunMemory | undefined, id: string): AgentGateDecision | undefined {
  const r = memory?.receipt(id);
  if (r?.state !== "observed") return undefined;
  const read = AgentGateDecisionSchema.safeParse(r.value);
  if (!read.success) return undefined;
  const v = read.data;
  return v.decision === "rejected"
    ? { decision: "rejected", by: v.by, ...(v.reason !== undefined ? { reason: v.reason } : {}) }
    : { decision: v.decision, by: v.by, arguments: v.arguments ?? null };
}

/** The call is the tool node's own (a handler's call never is). */
export function isOwnCall(node: PlanNode | undefined, server: string, tool: string): node is Extract<PlanNode, { kind: "code" }> {
  return node?.kind === "code" && node.tool?.server === server && node.tool.tool === tool;
}

/** The request a gated call of `node` files: its own `approval`, else the definition's policy. */
export function gatePolicyOf(plan: Plan, node: PlanNode): PlanToolGate | undefined {
  return (node.kind === "code" ? node.approval : undefined) ?? plan.approvals;
}

/**
 * A gate a person decided: the arguments an approved (or edited) gate lets this call be made with;
 * for an agent's proposal, a rejection too (the model reads it). Undefined when nothing is decided.
 */
export function openGate(
  run: RunContext | null | undefined,
  e: ExecutionEvent,
): { outcome: "approved"; arguments: unknown } | { outcome: "rejected"; by: string; reason?: string } | undefined {
  if (e.type !== "effect.gate" || !run) return undefined;
  if (e.turn !== undefined) {
    if (!isAgentNode(e.plan.nodes.find((n) => n.id === e.node))) return undefined;
    const decided = agentDecision(e.memory, `${run.id}:${gateToken(e.node, e.server, e.tool, e.turn)}`);
    if (!decided) return undefined;
    return decided.decision === "rejected"
      ? { outcome: "rejected", by: decided.by, ...(decided.reason !== undefined ? { reason: decided.reason } : {}) }
      : { outcome: "approved", arguments: decided.arguments };
  }
  const open = gateArguments(run, e.node, e.server, e.tool);
  return open ? { outcome: "approved", arguments: open.arguments } : undefined;
}

/**
 * The arguments the node's record lets its gated call of `server/tool` be made with: its gate's,
 * approved or edited, or (the gate then gave them to it) an answered question of the call's
 * remote task (an `a2a` node's `input-required`: the answer's call is the gated call going on).
 */
export function gateArguments(run: RunContext, node: string, server: string, tool: string): { arguments: unknown } | undefined {
  const a = run.nodes[node]?.approval;
  if (a?.state !== "approved" && a?.state !== "edited") return undefined;
  if (a.id === `${run.id}:${gateToken(node, server, tool)}`) return { arguments: a.arguments ?? null };
  const asked = a.input !== undefined && a.arguments !== undefined && a.id.startsWith(`${run.id}:${node}:input.${server}/${tool}.`);
  return asked ? { arguments: a.arguments } : undefined;
}

/**
 * The gated call may ask now: it is the node's own (or an agent's proposal), under a policy, and its
 * record is not there yet or pending. An agent's earlier turn's decided record is replaced by the
 * new turn's request (that decision stays in the journal); a pending record of another turn never is.
 */
export function gateWaits(run: RunContext | null | undefined, e: ExecutionEvent): boolean {
  if (e.type !== "effect.gate" || !run) return false;
  const node = e.plan.nodes.find((n) => n.id === e.node);
  const a = run.nodes[e.node]?.approval;
  if (e.turn !== undefined) {
    if (!isAgentNode(node) || !gatePolicyOf(e.plan, node)) return false;
    return !a || a.state !== "pending" || a.id === `${run.id}:${gateToken(e.node, e.server, e.tool, e.turn)}`;
  }
  if (!isOwnCall(node, e.server, e.tool) || !gatePolicyOf(e.plan, node)) return false;
  return !a || (a.state === "pending" && a.id === `${run.id}:${gateToken(e.node, e.server, e.tool)}`);
}

/**
 * An intent the rule gates that no approval lets through: a handler's call, or the node's own
 * call without an approved (or edited) record of exactly these arguments. Refused, never recorded.
 */
export function intentNeedsApproval(run: RunContext | null | undefined, e: ExecutionEvent): boolean {
  if (e.type !== "effect.intent" || e.turn || !run || run.replay_of) return false;
  const node = e.plan.nodes.find((n) => n.id === e.node);
  if (!node || !gatedBy(gateRuleOf(e.plan, node, run), e.server, e.tool, e.class)) return false;
  if (isAgentNode(node)) {
    // An agent's call: a person approved (or edited) exactly these arguments in the turn it names.
    const decided = e.gate_turn !== undefined ? agentDecision(e.memory, `${run.id}:${gateToken(e.node, e.server, e.tool, e.gate_turn)}`) : undefined;
    return decided?.decision !== "approved" && decided?.decision !== "edited" ? true : !jsonEqual(decided.arguments ?? null, e.arguments ?? null);
  }
  if (!isOwnCall(node, e.server, e.tool)) return true;
  const open = gateArguments(run, e.node, e.server, e.tool);
  return !open || !jsonEqual(open.arguments ?? null, e.arguments ?? null);
}

/**
 * The node an approval's token (its id after `<run>:`) names, and its request when the whole id
 * matches: an approval node's token is its id; a gated call's starts `<node>:` (a definition's node ids have no colon).
 */
export function approvalAt(
  run: RunContext | null | undefined,
  token: string,
): { node: string; approval: NonNullable<RunContext["nodes"][string]["approval"]> } | undefined {
  const node = token.split(":")[0]!;
  const a = run?.nodes[node]?.approval;
  return run && a && a.id === `${run.id}:${token}` ? { node, approval: a } : undefined;
}

/** `tools` within `scope` (absent: no limit): what a run under `scope` may grant below it. */
export function withinScope(tools: readonly string[], scope: readonly string[] | undefined): string[] {
  return scope === undefined ? [...tools] : tools.filter((t) => scope.includes(t));
}
