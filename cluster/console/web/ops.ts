import { arr, call, describe, num, obj, str } from "./api.js";
import { h, json, link, time } from "./dom.js";
import type { Page } from "./page.js";

/**
 * The tenants page: each tenant the viewer may see (the operator: `tenants.list`; a key: its own)
 * with its state, active and queued runs, budget spent and reserved today, and its settings
 * (quotas and budgets) as `tenant.get` answers them. Read again every 3 s.
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
          ...["tenant", "state", "active runs", "queued", "starts today", "reserved (cents)", "active descendants", "settings"].map((x) => h("th", {}, x)),
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
        if (a.outcome !== "found") return h("tr", {}, h("td", {}, id), h("td", { colspan: 7 }, `tenant.get → ${describe(a)}`));
        return h(
          "tr",
          { "data-tenant": id },
          h("td", {}, link(`/runs?tenant=${encodeURIComponent(id)}`, id)),
          h("td", {}, str(t.state), t.state_reason ? ` (${str(t.state_reason)})` : ""),
          h("td", {}, str(t.active_runs)),
          h("td", {}, str(t.queued_runs)),
          h("td", {}, str(t.starts_today)),
          h("td", {}, str(t.reserved_cents)),
          h("td", {}, str(t.active_descendants)),
          h("td", {}, h("pre", {}, json(t.settings))),
        );
      }),
    );
    note.textContent = `${rows.length} tenant${rows.length === 1 ? "" : "s"}; read ${time(Date.now())}`;
  }
  void load();
  page.every(3_000, load);
}

/**
 * The cluster page (the operator's view only): the counters of the node that answered
 * (`ops.metrics`: its name, partitions it owns, runs and steps) and the newest dead letters
 * (`ops.dead_letters`).
 */
export function clusterPage(page: Page): void {
  if (page.viewer.viewer !== "operator") {
    page.mount(h("h1", {}, "Cluster"), h("p", { class: "answer" }, "The cluster page is the operator's: a tenant's key does not see it."));
    return;
  }
  const metrics = h("div", { class: "card", id: "metrics" }, "Loading…");
  const letters = h("tbody");
  const note = h("p", { class: "muted" });
  page.mount(
    h("h1", {}, "Cluster"),
    h("h2", {}, "A node's counters"),
    metrics,
    h("h2", {}, "Dead letters"),
    note,
    h(
      "table",
      { id: "dead-letters" },
      h("thead", {}, h("tr", {}, ...["at", "node", "reason", "subject", "partition", "kind / id", "deliveries", "detail"].map((x) => h("th", {}, x)))),
      letters,
    ),
  );
  async function load(): Promise<void> {
    const [m, d] = await Promise.all([call("ops", "metrics"), call("ops", "dead_letters", { limit: 50 })]);
    if (page.gone()) return;
    if (m.outcome === "ok") {
      const { outcome: _o, ...rest } = m;
      metrics.replaceChildren(h("pre", { class: "tall" }, json(rest)));
    } else metrics.replaceChildren(`ops.metrics → ${describe(m)}`);
    if (d.outcome !== "ok") {
      note.textContent = `ops.dead_letters → ${describe(d)}`;
      return;
    }
    note.textContent = `${str(num(d.total) ?? 0)} dead letters`;
    letters.replaceChildren(
      ...arr(d.letters)
        .map(obj)
        .map((l) =>
          h(
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
          ),
        ),
    );
  }
  void load();
  page.every(5_000, load);
}
