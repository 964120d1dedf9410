import { arr, call, describe, num, obj, str } from "./api.js";
import { h, json, link, time } from "./dom.js";
import type { Page } from "./page.js";

/**
 * The tenants page: each tenant the viewer may see (the operator: `tenants.list`; a key: its own)
 * with its state, active and queued runs, money spent today (the meter) and reserved against its
 * day budget, and its settings (quotas and budgets), all as `tenant.get` answers them. Read again every 3 s.
 */
export function tenantsPage(page: Page): void {
  const body = h("tbody");
  const note = h("p", { class: "muted" });
  page.mount(
    h("h1", {}, "Tenants"),
    note,
    h(
      "table",
      { id: "tenants" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          ...[
            "tenant",
            "state",
            "active runs / cap",
            "queued",
            "starts today / day cap",
            "spent today (cents)",
            "reserved (cents)",
            "day budget (cents)",
            "active descendants",
            "settings",
          ].map((x) => h("th", {}, x)),
        ),
      ),
      body,
    ),
  );
  async function load(): Promise<void> {
    let ids: string[];
    if (page.viewer.viewer === "tenant") ids = [str(page.viewer.tenant)];
    else {
      const list = await call("ops", "tenants.list");
      if (list.outcome !== "ok") {
        note.textContent = `tenants.list → ${describe(list)}`;
        return;
      }
      ids = arr(list.tenants)
        .map((t) => (typeof t === "string" ? t : str(obj(t).id)))
        .filter(Boolean);
    }
    const rows = await Promise.all(ids.map(async (id) => ({ id, a: await call(id, "tenant.get") })));
    if (page.gone()) return;
    body.replaceChildren(
      ...rows.map(({ id, a }) => {
        const t = obj(a.tenant);
        const settings = obj(t.settings);
        if (a.outcome !== "found") return h("tr", {}, h("td", {}, id), h("td", { colspan: 9 }, `tenant.get → ${describe(a)}`));
        return h(
          "tr",
          { "data-tenant": id },
          h("td", {}, link(`/runs?tenant=${encodeURIComponent(id)}`, id)),
          h("td", {}, str(t.state), t.state_reason ? ` (${str(t.state_reason)})` : ""),
          h("td", {}, `${str(t.active_runs)} / ${str(settings.max_concurrency) || "—"}`),
          h("td", {}, str(t.queued_runs)),
          h("td", {}, `${str(t.starts_today)} / ${str(settings.day_cap) || "—"}`),
          h("td", { "data-money": "spent" }, str(t.spent_cents)),
          h("td", { "data-money": "reserved" }, str(t.reserved_cents)),
          h("td", { "data-money": "budget" }, str(settings.day_budget_cents) || "none"),
          h("td", {}, str(t.active_descendants)),
          h("td", {}, h("details", {}, h("summary", {}, "quotas, caps, lanes"), h("pre", { class: "tall" }, json(t.settings)))),
        );
      }),
    );
    note.textContent = `${rows.length} tenant${rows.length === 1 ? "" : "s"}; read ${time(Date.now())}`;
  }
  void load();
  page.every(3_000, load);
}

/**
 * The cluster page (the operator's view only): the nodes (`ops.nodes`, every node answers: its
 * partitions, pid, start, HTTP URL), the partitions and their owners, each node's counters
 * (`ops.metrics`) and the newest dead letters (`ops.dead_letters`). Read again every 5 s.
 */
