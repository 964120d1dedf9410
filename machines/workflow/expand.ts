/**
 * Expansion: the nested definition becomes flat plan nodes with explicit needs. Implicit needs of
 * sequences (parallel branches, branch paths) are made explicit here, needs on a branch are
 * rewired to its `<id>:end` node, and per-node publish checks (ids, handlers, workflows, fan-out,
 * nesting) are made on the way. Ordering and graph-wide checks are in compile.ts.
 */
import type { DefinitionNode, Need, Retry } from "./definition.js";
import { DEFAULT_TIMEOUT_MS, DEFAULT_WAIT_TIMEOUT_MS } from "./definition.js";
import { checkSchemaSubset } from "./json-schema.js";
import { checkAgentNode, DEFAULT_AGENT_TIMEOUT_MS, planAgentOf } from "./agent-node.js";
import { a2aStep } from "./a2a.js";
import { formatPath } from "./canonical.js";
import type { PlanNeed, PlanNode, PlanRetry } from "./plan.js";

export type CompileErrorCode =
  | "invalid_definition"
  | "duplicate_id"
  | "unknown_node"
  | "cycle"
  | "unknown_reference"
  | "unknown_handler"
  | "unknown_workflow"
  | "fanout_too_large"
  | "depth_exceeded"
  | "too_many_nodes"
  | "snapshot_too_large"
  | "invalid_input_schema"
  /** Arrays and objects nested deeper than MAX_JSON_DEPTH (canonical.ts). */
  | "too_deep"
  /** Valid, but its stored records would exceed the server's max_payload (decided by the definitions store, not the compiler). */
  | "definition_too_large";
export type CompileError = { code: CompileErrorCode; path: string; message: string };

export type Limits = { max_nodes: number; max_fanout: number; max_nesting: number; max_plan_bytes: number; max_workflow_depth: number };

export type ExpandContext = {
  handlers: ReadonlySet<string>;
  workflowExists?: ((name: string) => boolean) | undefined;
  limits: Limits;
};

/** A plan node with where it came from: `rank` orders ties in the topological sort. */
export type Expanded = { node: PlanNode; path: (string | number)[]; rank: number };

export type Expansion = { nodes: Expanded[]; errors: CompileError[]; count: number };

// A production default: transient failures are retried; terminal errors still fail at once.
const DEFAULT_RETRY: PlanRetry = { max_attempts: 3, backoff_ms: 200, max_backoff_ms: 10_000, multiplier: 2 };

function planRetry(r: Retry | undefined): PlanRetry {
  return r ? { max_attempts: r.max_attempts, backoff_ms: r.backoff_ms, max_backoff_ms: r.max_backoff_ms, multiplier: r.multiplier ?? 2 } : DEFAULT_RETRY;
}

