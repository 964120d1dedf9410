import { arr, num, obj, str, type RunEvent } from "./api.js";
import { h, json, link, s, status, time } from "./dom.js";

// The run page's views: each draws one part of it from the API's answer, as text.

const NODE_W = 168;
const NODE_H = 34;
const GAP_X = 48;
const GAP_Y = 14;

export type PlanNode = { id: string; kind: string; needs: string[] };

/** A definition's top-level nodes and what each needs, as `definitions.get` answers the definition. */
export function planOf(definition: unknown): PlanNode[] {
  return arr(obj(definition).nodes).map((n) => {
    const o = obj(n);
    return { id: str(o.id), kind: str(o.kind), needs: arr(o.needs).map((x) => (typeof x === "string" ? x : str(obj(x).node))) };
  });
}

export function runLink(tenant: string, run: string): HTMLElement {
  return link(`/run/${encodeURIComponent(tenant)}/${encodeURIComponent(run)}`, run);
}

/** The run's facts: status, definition, times, parent, what it waits on, error, input and result. */
export function summaryView(tenant: string, run: Record<string, unknown>): HTMLElement {
  const def = obj(run.definition);
  const err = obj(run.error);
  const waiting = obj(run.waiting);
  const parent = str(run.parent_run_id);
  return h(
    "dl",
    { class: "facts" },
    h("dt", {}, "status"),
    h("dd", { id: "run-status" }, status(run.status), run.partial_reason ? ` (${str(run.partial_reason)})` : ""),
    h("dt", {}, "definition"),
    h("dd", {}, `${str(def.name)} v${str(def.version)}`),
    h("dt", {}, "tenant"),
    h("dd", {}, tenant),
    h("dt", {}, "lane"),
    h("dd", {}, str(run.lane)),
    h("dt", {}, "created / started / ended"),
    h("dd", {}, `${time(run.created_at)} / ${time(run.started_at)} / ${time(run.ended_at)}`),
    parent ? h("dt", {}, "parent") : null,
    parent ? h("dd", {}, runLink(tenant, parent)) : null,
    str(waiting.on) ? h("dt", {}, "waiting") : null,
    str(waiting.on) ? h("dd", {}, `on ${str(waiting.on)} ${str(waiting.ref)}${num(waiting.expires_at) ? ` until ${time(waiting.expires_at)}` : ""}`) : null,
    str(err.code) ? h("dt", {}, "error") : null,
    str(err.code) ? h("dd", { id: "run-error" }, `${str(err.code)}: ${str(err.message)}`) : null,
    h("dt", {}, "input"),
    h("dd", {}, h("pre", { id: "run-input" }, json(run.input))),
    run.result !== undefined && run.result !== null ? h("dt", {}, "result") : null,
    run.result !== undefined && run.result !== null ? h("dd", {}, h("pre", {}, json(run.result))) : null,
  );
}

