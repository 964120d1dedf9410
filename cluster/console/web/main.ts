import { apiKey, arr, call, obj, setApiKey, str, whoami, type Answer } from "./api.js";
import { field, h } from "./dom.js";
import { inboxPage } from "./inbox.js";
import { clusterPage, tenantsPage } from "./ops.js";
import { runPage } from "./run.js";
import { runsPage } from "./runs.js";
import type { Page } from "./page.js";

let viewer: Answer = { outcome: "unavailable" };
let tenants: string[] = [];
/** The operator's tenants.list, read beside the first page rather than before it. */
let tenantsRead: Promise<void> = Promise.resolve();
let current: AbortController | undefined;

function go(route: string, params: Record<string, string> = {}): void {
  const q = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== ""));
  location.hash = `${route}${q.size ? `?${q}` : ""}`;
}

function render(): void {
  current?.abort();
  const ac = new AbortController();
  current = ac;
  const [path = "", query = ""] = location.hash.replace(/^#/, "").split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  const params = new URLSearchParams(query);
  const main = document.getElementById("main")!;
  const page: Page = {
    params,
    parts,
    viewer,
    mount: (...nodes) => {
      if (!ac.signal.aborted) main.replaceChildren(...nodes);
    },
    go,
    every: (ms, fn) => {
      const t = setInterval(() => void fn(), ms);
      ac.signal.addEventListener("abort", () => clearInterval(t));
    },
    signal: ac.signal,
    gone: () => ac.signal.aborted,
    tenant: () =>
      viewer.viewer === "tenant" ? String(viewer.tenant) : (params.get("tenant") ?? localStorage.getItem("runway.console.tenant") ?? tenants[0] ?? ""),
    tenantPicker: (route) => {
      const chosen = page.tenant();
      if (viewer.viewer === "tenant") return field("tenant", h("input", { value: chosen, disabled: true, size: 12 }));
      const sel = h("select", {
        id: "f-tenant",
        onchange: (e: Event) => {
          const t = (e.target as HTMLSelectElement).value;
          localStorage.setItem("runway.console.tenant", t);
          go(route, { tenant: t });
        },
      });
      const fill = () =>
        sel.replaceChildren(...[...new Set([...tenants, chosen])].filter(Boolean).map((t) => h("option", { value: t, selected: t === chosen }, t)));
      fill();
      void tenantsRead.then(fill);
      return field("tenant", sel);
    },
  };
  const t = page.tenant();
  if (t) localStorage.setItem("runway.console.tenant", t);
  main.focus({ preventScroll: true });
  switch (parts[0] ?? "runs") {
    case "run":
      return runPage(page, parts[1] ?? "", parts[2] ?? "");
    case "inbox":
      return inboxPage(page);
    case "tenants":
      return tenantsPage(page);
    case "cluster":
      return clusterPage(page);
    default:
      return runsPage(page);
  }
}

function keyForm(): HTMLElement {
  const input = h("input", { type: "password", id: "api-key", placeholder: "rwk.… (a tenant's API key)", size: 22, autocomplete: "off" });
  return h(
    "form",
    {
      onsubmit: (e: Event) => {
        e.preventDefault();
        setApiKey((input as HTMLInputElement).value.trim() || null);
        location.reload();
      },
    },
    input,
    " ",
    h("button", { type: "submit" }, apiKey() ? "Change key" : "Use key"),
    apiKey() ? h("button", { type: "button", onclick: () => (setApiKey(null), location.reload()) }, "Forget key") : "",
  );
}

async function start(): Promise<void> {
  viewer = await whoami();
  const who = document.getElementById("who")!;
  const notice = document.getElementById("notice")!;
  if (viewer.outcome !== "ok") {
    if (apiKey()) setApiKey(null);
    notice.textContent = `The console refused this browser (${viewer.outcome}): from another machine it needs a tenant's API key.`;
    who.replaceChildren(keyForm());
    document.getElementById("main")!.replaceChildren(h("p", {}, "Give a tenant's API key above."));
    return;
  }
  if (viewer.viewer === "tenant") {
    who.replaceChildren(`tenant ${String(viewer.tenant)} (${String(viewer.identity)}) `, keyForm());
    tenants = [String(viewer.tenant)];
    notice.textContent = `Signed in with an API key of tenant ${String(viewer.tenant)}: this console shows that tenant only.`;
  } else {
    who.replaceChildren("operator view (every tenant) ", keyForm());
    notice.textContent = viewer.loopback
      ? `Bound to loopback (${String(viewer.host)}): anyone on this machine sees and acts on every tenant, with no login; give a tenant's API key to see that tenant only.`
      : `This node's HTTP server listens on ${String(viewer.host)}, but only callers on this machine get the operator view; others need a tenant's API key.`;
    tenantsRead = call("ops", "tenants.list").then((list) => {
      tenants = arr(list.tenants)
        .map((t) => (typeof t === "string" ? t : str(obj(t).id)))
        .filter(Boolean);
    });
    // A route that names its tenant (or a tenant chosen before) draws at once; else the first tenant is awaited.
    if (!/[?&]tenant=/.test(location.hash) && !localStorage.getItem("runway.console.tenant")) await tenantsRead;
  }
  addEventListener("hashchange", render);
  render();
}

void start();