function dedupe(needs: PlanNeed[]): PlanNeed[] {
  const seen = new Set<string>();
  return needs.filter((n) => {
    const key = `${n.node}\u0000${n.when}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/** The id a plan node uses to wait for a definition node's completion. */
function completionId(node: DefinitionNode): string {
  return node.kind === "branch" ? `${node.id}:end` : node.id;
}

/** The fields every plan node has, from its definition node and where it sits. */
type Base = { id: string; needs: PlanNeed[]; continue_on_error: boolean; parent: string | null };

type LeafKind = Exclude<DefinitionNode["kind"], "parallel" | "branch">;
type Container = Extract<DefinitionNode, { kind: "parallel" | "branch" }>;

/** The plan node of each leaf kind: its definition node's fields, with the defaults filled in. */
const LEAF: { [K in LeafKind]: (n: Extract<DefinitionNode, { kind: K }>, base: Base) => PlanNode } = {
  code: (n, base) => ({
    ...base,
    kind: "code",
    handler: n.handler,
    ...(n.input !== undefined && { input: n.input }),
    retry: planRetry(n.retry),
    timeout_ms: n.timeout_ms ?? DEFAULT_TIMEOUT_MS,
    ...(n.provider !== undefined && { provider: n.provider }),
    ...(n.cost !== undefined && { cost: n.cost }),
  }),
  tool: (n, base) => ({
    ...base,
    kind: "code",
    handler: `tool:${n.server}/${n.tool}`,
    ...(n.arguments !== undefined && { input: n.arguments }),
    retry: planRetry(n.retry),
    timeout_ms: n.timeout_ms ?? DEFAULT_TIMEOUT_MS,
    ...(n.cost !== undefined && { cost: n.cost }),
    tool: { server: n.server, tool: n.tool, ...(n.item_kind !== undefined && { item_kind: n.item_kind }) },
    ...(n.approval !== undefined && { approval: { ...n.approval, timeout_ms: n.approval.timeout_ms ?? DEFAULT_WAIT_TIMEOUT_MS } }),
  }),
  map: (n, base) => ({
    ...base,
    kind: "map",
    items: n.items,
    handler: n.handler,
    ...(n.input !== undefined && { input: n.input }),
    max_fanout: n.max_fanout,
    concurrency: Math.min(n.concurrency ?? n.max_fanout, n.max_fanout),
    retry: planRetry(n.retry),
    timeout_ms: n.timeout_ms ?? DEFAULT_TIMEOUT_MS,
    ...(n.provider !== undefined && { provider: n.provider }),
    ...(n.cost !== undefined && { cost: n.cost }),
  }),
  subworkflow: (n, base) => ({ ...base, kind: "subworkflow", workflow: n.workflow, ...(n.input !== undefined && { input: n.input }) }),
  approval: (n, base) => ({
    ...base,
    kind: "approval",
    prompt: n.prompt,
    ...(n.payload !== undefined && { payload: n.payload }),
    ...(n.group !== undefined && { group: n.group }),
    ...(n.escalation_group !== undefined && { escalation_group: n.escalation_group }),
    timeout_ms: n.timeout_ms ?? DEFAULT_WAIT_TIMEOUT_MS,
  }),
  wait: (n, base) => ({
    ...base,
    kind: "wait",
    signal: n.signal,
    ...(n.schema !== undefined && { schema: n.schema }),
    timeout_ms: n.timeout_ms ?? DEFAULT_WAIT_TIMEOUT_MS,
  }),
  sleep: (n, base) => ({ ...base, kind: "sleep", duration_ms: n.duration_ms }),
  agent: (n, base) => ({
    ...base,
    kind: "code",
    handler: `agent:${n.model}`,
    ...(n.input !== undefined && { input: n.input }),
    retry: planRetry(n.retry),
    timeout_ms: n.timeout_ms ?? DEFAULT_AGENT_TIMEOUT_MS,
    agent: planAgentOf(n),
  }),
  a2a: (n, base) => ({ ...base, kind: "code", ...a2aStep(n), retry: planRetry(n.retry), timeout_ms: n.timeout_ms ?? DEFAULT_TIMEOUT_MS }),
};

/** Flattens `nodes` into plan nodes (definition pre-order; joins after their members). */
export function expand(nodes: DefinitionNode[], ctx: ExpandContext): Expansion {
  const x = new Expander(ctx);
  // Pass 1: every id and its kind; duplicates reported at each repeat.
  x.collect(nodes, ["nodes"]);
  if (x.count > ctx.limits.max_nodes) x.err("too_many_nodes", ["nodes"], `${x.count} nodes, more than the limit of ${ctx.limits.max_nodes}`);
  // The top level is a graph, not a sequence: only explicit needs order it.
  nodes.forEach((n, i) => x.visit(n, ["nodes", i], null, [], 0, false));
  return { nodes: x.out, errors: x.errors, count: x.count };
}

/** One expansion's state: the ids seen, the plan nodes made, the errors found. */
class Expander {
  readonly errors: CompileError[] = [];
  readonly out: Expanded[] = [];
  count = 0;
  private readonly kinds = new Map<string, DefinitionNode["kind"]>();
  private readonly emitted = new Set<string>();
  private rank = 0;

  constructor(private readonly ctx: ExpandContext) {}

  err(code: CompileErrorCode, path: (string | number)[], message: string): void {
    this.errors.push({ code, path: formatPath(path), message });
  }

  collect(seq: DefinitionNode[], at: (string | number)[]): void {
    seq.forEach((n, i) => {
      const path = [...at, i];
      this.count++;
      if (this.kinds.has(n.id)) this.err("duplicate_id", [...path, "id"], `node id '${n.id}' is used more than once`);
      else this.kinds.set(n.id, n.kind);
      if (n.kind === "parallel") n.branches.forEach((b, j) => this.collect(b, [...path, "branches", j]));
      if (n.kind === "branch") {
        this.collect(n.then, [...path, "then"]);
        if (n.else) this.collect(n.else, [...path, "else"]);
      }
    });
  }

  private emit(node: PlanNode, path: (string | number)[], rank: number): void {
    if (this.emitted.has(node.id)) return; // a duplicate id: reported in pass 1, its second body dropped
    this.emitted.add(node.id);
    this.out.push({ node, path, rank });
  }

  private resolveNeeds(needs: Need[] | undefined, at: (string | number)[]): PlanNeed[] {
    return (needs ?? []).flatMap((need, j) => {
      const id = typeof need === "string" ? need : need.node;
      const when = typeof need === "string" ? "succeeded" : need.when;
      const kind = this.kinds.get(id);
      if (kind === undefined) {
        this.err("unknown_node", [...at, "needs", j], `needs '${id}', which is no node of this workflow`);
        return [];
      }
      return [{ node: kind === "branch" ? `${id}:end` : id, when }];
    });
  }

  private sequence(seq: DefinitionNode[], at: (string | number)[], parent: string | null, entry: PlanNeed[], nesting: number, deep: boolean): string[] {
    let prev: DefinitionNode | undefined;
    return seq.map((n, i) => {
      const structural: PlanNeed[] = prev ? [{ node: completionId(prev), when: prev.continue_on_error ? "completed" : "succeeded" }] : entry;
      this.visit(n, [...at, i], parent, structural, nesting, deep);
      prev = n;
      return completionId(n);
    });
  }

  visit(n: DefinitionNode, path: (string | number)[], parent: string | null, structural: PlanNeed[], nesting: number, deep: boolean): void {
    const own = dedupe([...structural, ...this.resolveNeeds(n.needs, path)]);
    const base: Base = { id: n.id, needs: own, continue_on_error: n.continue_on_error ?? false, parent };
    const rank = this.rank++;
    if (n.kind === "parallel" || n.kind === "branch") return this.container(n, path, base, nesting, deep, rank);
    this.checkLeaf(n, path);
    this.emit((LEAF[n.kind] as (n: DefinitionNode, base: Base) => PlanNode)(n, base), path, rank);
  }

  /** A leaf's publish checks: its handler, workflow, fan-out and signal schema. */
  private checkLeaf(n: Exclude<DefinitionNode, Container>, path: (string | number)[]): void {
    if ((n.kind === "code" || n.kind === "map") && !this.ctx.handlers.has(n.handler))
      this.err("unknown_handler", [...path, "handler"], `no handler named '${n.handler}' is registered`);
    if (n.kind === "map" && n.max_fanout > this.ctx.limits.max_fanout)
      this.err("fanout_too_large", [...path, "max_fanout"], `max_fanout ${n.max_fanout} is above the limit of ${this.ctx.limits.max_fanout}`);
    if (n.kind === "subworkflow" && this.ctx.workflowExists && !this.ctx.workflowExists(n.workflow))
      this.err("unknown_workflow", [...path, "workflow"], `no published workflow named '${n.workflow}'`);
    if (n.kind === "wait")
      for (const issue of checkSchemaSubset(n.schema ?? {}, [...path, "schema"])) this.errors.push({ code: "invalid_input_schema", ...issue });
    if (n.kind === "agent") for (const issue of checkAgentNode(n, path)) this.errors.push({ code: "invalid_input_schema", ...issue });
  }

  /** A parallel (its join after its branches) or a branch (its decision, its paths, then its `<id>:end`). */
  private container(n: Container, path: (string | number)[], base: Base, nesting: number, deep: boolean, rank: number): void {
    const level = nesting + 1;
    const tooDeep = !deep && level > this.ctx.limits.max_nesting;
    if (tooDeep) this.err("depth_exceeded", path, `parallel/branch nesting ${level} is above the limit of ${this.ctx.limits.max_nesting}`);
    const inner = deep || tooDeep;
    if (n.kind === "parallel") {
      const branches = n.branches.map((b, j) => this.sequence(b, [...path, "branches", j], n.id, base.needs, level, inner));
      const members = branches.flat();
      const needs = dedupe([...base.needs, ...members.map((m): PlanNeed => ({ node: m, when: "always" }))]);
      this.emit({ ...base, needs, kind: "parallel", members, branches }, path, this.rank++);
      return;
    }
    const end = `${n.id}:end`;
    const thenMembers = this.sequence(n.then, [...path, "then"], n.id, [{ node: n.id, when: "then" }], level, inner);
    const elseMembers = this.sequence(n.else ?? [], [...path, "else"], n.id, [{ node: n.id, when: "else" }], level, inner);
    this.emit({ ...base, kind: "branch", condition: n.condition, end, then_members: thenMembers, else_members: elseMembers }, path, rank);
    const endNeeds: PlanNeed[] = [{ node: n.id, when: "completed" }, ...[...thenMembers, ...elseMembers].map((m): PlanNeed => ({ node: m, when: "always" }))];
    const members = [n.id, ...thenMembers, ...elseMembers];
    this.emit(
      { id: end, needs: dedupe(endNeeds), continue_on_error: base.continue_on_error, parent: base.parent, kind: "branch_end", branch: n.id, members },
      path,
      this.rank++,
    );
  }
}