/** The definition's graph, laid out by depth (a node one column right of the deepest it needs), each node coloured by its state. */
export function graphView(plan: PlanNode[], states: Record<string, unknown>): SVGElement {
  const depth = new Map<string, number>();
  const byId = new Map(plan.map((n) => [n.id, n]));
  const depthOf = (id: string, seen: Set<string>): number => {
    const known = depth.get(id);
    if (known !== undefined) return known;
    if (seen.has(id)) return 0;
    seen.add(id);
    const n = byId.get(id);
    const d = n && n.needs.length ? 1 + Math.max(...n.needs.map((x) => depthOf(x, seen))) : 0;
    depth.set(id, d);
    return d;
  };
  // Nodes the run knows that the definition's top level does not (members of a parallel or a branch) are drawn too.
  const nodes = [
    ...plan,
    ...Object.keys(states)
      .filter((id) => !byId.has(id))
      .map((id) => ({ id, kind: "member", needs: [] })),
  ];
  const rows: number[] = [];
  const place = new Map<string, { x: number; y: number }>();
  for (const n of nodes) {
    const d = depthOf(n.id, new Set());
    const row = rows[d] ?? 0;
    rows[d] = row + 1;
    place.set(n.id, { x: 8 + d * (NODE_W + GAP_X), y: 8 + row * (NODE_H + GAP_Y) });
  }
  const width = 16 + Math.max(1, rows.length) * (NODE_W + GAP_X);
  const height = 16 + Math.max(1, ...rows) * (NODE_H + GAP_Y);
  const edges: SVGElement[] = [];
  const boxes: SVGElement[] = [];
  for (const n of nodes) {
    const to = place.get(n.id)!;
    for (const need of n.needs) {
      const from = place.get(need);
      if (!from) continue;
      const x1 = from.x + NODE_W;
      const y1 = from.y + NODE_H / 2;
      const x2 = to.x;
      const y2 = to.y + NODE_H / 2;
      edges.push(s("path", { class: "edge", d: `M${x1},${y1} C${x1 + GAP_X / 2},${y1} ${x2 - GAP_X / 2},${y2} ${x2},${y2}` }));
    }
    const state = obj(states[n.id]);
    const st = str(state.status) || "pending";
    const attempt = num(state.attempt);
    const label = `${n.id} · ${st}${attempt && attempt > 1 ? ` #${attempt}` : ""}`;
    boxes.push(
      s(
        "g",
        { class: "node", "data-node": n.id, "data-state": st, transform: `translate(${to.x},${to.y})` },
        s("title", {}, `${n.id} (${n.kind}): ${st}${str(obj(state.error).code) ? `, ${str(obj(state.error).code)}` : ""}`),
        s("rect", { width: NODE_W, height: NODE_H, rx: 5, class: `f-${st.replace(/[^a-z_]/g, "")}` }),
        s("text", { x: 8, y: 21 }, label.length > 26 ? `${label.slice(0, 25)}…` : label),
      ),
    );
  }
  return s("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "the definition's graph" }, ...edges, ...boxes);
}

/** One row a trajectory line: steps, items, tool calls and model turns. */
export function trajectoryRow(l: unknown): HTMLElement {
  const o = obj(l);
  const kind = str(o.kind);
  const node = o.item !== undefined ? `${str(o.node)}[${str(o.item)}]` : str(o.node);
  let what = "";
  let input: unknown;
  let output: unknown;
  let duration = "";
  if (kind === "tool_call") {
    what = `${str(o.server)}/${str(o.tool)} (${str(o.class)}) ${str(o.state)}`;
    input = o.arguments;
    output = o.error ?? o.result;
    duration = num(o.duration_ms) !== undefined ? `${num(o.duration_ms)} ms` : "";
  } else if (kind === "model_turn") {
    // A tool server's sampling served during a call: the call it served.
    const sampled = o.sampling !== undefined ? ` (sampling for ${str(obj(o.sampling).server)}/${str(obj(o.sampling).tool)})` : "";
    what = `${str(o.model)} turn ${str(o.turn)}${sampled} ${str(o.state)}; tokens ${str(o.input_tokens)} in / ${str(o.output_tokens)} out`;
    input = o.tool_calls;
    output = o.text;
    duration = num(o.latency_ms) !== undefined ? `${num(o.latency_ms)} ms` : "";
  } else if (kind === "step") {
    what = str(o.status);
    output = o.error ?? o.output;
  } else if (kind === "item") {
    output = o.output;
  } else if (kind === "run") {
    what = str(o.status);
    output = o.error ?? o.result;
  }
  return h(
    "tr",
    { "data-kind": kind, "data-node": str(o.node) },
    h("td", {}, kind),
    h("td", {}, node),
    h("td", {}, str(o.attempt)),
    h("td", {}, kind === "step" || kind === "run" ? status(what) : what),
    h("td", {}, input !== undefined ? h("pre", {}, json(input)) : ""),
    h("td", {}, output !== undefined ? h("pre", {}, json(output)) : ""),
    h("td", {}, duration),
    h("td", {}, time(o.at ?? o.started_at)),
  );
}

/** One line of the live tail; a child run's id as a link. */
export function eventItem(tenant: string, e: RunEvent): HTMLElement {
  const { id: _id, type, run: _run, at, node, attempt, error, child, ...rest } = e;
  const err = obj(error);
  const extra = json(rest).replace(/\s+/g, " ");
  return h(
    "li",
    { "data-type": type, "data-node": str(node) },
    `${time(at)} ${type}${node ? ` ${str(node)}` : ""}${attempt !== undefined ? ` attempt ${str(attempt)}` : ""}${str(err.code) ? ` ${str(err.code)}: ${str(err.message)}` : ""}`,
    child ? " child " : "",
    child ? runLink(tenant, str(child)) : "",
    extra !== "{}" ? ` ${extra.length > 200 ? `${extra.slice(0, 199)}…` : extra}` : "",
  );
}
