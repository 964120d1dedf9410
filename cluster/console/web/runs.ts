import { call, type Answer } from "./api.js";
import { field, h, link, status, time } from "./dom.js";
import type { Page } from "./page.js";

type Run = {
  id: string;
  status: string;
  definition?: { name?: string; version?: number };
  created_at?: number;
  ended_at?: number | null;
  lane?: string;
  error?: { code?: string } | null;
};

const STATUSES = ["", "queued", "running", "waiting", "succeeded", "failed", "cancelled"];
/** Created within: the page's runs filtered by their creation time. */
const SINCE: [string, string][] = [
  ["", "any time"],
  ["900000", "15 minutes"],
  ["3600000", "1 hour"],
  ["86400000", "24 hours"],
  ["604800000", "7 days"],
];

/**
 * The runs page: one page of the tenant's runs index (`runs.list`, 50 a page, `next_cursor` on),
 * filtered by status (the API's filter), and by definition and creation time (on the page read). The first page
 * refreshes itself every 0.5 s (a new run shows within a second).
 */
export function runsPage(page: Page): void {
  const tenant = page.tenant();
  const st = page.params.get("status") ?? "";
  const def = page.params.get("definition") ?? "";
  const since = page.params.get("since") ?? "";
  const cursor = page.params.get("cursor") ?? "";
  const back = page.params.get("back") ?? "";
  const statusSel = h("select", { name: "status", id: "f-status" }, ...STATUSES.map((x) => h("option", { value: x, selected: x === st }, x || "any")));
  const defInput = h("input", { name: "definition", id: "f-definition", value: def, placeholder: "any", size: 18 });
  const sinceSel = h("select", { name: "since", id: "f-since" }, ...SINCE.map(([v, label]) => h("option", { value: v, selected: v === since }, label)));
  const form = h(
    "form",
    {
      class: "filters",
      onsubmit: (e: Event) => {
        e.preventDefault();
        page.go("/runs", { tenant, status: statusSel.value, definition: defInput.value.trim(), since: sinceSel.value });
      },
    },
    page.tenantPicker("/runs"),
    field("status", statusSel),
    field("definition", defInput),
    field("created within", sinceSel),
    h("button", { type: "submit" }, "Filter"),
  );
  const body = h("tbody");
  const table = h(
    "table",
    { id: "runs" },
    h("thead", {}, h("tr", {}, ...["run", "definition", "status", "lane", "created", "ended", "error"].map((x) => h("th", {}, x)))),
    body,
  );
  const pager = h("div", { class: "actions" });
  const note = h("p", { class: "muted" });
  page.mount(h("h1", {}, `Runs of ${tenant}`), form, note, table, pager);

  let reading = false;
  async function load(): Promise<void> {
    // A read slower than the refresh is not overlapped by the next.
    if (reading) return;
    reading = true;
    try {
      await read();
    } finally {
      reading = false;
    }
  }

  async function read(): Promise<void> {
    const started = performance.now();
    const a: Answer = await call(tenant, "runs.list", { limit: 50, ...(st ? { status: st } : {}), ...(cursor ? { cursor } : {}) });
    if (page.gone()) return;
    if (a.outcome !== "ok") {
      note.textContent = `runs.list: ${a.outcome}${typeof a.message === "string" ? ` (${a.message})` : ""}`;
      return;
    }
    const after = since ? Date.now() - Number(since) : 0;
    const runs = ((a.runs as Run[]) ?? []).filter((r) => (!def || r.definition?.name === def) && (!after || (r.created_at ?? 0) >= after));
    body.replaceChildren(...runs.map((r) => runRow(tenant, r)));
    note.textContent = `${runs.length} shown${def || after ? ` of ${(a.runs as Run[]).length} on this page (filtered on the page)` : ""}; read in ${Math.round(performance.now() - started)} ms`;
    const next = typeof a.next_cursor === "string" ? a.next_cursor : "";
    pager.replaceChildren(
      cursor ? h("button", { type: "button", onclick: () => history.back() }, "← Previous") : "",
      cursor ? h("button", { type: "button", onclick: () => page.go("/runs", { tenant, status: st, definition: def, since }) }, "First page") : "",
      next
        ? h(
            "button",
            { type: "button", id: "next-page", onclick: () => page.go("/runs", { tenant, status: st, definition: def, since, cursor: next, back: cursor }) },
            "Next →",
          )
        : "",
    );
    void back;
  }
  void load();
  if (!cursor) page.every(500, load);
}

function runRow(tenant: string, r: Run): HTMLElement {
  return h(
    "tr",
    { "data-run": r.id },
    h("td", {}, link(`/run/${encodeURIComponent(tenant)}/${encodeURIComponent(r.id)}`, r.id)),
    h("td", {}, `${r.definition?.name ?? ""} v${r.definition?.version ?? "?"}`),
    h("td", {}, status(r.status)),
    h("td", {}, r.lane ?? ""),
    h("td", {}, time(r.created_at)),
    h("td", {}, time(r.ended_at)),
    h("td", {}, r.error?.code ?? ""),
  );
}
