import { arr, call, describe, followEvents, num, obj, str, type RunEvent } from "./api.js";
import { field, h, json, link, s, status, time } from "./dom.js";
import type { Page } from "./page.js";

const ENDED = new Set(["succeeded", "failed", "cancelled"]);
const NODE_W = 168;
const NODE_H = 34;
const GAP_X = 48;
const GAP_Y = 14;

type PlanNode = { id: string; kind: string; needs: string[] };

/**
 * A run's page: its summary, its definition's graph with each node's state, its trajectory, its
 * children, the live event tail (Server-Sent Events) and the cancel and signal buttons. The tail
 * drives the rest: each event reads the run and its trajectory again (at most every 250 ms).
 */
export function runPage(page: Page, tenant: string, runId: string): void {
  const summary = h("div", { class: "card", id: "summary" }, "Loading…");
  const graph = h("div", { id: "graph" });
  const trajectory = h("tbody");
  const children = h("ul", { id: "children" });
  const tail = h("ol", { class: "tail", id: "tail", "aria-live": "polite" });
  const answer = h("p", { class: "answer", id: "action-answer", role: "status" });
  const reason = h("input", { id: "cancel-reason", placeholder: "reason", size: 18, value: "cancelled from the console" });
  const signalName = h("input", { id: "signal-name", placeholder: "signal name", size: 14 });
  const signalData = h("input", { id: "signal-data", placeholder: '{"json": "data"}', size: 24 });
  const cancel = h("button", { type: "button", class: "danger", id: "cancel", onclick: () => void doCancel() }, "Cancel run");
  const actions = h(
    "form",
    {
      class: "actions",
      onsubmit: (e: Event) => {
        e.preventDefault();
        void doSignal();
      },
    },
    field("cancel reason", reason),
    cancel,
    field("signal", signalName),
    field("data (JSON)", signalData),
    h("button", { type: "submit", id: "signal" }, "Send signal"),
  );
  page.mount(
    h("h1", {}, "Run ", h("code", {}, runId)),
    h("p", {}, link(`/runs?tenant=${encodeURIComponent(tenant)}`, `← runs of ${tenant}`)),
    summary,
    actions,
    answer,
    h("h2", {}, "Graph"),
    graph,
    h("h2", {}, "Trajectory"),
    h(
      "table",
      { id: "trajectory" },
      h("thead", {}, h("tr", {}, ...["kind", "node", "attempt", "what", "arguments / output", "result / error", "duration", "at"].map((x) => h("th", {}, x)))),
      trajectory,
    ),
    h("h2", {}, "Children"),
    children,
    h("h2", {}, "Live events"),
    tail,
  );

  let plan: PlanNode[] | undefined;
  let planOf = "";
  let ended = false;
  const childIds = new Set<string>();

  async function doCancel(): Promise<void> {
    const a = await call(tenant, "runs.cancel", { run_id: runId, reason: reason.value || "cancelled from the console" });
    answer.textContent = `runs.cancel → ${describe(a)}`;
    void refresh();
  }

  async function doSignal(): Promise<void> {
    let data: unknown;
    const text = signalData.value.trim();
    if (text) {
      try {
        data = JSON.parse(text);
      } catch {
        answer.textContent = "the signal's data is not JSON";
        return;
      }
    }
    const a = await call(tenant, "runs.signal", { run_id: runId, name: signalName.value.trim(), ...(text ? { data } : {}) });
    answer.textContent = `runs.signal → ${describe(a)}`;
  }

  async function refresh(): Promise<void> {
    const got = await call(tenant, "runs.get", { run_id: runId });
    if (page.gone()) return;
    if (got.outcome !== "found") {
      summary.replaceChildren(h("p", { class: "answer", id: "run-answer" }, `runs.get → ${describe(got)}`));
      actions.hidden = true;
      return;
    }
    const run = obj(got.run);
    const st = str(run.status);
    ended = ENDED.has(st);
    cancel.toggleAttribute("disabled", ended);
    drawSummary(run);
    const def = obj(run.definition);
    const key = `${str(def.name)}@${str(def.version)}`;
    if (key !== planOf) {
      const d = await call(tenant, "definitions.get", { name: str(def.name), version: num(def.version) });
      if (d.outcome === "found") {
        plan = arr(obj(d.definition).nodes).map((n) => {
          const o = obj(n);
          return { id: str(o.id), kind: str(o.kind), needs: arr(o.needs).map((x) => (typeof x === "string" ? x : str(obj(x).node))) };
        });
        planOf = key;
      }
    }
    drawGraph(obj(run.nodes));
    const t = await call(tenant, "runs.trajectory", { run_id: runId });
    if (page.gone()) return;
    if (t.outcome === "trajectory") drawTrajectory(arr(t.lines));
    else trajectory.replaceChildren(h("tr", {}, h("td", { colspan: 8 }, `runs.trajectory → ${describe(t)}`)));
  }

  function drawSummary(run: Record<string, unknown>): void {
    const def = obj(run.definition);
    const err = obj(run.error);
    const waiting = obj(run.waiting);
    const parent = str(run.parent_run_id);
    summary.replaceChildren(
      h(
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
        parent ? h("dd", {}, link(`/run/${encodeURIComponent(tenant)}/${encodeURIComponent(parent)}`, parent)) : null,
        str(waiting.on) ? h("dt", {}, "waiting") : null,
        str(waiting.on) ? h("dd", {}, `on ${str(waiting.on)} ${str(waiting.ref)}${num(waiting.expires_at) ? ` until ${time(waiting.expires_at)}` : ""}`) : null,
        str(err.code) ? h("dt", {}, "error") : null,
        str(err.code) ? h("dd", { id: "run-error" }, `${str(err.code)}: ${str(err.message)}`) : null,
        h("dt", {}, "input"),
        h("dd", {}, h("pre", { id: "run-input" }, json(run.input))),
        run.result !== undefined && run.result !== null ? h("dt", {}, "result") : null,
        run.result !== undefined && run.result !== null ? h("dd", {}, h("pre", {}, json(run.result))) : null,
      ),
    );
  }

  function drawGraph(states: Record<string, unknown>): void {
    if (!plan) {
      graph.replaceChildren(h("p", { class: "muted" }, "The definition could not be read."));
      return;
    }
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
    const svg = s("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "the definition's graph" }, ...edges, ...boxes);
    graph.replaceChildren(svg);
  }

  function drawTrajectory(lines: unknown[]): void {
    trajectory.replaceChildren(
      ...lines.map((l) => {
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
          what = `${str(o.model)} turn ${str(o.turn)} ${str(o.state)}; tokens ${str(o.input_tokens)} in / ${str(o.output_tokens)} out`;
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
      }),
    );
  }

  function addEvent(e: RunEvent): void {
    const { id: _id, type, run: _run, at, node, attempt, error, child, ...rest } = e;
    const err = obj(error);
    const extra = json(rest).replace(/\s+/g, " ");
    tail.append(
      h(
        "li",
        { "data-type": type, "data-node": str(node) },
        `${time(at)} ${type}${node ? ` ${str(node)}` : ""}${attempt !== undefined ? ` attempt ${str(attempt)}` : ""}${str(err.code) ? ` ${str(err.code)}: ${str(err.message)}` : ""}`,
        child ? " child " : "",
        child ? link(`/run/${encodeURIComponent(tenant)}/${encodeURIComponent(str(child))}`, str(child)) : "",
        extra !== "{}" ? ` ${extra.length > 200 ? `${extra.slice(0, 199)}…` : extra}` : "",
      ),
    );
    tail.scrollTop = tail.scrollHeight;
    if (child && !childIds.has(str(child))) {
      childIds.add(str(child));
      children.append(h("li", {}, `${str(node)}: `, link(`/run/${encodeURIComponent(tenant)}/${encodeURIComponent(str(child))}`, str(child))));
    }
    soon();
  }

  let timer: ReturnType<typeof setTimeout> | undefined;
  function soon(): void {
    if (timer) return;
    timer = setTimeout(() => {
      timer = undefined;
      if (!page.gone()) void refresh();
    }, 250);
  }

  void refresh().then(() => {
    if (page.gone()) return;
    void followEvents(tenant, runId, page.signal, addEvent, () => {
      tail.append(h("li", { "data-type": "end", class: "muted" }, "— the run ended —"));
      soon();
    });
  });
  page.every(5_000, () => (ended ? undefined : refresh()));
}
