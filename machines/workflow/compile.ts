/**
 * Publish: validate a raw definition and compile it into a Plan. Every error found is reported
 * (shape errors stop the compiler early, because nothing else can be read from a malformed
 * definition). The same definition always compiles to the same plan, byte for byte in canonical
 * JSON, whatever the key order of its input.
 */
import { canonicalJson, formatPath, MAX_JSON_DEPTH, nestingDepth, utf8Length } from "./canonical.js";
import { DefinitionSchema, DEFAULT_WAIT_TIMEOUT_MS, type Condition, type Definition } from "./definition.js";
import { expand, type CompileError, type Expanded, type Limits } from "./expand.js";
import { checkSchemaSubset } from "./json-schema.js";
import { PLAN_VERSION, type Plan, type PlanNode } from "./plan.js";
import { templateRefs, type RefSite, type Segment } from "./templates.js";
import { workflowDepth, type LoadPlan } from "./depth.js";

export type { CompileError, CompileErrorCode, Limits } from "./expand.js";
export { canonicalJson } from "./canonical.js";
export { PlanSchema, PlanNodeSchema, type Plan, type PlanNode, type PlanNeed, type PlanWhen } from "./plan.js";

/** `max_workflow_depth` counts runs in a tree (the root included): six, as the engine allows (depths 0–5). */
export const DEFAULT_LIMITS: Limits = { max_nodes: 500, max_fanout: 1000, max_nesting: 8, max_plan_bytes: 256 * 1024, max_workflow_depth: 6 };

export type CompileContext = {
  handlers: ReadonlySet<string>;
  /** When given, each subworkflow's target must exist (`unknown_workflow`). */
  workflowExists?: (name: string) => boolean;
  /** When given, the subworkflow tree below this workflow is measured (`depth_exceeded`). */
  loadPlan?: LoadPlan;
  limits?: Partial<Limits>;
};
export type CompileResult = { ok: true; plan: Plan } | { ok: false; errors: CompileError[] };

/** Deterministic topological order: among nodes whose needs are placed, the lowest rank goes first. */
function order(nodes: Expanded[]): { sorted: Expanded[]; stuck: Expanded[] } {
  const byId = new Map(nodes.map((e) => [e.node.id, e]));
  const waiting = new Map<string, number>();
  const dependents = new Map<string, string[]>();
  for (const e of nodes) {
    const deps = new Set(e.node.needs.map((n) => n.node).filter((id) => byId.has(id)));
    waiting.set(e.node.id, deps.size);
    for (const d of deps) dependents.set(d, [...(dependents.get(d) ?? []), e.node.id]);
  }
  const ready = nodes.filter((e) => waiting.get(e.node.id) === 0);
  const sorted: Expanded[] = [];
  while (ready.length > 0) {
    ready.sort((a, b) => a.rank - b.rank);
    const next = ready.shift() as Expanded;
    sorted.push(next);
    for (const id of dependents.get(next.node.id) ?? []) {
      const left = (waiting.get(id) ?? 0) - 1;
      waiting.set(id, left);
      const e = byId.get(id);
      if (left === 0 && e) ready.push(e);
    }
  }
  const placed = new Set(sorted.map((e) => e.node.id));
  return { sorted, stuck: nodes.filter((e) => !placed.has(e.node.id)) };
}

/** Strongly connected components among `stuck` nodes that really loop (Tarjan). */
function cycles(stuck: Expanded[]): Expanded[][] {
  const byId = new Map(stuck.map((e) => [e.node.id, e]));
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: Expanded[][] = [];
  let counter = 0;
  const strong = (id: string): void => {
    index.set(id, counter);
    low.set(id, counter++);
    stack.push(id);
    onStack.add(id);
    for (const { node: dep } of byId.get(id)?.node.needs ?? []) {
      if (!byId.has(dep)) continue;
      if (!index.has(dep)) {
        strong(dep);
        low.set(id, Math.min(low.get(id) ?? 0, low.get(dep) ?? 0));
      } else if (onStack.has(dep)) low.set(id, Math.min(low.get(id) ?? 0, index.get(dep) ?? 0));
    }
    if (low.get(id) !== index.get(id)) return;
    const scc: Expanded[] = [];
    for (;;) {
      const top = stack.pop() as string;
      onStack.delete(top);
      scc.push(byId.get(top) as Expanded);
      if (top === id) break;
    }
    const self = scc.length === 1 && scc[0]?.node.needs.some((n) => n.node === id);
    if (scc.length > 1 || self) found.push(scc.sort((a, b) => a.rank - b.rank));
  };
  for (const e of [...stuck].sort((a, b) => a.rank - b.rank)) if (!index.has(e.node.id)) strong(e.node.id);
  return found;
}

