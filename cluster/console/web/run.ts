import { arr, call, describe, followEvents, num, obj, str, type RunEvent } from "./api.js";
import { field, h, link } from "./dom.js";
import type { Page } from "./page.js";
import { eventItem, graphView, planOf, runLink, summaryView, trajectoryRow, type PlanNode } from "./run-views.js";

const ENDED = new Set(["succeeded", "failed", "cancelled"]);

/** The run page's parts, drawn once; the page fills them. */
function layout(page: Page, tenant: string, runId: string) {
  const parts = {
    summary: h("div", { class: "card", id: "summary" }, "Loading…"),
    graph: h("div", { id: "graph" }),
    trajectory: h("tbody"),
    children: h("ul", { id: "children" }),
    tail: h("ol", { class: "tail", id: "tail", "aria-live": "polite" }),
    answer: h("p", { class: "answer", id: "action-answer", role: "status" }),
    reason: h("input", { id: "cancel-reason", placeholder: "reason", size: 18, value: "cancelled from the console" }),
    signalName: h("input", { id: "signal-name", placeholder: "signal name", size: 14 }),
    signalData: h("input", { id: "signal-data", placeholder: '{"json": "data"}', size: 24 }),
    cancel: h("button", { type: "button", class: "danger", id: "cancel" }, "Cancel run"),
    actions: h("form", { class: "actions" }),
  };
  parts.actions.append(
    field("cancel reason", parts.reason),
    parts.cancel,
    field("signal", parts.signalName),
    field("data (JSON)", parts.signalData),
    h("button", { type: "submit", id: "signal" }, "Send signal"),
  );
  page.mount(
    h("h1", {}, "Run ", h("code", {}, runId)),
    h("p", {}, link(`/runs?tenant=${encodeURIComponent(tenant)}`, `← runs of ${tenant}`)),
    parts.summary,
    parts.actions,
    parts.answer,
    h("h2", {}, "Graph"),
    parts.graph,
    h("h2", {}, "Trajectory"),
    h(
      "table",
      { id: "trajectory" },
      h("thead", {}, h("tr", {}, ...["kind", "node", "attempt", "what", "arguments / output", "result / error", "duration", "at"].map((x) => h("th", {}, x)))),
      parts.trajectory,
    ),
    h("h2", {}, "Children"),
    parts.children,
    h("h2", {}, "Live events"),
    parts.tail,
  );
  return parts;
}

/**
 * A run's page: its summary, its definition's graph with each node's state, its trajectory, its
 * children, the live event tail (Server-Sent Events) and the cancel and signal buttons. The tail
 * drives the rest: each event reads the run and its trajectory again (at most every 250 ms).
 */
export function runPage(page: Page, tenant: string, runId: string): void {
  const v = layout(page, tenant, runId);
  let plan: PlanNode[] | undefined;
  let planKey = "";
  let ended = false;
  const childIds = new Set<string>();

  v.cancel.addEventListener("click", () => {
    void call(tenant, "runs.cancel", { run_id: runId, reason: v.reason.value || "cancelled from the console" }).then((a) => {
      v.answer.textContent = `runs.cancel → ${describe(a)}`;
      soon();
    });
  });
  v.actions.addEventListener("submit", (e) => {
    e.preventDefault();
    void signal(tenant, runId, v.signalName.value.trim(), v.signalData.value.trim()).then((text) => (v.answer.textContent = text));
  });

  async function refresh(): Promise<void> {
    const got = await call(tenant, "runs.get", { run_id: runId });
    if (page.gone()) return;
    if (got.outcome !== "found") {
      v.summary.replaceChildren(h("p", { class: "answer", id: "run-answer" }, `runs.get → ${describe(got)}`));
      v.actions.hidden = true;
      return;
    }
    const run = obj(got.run);
    ended = ENDED.has(str(run.status));
    v.cancel.toggleAttribute("disabled", ended);
    v.summary.replaceChildren(summaryView(tenant, run));
    const def = obj(run.definition);
    const key = `${str(def.name)}@${str(def.version)}`;
    if (key !== planKey) {
      const d = await call(tenant, "definitions.get", { name: str(def.name), version: num(def.version) });
      if (d.outcome === "found") [plan, planKey] = [planOf(d.definition), key];
    }
    v.graph.replaceChildren(plan ? graphView(plan, obj(run.nodes)) : h("p", { class: "muted" }, "The definition could not be read."));
    const t = await call(tenant, "runs.trajectory", { run_id: runId });
    if (page.gone()) return;
    if (t.outcome === "trajectory") v.trajectory.replaceChildren(...arr(t.lines).map(trajectoryRow));
    else v.trajectory.replaceChildren(h("tr", {}, h("td", { colspan: 8 }, `runs.trajectory → ${describe(t)}`)));
  }

  function addEvent(e: RunEvent): void {
    v.tail.append(eventItem(tenant, e));
    v.tail.scrollTop = v.tail.scrollHeight;
    const child = str(e.child);
    if (child && !childIds.has(child)) {
      childIds.add(child);
      v.children.append(h("li", {}, `${str(e.node)}: `, runLink(tenant, child)));
    }
    soon();
  }

  let timer: ReturnType<typeof setTimeout> | undefined;
  function soon(): void {
    timer ??= setTimeout(() => {
      timer = undefined;
      if (!page.gone()) void refresh();
    }, 250);
  }

  void refresh().then(() => {
    if (page.gone()) return;
    void followEvents(tenant, runId, page.signal, addEvent, () => {
      v.tail.append(h("li", { "data-type": "end", class: "muted" }, "— the run ended —"));
      soon();
    });
  });
  page.every(5_000, () => (ended ? undefined : refresh()));
}

/** Sends a signal (its data as JSON, if any) and says what the API answered, or why nothing was sent. */
async function signal(tenant: string, runId: string, name: string, text: string): Promise<string> {
  let data: unknown;
  try {
    data = text ? JSON.parse(text) : undefined;
  } catch {
    return "the signal's data is not JSON";
  }
  const a = await call(tenant, "runs.signal", { run_id: runId, name, ...(text ? { data } : {}) });
  return `runs.signal → ${describe(a)}`;
}
