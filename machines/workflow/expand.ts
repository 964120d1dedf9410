/**
 * Expansion: the nested definition becomes flat plan nodes with explicit needs. Implicit needs of
 * sequences (parallel branches, branch paths) are made explicit here, needs on a branch are
 * rewired to its `<id>:end` node, and per-node publish checks (ids, handlers, workflows, fan-out,
 * nesting) are made on the way. Ordering and graph-wide checks are in compile.ts.
 */
import type { DefinitionNode, Need, Retry } from "./definition.js";
import { DEFAULT_TIMEOUT_MS, DEFAULT_WAIT_TIMEOUT_MS } from "./definition.js";
import { checkSchemaSubset } from "./json-schema.js";
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

/** Flattens `nodes` into plan nodes (definition pre-order; joins after their members). */
export function expand(nodes: DefinitionNode[], ctx: ExpandContext): Expansion {
  const errors: CompileError[] = [];
  const err = (code: CompileErrorCode, path: (string | number)[], message: string) => errors.push({ code, path: formatPath(path), message });

  // Pass 1: every id and its kind; duplicates reported at each repeat.
  const kinds = new Map<string, DefinitionNode["kind"]>();
  let count = 0;
  const collect = (seq: DefinitionNode[], at: (string | number)[]) =>
    seq.forEach((n, i) => {
      const path = [...at, i];
      count++;
      if (kinds.has(n.id)) err("duplicate_id", [...path, "id"], `node id '${n.id}' is used more than once`);
      else kinds.set(n.id, n.kind);
      if (n.kind === "parallel") n.branches.forEach((b, j) => collect(b, [...path, "branches", j]));
      if (n.kind === "branch") {
        collect(n.then, [...path, "then"]);
        if (n.else) collect(n.else, [...path, "else"]);
      }
    });
  collect(nodes, ["nodes"]);
  if (count > ctx.limits.max_nodes) err("too_many_nodes", ["nodes"], `${count} nodes, more than the limit of ${ctx.limits.max_nodes}`);

  const out: Expanded[] = [];
  const emitted = new Set<string>();
  let rank = 0;
  const emit = (node: PlanNode, path: (string | number)[], r: number) => {
    if (emitted.has(node.id)) return; // a duplicate id: reported in pass 1, its second body dropped
    emitted.add(node.id);
    out.push({ node, path, rank: r });
  };

  const resolveNeeds = (needs: Need[] | undefined, at: (string | number)[]): PlanNeed[] =>
    (needs ?? []).flatMap((need, j) => {
      const id = typeof need === "string" ? need : need.node;
      const when = typeof need === "string" ? "succeeded" : need.when;
      const kind = kinds.get(id);
      if (kind === undefined) {
        err("unknown_node", [...at, "needs", j], `needs '${id}', which is no node of this workflow`);
        return [];
      }
      return [{ node: kind === "branch" ? `${id}:end` : id, when }];
    });

  const sequence = (seq: DefinitionNode[], at: (string | number)[], parent: string | null, entry: PlanNeed[], nesting: number, deep: boolean): string[] => {
    let prev: DefinitionNode | undefined;
    return seq.map((n, i) => {
      const structural: PlanNeed[] = prev ? [{ node: completionId(prev), when: prev.continue_on_error ? "completed" : "succeeded" }] : entry;
      visit(n, [...at, i], parent, structural, nesting, deep);
      prev = n;
      return completionId(n);
    });
  };

  const visit = (n: DefinitionNode, path: (string | number)[], parent: string | null, structural: PlanNeed[], nesting: number, deep: boolean) => {
    const own = dedupe([...structural, ...resolveNeeds(n.needs, path)]);
    const base = { id: n.id, needs: own, continue_on_error: n.continue_on_error ?? false, parent };
    const myRank = rank++;
    const checkHandler = (handler: string) => {
      if (!ctx.handlers.has(handler)) err("unknown_handler", [...path, "handler"], `no handler named '${handler}' is registered`);
    };
    switch (n.kind) {
      case "code":
        checkHandler(n.handler);
        emit(
          {
            ...base,
            kind: "code",
            handler: n.handler,
            ...(n.input !== undefined && { input: n.input }),
            retry: planRetry(n.retry),
            timeout_ms: n.timeout_ms ?? DEFAULT_TIMEOUT_MS,
            ...(n.provider !== undefined && { provider: n.provider }),
            ...(n.cost !== undefined && { cost: n.cost }),
          },
          path,
          myRank,
        );
        return;
      case "tool":
        emit(
          {
            ...base,
            kind: "code",
            handler: `tool:${n.server}/${n.tool}`,
            ...(n.arguments !== undefined && { input: n.arguments }),
            retry: planRetry(n.retry),
            timeout_ms: n.timeout_ms ?? DEFAULT_TIMEOUT_MS,
            ...(n.cost !== undefined && { cost: n.cost }),
            tool: { server: n.server, tool: n.tool },
            ...(n.approval !== undefined && { approval: { ...n.approval, timeout_ms: n.approval.timeout_ms ?? DEFAULT_WAIT_TIMEOUT_MS } }),
          },
          path,
          myRank,
        );
        return;
      case "map":
        checkHandler(n.handler);
        if (n.max_fanout > ctx.limits.max_fanout)
          err("fanout_too_large", [...path, "max_fanout"], `max_fanout ${n.max_fanout} is above the limit of ${ctx.limits.max_fanout}`);
        emit(
          {
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
          },
          path,
          myRank,
        );
        return;
      case "subworkflow":
        if (ctx.workflowExists && !ctx.workflowExists(n.workflow))
          err("unknown_workflow", [...path, "workflow"], `no published workflow named '${n.workflow}'`);
        emit({ ...base, kind: "subworkflow", workflow: n.workflow, ...(n.input !== undefined && { input: n.input }) }, path, myRank);
        return;
      case "approval":
        emit(
          {
            ...base,
            kind: "approval",
            prompt: n.prompt,
            ...(n.payload !== undefined && { payload: n.payload }),
            ...(n.group !== undefined && { group: n.group }),
            ...(n.escalation_group !== undefined && { escalation_group: n.escalation_group }),
            timeout_ms: n.timeout_ms ?? DEFAULT_WAIT_TIMEOUT_MS,
          },
          path,
          myRank,
        );
        return;
      case "wait":
        for (const issue of checkSchemaSubset(n.schema ?? {}, [...path, "schema"])) errors.push({ code: "invalid_input_schema", ...issue });
        emit(
          { ...base, kind: "wait", signal: n.signal, ...(n.schema !== undefined && { schema: n.schema }), timeout_ms: n.timeout_ms ?? DEFAULT_WAIT_TIMEOUT_MS },
          path,
          myRank,
        );
        return;
      case "sleep":
        emit({ ...base, kind: "sleep", duration_ms: n.duration_ms }, path, myRank);
        return;
    }
    const level = nesting + 1;
    const tooDeep = !deep && level > ctx.limits.max_nesting;
    if (tooDeep) err("depth_exceeded", path, `parallel/branch nesting ${level} is above the limit of ${ctx.limits.max_nesting}`);
    if (n.kind === "parallel") {
      const branches = n.branches.map((b, j) => sequence(b, [...path, "branches", j], n.id, own, level, deep || tooDeep));
      const members = branches.flat();
      const needs = dedupe([...own, ...members.map((m): PlanNeed => ({ node: m, when: "always" }))]);
      emit({ ...base, needs, kind: "parallel", members, branches }, path, rank++);
      return;
    }
    const end = `${n.id}:end`;
    const decision = { ...base, kind: "branch" as const, condition: n.condition, end };
    const thenMembers = sequence(n.then, [...path, "then"], n.id, [{ node: n.id, when: "then" }], level, deep || tooDeep);
    const elseMembers = sequence(n.else ?? [], [...path, "else"], n.id, [{ node: n.id, when: "else" }], level, deep || tooDeep);
    emit({ ...decision, then_members: thenMembers, else_members: elseMembers }, path, myRank);
    const endNeeds: PlanNeed[] = [{ node: n.id, when: "completed" }, ...[...thenMembers, ...elseMembers].map((m): PlanNeed => ({ node: m, when: "always" }))];
    emit(
      {
        id: end,
        needs: dedupe(endNeeds),
        continue_on_error: base.continue_on_error,
        parent,
        kind: "branch_end",
        branch: n.id,
        members: [n.id, ...thenMembers, ...elseMembers],
      },
      path,
      rank++,
    );
  };

  // The top level is a graph, not a sequence: only explicit needs order it.
  nodes.forEach((n, i) => visit(n, ["nodes", i], null, [], 0, false));
  return { nodes: out, errors, count };
}