function ancestorsOf(id: string, byId: Map<string, PlanNode>): Set<string> {
  const seen = new Set<string>();
  const todo = [id];
  while (todo.length > 0) {
    const cur = byId.get(todo.pop() as string);
    for (const { node } of cur?.needs ?? []) if (!seen.has(node)) todo.push((seen.add(node), node));
  }
  return seen;
}

function conditionRefs(c: Condition, at: Segment[]): RefSite[] {
  if ("ref" in c) return templateRefs(c.ref, [...at, "ref"]);
  if ("all" in c) return c.all.flatMap((s, i) => conditionRefs(s, [...at, "all", i]));
  if ("any" in c) return c.any.flatMap((s, i) => conditionRefs(s, [...at, "any", i]));
  return conditionRefs(c.not, [...at, "not"]);
}

/** The references a plan node reads, and whether `item`/`index` are in scope there. */
function nodeRefs(n: PlanNode): { sites: RefSite[]; itemScope: boolean }[] {
  switch (n.kind) {
    case "code":
    case "subworkflow":
      return [{ sites: templateRefs(n.input, ["input"]), itemScope: false }];
    case "approval":
      return [{ sites: templateRefs(n.payload, ["payload"]), itemScope: false }];
    case "map":
      return [
        { sites: templateRefs(n.items, ["items"]), itemScope: false },
        { sites: templateRefs(n.input, ["input"]), itemScope: true },
      ];
    case "branch":
      return [{ sites: conditionRefs(n.condition, ["condition"]), itemScope: false }];
    default:
      return [];
  }
}

function checkRefs(sites: RefSite[], where: (string | number)[], itemScope: boolean, visible: (id: string) => string | undefined, out: CompileError[]): void {
  for (const s of sites) {
    const path = formatPath([...where, ...s.at]);
    const bad = (message: string) => out.push({ code: "unknown_reference", path, message });
    if (!s.ref) bad(`'\${${s.expr}}' is not a valid reference`);
    else if ((s.ref.root === "item" || s.ref.root === "index") && !itemScope) bad(`'${s.ref.root}' is only defined in a map node's input`);
    else if (s.ref.root === "steps") {
      const why = visible(s.ref.node);
      if (why) bad(why);
    }
  }
}

/**
 * Validates and compiles a definition, reporting every problem together. A definition nested
 * deeper than `MAX_JSON_DEPTH` is refused alone (`too_deep`), and one over `max_nodes` skips the
 * graph checks, so compiling any input takes bounded stack and time.
 */