export function clusterPage(page: Page): void {
  if (page.viewer.viewer !== "operator") {
    page.mount(h("h1", {}, "Cluster"), h("p", { class: "answer" }, "The cluster page is the operator's: a tenant's key does not see it."));
    return;
  }
  const nodes = h("tbody");
  const owners = h("div", { id: "partitions", class: "partitions" });
  const metrics = h("div", { id: "metrics" }, "Loading…");
  const letters = h("tbody");
  const note = h("p", { class: "muted" });
  page.mount(
    h("h1", {}, "Cluster"),
    h("h2", {}, "Nodes"),
    h("table", { id: "nodes" }, h("thead", {}, h("tr", {}, ...["node", "partitions", "pid", "started", "HTTP"].map((x) => h("th", {}, x)))), nodes),
    h("h2", {}, "Partitions and their owners"),
    owners,
    h("h2", {}, "Dead letters"),
    note,
    h(
      "table",
      { id: "dead-letters" },
      h("thead", {}, h("tr", {}, ...["at", "node", "reason", "subject", "partition", "kind / id", "deliveries", "detail"].map((x) => h("th", {}, x)))),
      letters,
    ),
    h("h2", {}, "Each node's counters"),
    metrics,
  );
  async function load(): Promise<void> {
    const [n, m, d] = await Promise.all([call("ops", "nodes"), call("ops", "metrics"), call("ops", "dead_letters", { limit: 50 })]);
    if (page.gone()) return;
    const listed = arr(n.answers).map(obj);
    if (n.outcome !== "ok") nodes.replaceChildren(h("tr", {}, h("td", { colspan: 5 }, `ops.nodes → ${describe(n)}`)));
    else nodes.replaceChildren(...listed.map(nodeRow));
    owners.replaceChildren(...partitionChips(listed));
    // A node's counters someone opened stay open across reads.
    const open = new Set([...metrics.querySelectorAll("details[open] summary")].map((e) => e.textContent));
    if (m.outcome === "ok")
      metrics.replaceChildren(
        ...arr(m.answers)
          .map(obj)
          .map((x) => h("details", { open: open.has(str(x.node)) }, h("summary", {}, str(x.node)), h("pre", { class: "tall" }, json(x.metrics)))),
      );
    else metrics.replaceChildren(`ops.metrics → ${describe(m)}`);
    if (d.outcome !== "ok") {
      note.textContent = `ops.dead_letters → ${describe(d)}`;
      return;
    }
    note.textContent = `${str(num(d.total) ?? 0)} dead letters`;
    letters.replaceChildren(...arr(d.letters).map(obj).map(letterRow));
  }
  void load();
  page.every(5_000, load);
}

function nodeRow(x: Record<string, unknown>): HTMLElement {
  return h(
    "tr",
    { "data-node": str(x.node) },
    h("td", {}, str(x.node)),
    h("td", {}, `${arr(x.partitions).length}: ${arr(x.partitions).map(str).join(" ")}`),
    h("td", {}, str(x.pid)),
    h("td", {}, time(x.started_at)),
    h("td", {}, str(x.http_url)),
  );
}

/** Each partition with its owner as the nodes say; one with none, or two, stands out. */
function partitionChips(nodes: Record<string, unknown>[]): HTMLElement[] {
  const owner = new Map<number, string[]>();
  for (const x of nodes) for (const p of arr(x.partitions)) if (typeof p === "number") owner.set(p, [...(owner.get(p) ?? []), str(x.node)]);
  const count = Math.max(0, ...owner.keys()) + 1;
  return Array.from({ length: count }, (_, p) => {
    const who = owner.get(p) ?? [];
    return h(
      "span",
      { class: `partition${who.length === 1 ? "" : " unowned"}`, "data-partition": p, title: `partition ${p}: ${who.join(", ") || "no owner"}` },
      `${p} ${who.join(", ") || "—"}`,
    );
  });
}

function letterRow(l: Record<string, unknown>): HTMLElement {
  return h(
    "tr",
    {},
    h("td", {}, time(l.at)),
    h("td", {}, str(l.node)),
    h("td", {}, str(l.reason)),
    h("td", {}, str(l.subject)),
    h("td", {}, str(l.partition)),
    h("td", {}, `${str(l.kind)} ${str(l.id)}`),
    h("td", {}, str(l.deliveries)),
    h("td", {}, str(l.detail)),
  );
}
