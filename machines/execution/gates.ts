import { jsonEqual, type Plan, type PlanNode, type PlanToolGate } from "../workflow/index.js";
import type { ToolClass } from "../tools/index.js";
import type { ExecutionEvent, GateRule, RunContext } from "./types.js";

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

/** A gated call's approval id after `<run>:` (what `approvals.decide` names after the run). */
export function gateToken(node: string, server: string, tool: string): string {
  return `${node}:approval.${server}/${tool}`;
}

/** The call is the tool node's own (a handler's call never is). */
export function isOwnCall(node: PlanNode | undefined, server: string, tool: string): node is Extract<PlanNode, { kind: "code" }> {
  return node?.kind === "code" && node.tool?.server === server && node.tool.tool === tool;
}

/** The request a gated call of `node` files: its own `approval`, else the definition's policy. */
export function gatePolicyOf(plan: Plan, node: PlanNode): PlanToolGate | undefined {
  return (node.kind === "code" ? node.approval : undefined) ?? plan.approvals;
}

/** The arguments an approved (or edited) gate lets this call be made with; undefined when it lets nothing. */
export function openGate(run: RunContext | null | undefined, e: ExecutionEvent): { arguments: unknown } | undefined {
  if (e.type !== "effect.gate" || !run) return undefined;
  const a = run.nodes[e.node]?.approval;
  if ((a?.state !== "approved" && a?.state !== "edited") || a.id !== `${run.id}:${gateToken(e.node, e.server, e.tool)}`) return undefined;
  return { arguments: a.arguments ?? null };
}

/** The gated call may ask now: it is the node's own, under a policy, and its record is not there yet or pending. */
export function gateWaits(run: RunContext | null | undefined, e: ExecutionEvent): boolean {
  if (e.type !== "effect.gate" || !run) return false;
  const node = e.plan.nodes.find((n) => n.id === e.node);
  if (!isOwnCall(node, e.server, e.tool) || !gatePolicyOf(e.plan, node)) return false;
  const a = run.nodes[e.node]?.approval;
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
  if (!isOwnCall(node, e.server, e.tool)) return true;
  const a = run.nodes[e.node]?.approval;
  const open = (a?.state === "approved" || a?.state === "edited") && a.id === `${run.id}:${gateToken(e.node, e.server, e.tool)}`;
  return !open || !jsonEqual(a.arguments ?? null, e.arguments ?? null);
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