export function compileDefinition(raw: unknown, ctx: CompileContext): CompileResult {
  // Checked first and without recursion: every later pass (zod included) recurses on the definition.
  if (nestingDepth(raw, MAX_JSON_DEPTH) > MAX_JSON_DEPTH)
    return { ok: false, errors: [{ code: "too_deep", path: "", message: `arrays and objects nest deeper than ${MAX_JSON_DEPTH} levels` }] };
  const parsed = DefinitionSchema.safeParse(raw);
  if (!parsed.success)
    return { ok: false, errors: parsed.error.issues.map((i) => ({ code: "invalid_definition", path: formatPath(i.path), message: i.message })) };
  const def = parsed.data;
  const limits: Limits = { ...DEFAULT_LIMITS, ...ctx.limits };
  const { nodes, errors, count } = expand(def.nodes, { handlers: ctx.handlers, workflowExists: ctx.workflowExists, limits });
  // The graph checks below grow faster than linearly (and the cycle search recurses per node):
  // they run only on a graph within the node limit.
  if (count > limits.max_nodes) return { ok: false, errors };

  const { sorted, stuck } = order(nodes);
  for (const scc of cycles(stuck)) {
    const ids = scc.map((e) => e.node.id);
    errors.push({ code: "cycle", path: formatPath([...(scc[0]?.path ?? []), "needs"]), message: `needs form a cycle through ${ids.join(", ")}` });
  }

  checkReferences(nodes, def.result, errors);

  if (def.input_schema !== undefined)
    for (const issue of checkSchemaSubset(def.input_schema, ["input_schema"])) errors.push({ code: "invalid_input_schema", ...issue });

  if (ctx.loadPlan) checkWorkflowDepth(def.name, nodes, ctx.loadPlan, !!ctx.workflowExists, limits.max_workflow_depth, errors);

  if (errors.length > 0) return { ok: false, errors };
  const body = planBody(def, sorted);
  const text = canonicalJson(body);
  const bytes = utf8Length(text);
  if (bytes > limits.max_plan_bytes)
    return {
      ok: false,
      errors: [{ code: "snapshot_too_large", path: "", message: `the compiled plan is ${bytes} bytes, above the limit of ${limits.max_plan_bytes}` }],
    };
  return { ok: true, plan: { ...body, definition_digest_input: text } };
}

/** References: a node reads only its transitive needs (and `item`/`index` only in a map's input); the result reads only nodes. */
function checkReferences(nodes: Expanded[], result: unknown, errors: CompileError[]): void {
  const byId = new Map(nodes.map((e) => [e.node.id, e.node]));
  for (const e of nodes) {
    const ancestors = ancestorsOf(e.node.id, byId);
    const visible = (id: string) =>
      !byId.has(id) ? `no node '${id}'` : ancestors.has(id) ? undefined : `'${id}' is not upstream of '${e.node.id}' (not a transitive need)`;
    for (const group of nodeRefs(e.node)) checkRefs(group.sites, e.path, group.itemScope, visible, errors);
  }
  if (result !== undefined) checkRefs(templateRefs(result), ["result"], false, (id) => (byId.has(id) ? undefined : `no node '${id}'`), errors);
}

/** The chain of subworkflows this definition starts stays within the depth limit and does not recurse. */
function checkWorkflowDepth(
  name: string,
  nodes: Expanded[],
  load: NonNullable<CompileContext["loadPlan"]>,
  canTellExists: boolean,
  maxDepth: number,
  errors: CompileError[],
): void {
  const self = { name, nodes: nodes.map((e) => e.node) };
  const depth = workflowDepth(self, (n) => (n === name ? self : load(n)), maxDepth);
  if (!depth.ok) {
    const at = nodes.find((e) => e.node.kind === "subworkflow" && e.node.workflow === depth.chain[1]);
    const chain = depth.chain.join(" → ");
    if (depth.code === "subworkflow_unresolvable") {
      if (!canTellExists) errors.push({ code: "unknown_workflow", path: formatPath(at?.path ?? ["nodes"]), message: `cannot load workflow along ${chain}` });
    } else
      errors.push({
        code: "depth_exceeded",
        path: formatPath(at?.path ?? ["nodes"]),
        message: depth.code === "workflow_cycle" ? `subworkflows recurse: ${chain}` : `subworkflow depth above ${maxDepth}: ${chain}`,
      });
  }
}

/** The compiled plan's body (its nodes in order): what its canonical JSON, and so its digest, is made of. */
function planBody(def: Definition, sorted: Expanded[]) {
  return {
    plan_version: PLAN_VERSION,
    name: def.name,
    ...(def.description !== undefined && { description: def.description }),
    ...(def.input_schema !== undefined && { input_schema: def.input_schema }),
    ...(def.result !== undefined && { result: def.result }),
    ...(def.limits !== undefined && { limits: def.limits }),
    ...(def.admission !== undefined && {
      admission: { approval: { ...def.admission.approval, timeout_ms: def.admission.approval.timeout_ms ?? DEFAULT_WAIT_TIMEOUT_MS } },
    }),
    ...(def.approvals !== undefined && { approvals: { ...def.approvals, timeout_ms: def.approvals.timeout_ms ?? DEFAULT_WAIT_TIMEOUT_MS } }),
    nodes: sorted.map((e) => e.node),
  };
}
