import { arr, call, describe, num, obj, str } from "./api.js";
import { field, h, json, link, status, time } from "./dom.js";
import type { Page } from "./page.js";

type Control = { name: string; read: () => { ok: true; value?: unknown } | { ok: false; why: string } };

/** A left time as text: `2d 3h 4m 5s`, `expired` once past. */
export function left(ms: number): string {
  if (ms <= 0) return "expired";
  const sec = Math.floor(ms / 1000);
  const d = Math.floor(sec / 86_400);
  const hh = Math.floor((sec % 86_400) / 3_600);
  const m = Math.floor((sec % 3_600) / 60);
  return `${d ? `${d}d ` : ""}${d || hh ? `${hh}h ` : ""}${m}m ${sec % 60}s`;
}

/**
 * The approvals inbox: the pending requests (`approvals.list`; a key with groups sees those of its
 * groups), each a card with its prompt, the run, the expiry countdown, and the proposed arguments
 * as a form built from the tool's input schema (`tools.list`); approve, approve with the form's
 * edits, or reject. The list is read again every 2 s: an item someone else decided leaves the page,
 * and cards still pending keep what was typed in them.
 */
export function inboxPage(page: Page): void {
  const tenant = page.tenant();
  const groups = arr(page.viewer.groups).map(str).filter(Boolean);
  const group = page.params.get("group") ?? "";
  const groupInput = h("input", { id: "f-group", value: group, placeholder: "any", size: 12 });
  const filters = h(
    "form",
    {
      class: "filters",
      onsubmit: (e: Event) => {
        e.preventDefault();
        page.go("/inbox", { tenant, group: groupInput.value.trim() });
      },
    },
    page.tenantPicker("/inbox"),
    groups.length ? field("groups (the key's)", h("input", { value: groups.join(", "), disabled: true, size: 16 })) : field("group", groupInput),
    groups.length ? "" : h("button", { type: "submit" }, "Filter"),
  );
  const list = h("div", { id: "approvals" });
  const note = h("p", { class: "muted", id: "inbox-note" });
  page.mount(h("h1", {}, `Approvals inbox of ${tenant}`), filters, note, list);
  const cards = new Map<string, HTMLElement>();
  const schemas = new Map<string, Promise<Record<string, unknown> | undefined>>();

  function schemaOf(server: string, tool: string): Promise<Record<string, unknown> | undefined> {
    const key = `${server}/${tool}`;
    let p = schemas.get(key);
    if (!p) {
      p = call(tenant, "tools.list", { server }).then((a) => {
        const found = arr(a.tools)
          .map(obj)
          .find((t) => str(t.server) === server && str(t.name) === tool);
        return found ? obj(found.input_schema) : undefined;
      });
      schemas.set(key, p);
    }
    return p;
  }

  async function load(): Promise<void> {
    const asks = groups.length ? groups.map((g) => ({ group: g })) : [group ? { group } : {}];
    const answers = await Promise.all(asks.map((b) => call(tenant, "approvals.list", { ...b, limit: 200 })));
    if (page.gone()) return;
    const bad = answers.find((a) => a.outcome !== "ok");
    if (bad) {
      note.textContent = `approvals.list → ${describe(bad)}`;
      return;
    }
    const items = new Map<string, Record<string, unknown>>();
    for (const a of answers) for (const it of arr(a.approvals).map(obj)) items.set(str(it.id), it);
    for (const [id, card] of cards) {
      if (!items.has(id)) {
        card.remove();
        cards.delete(id);
      }
    }
    for (const [id, it] of items) {
      if (cards.has(id)) continue;
      const card = itemCard(tenant, it, schemaOf);
      cards.set(id, card);
      list.append(card);
    }
    note.textContent = items.size ? `${items.size} pending` : "Nothing pending.";
    tick();
  }

  function tick(): void {
    for (const el of list.querySelectorAll<HTMLElement>(".countdown")) el.textContent = left(Number(el.dataset.expires) - Date.now());
  }

  void load();
  page.every(2_000, load);
  page.every(1_000, tick);
}

/** One pending request as a card: its facts, its arguments as a form, and the three decisions. */
function itemCard(
  tenant: string,
  it: Record<string, unknown>,
  schemaOf: (server: string, tool: string) => Promise<Record<string, unknown> | undefined>,
): HTMLElement {
  const id = str(it.id);
  const kind = str(it.kind);
  const payload = obj(it.payload);
  const tool = obj(it.tool);
  const server = str(tool.server) || str(payload.server);
  const toolName = str(tool.tool) || str(payload.tool);
  const run = str(it.run);
  const expires = num(it.expires_at) ?? 0;
  const result = h("p", { class: "answer", role: "status" });
  const reason = h("input", { class: "reason", placeholder: "reason", size: 18 });
  const form = h("div", { class: "args" }, h("p", { class: "muted" }, "Reading the tool's input schema…"));
  let controls: Control[] = [];
  const editable = kind !== "admission";
  const decide = async (decision: "approve" | "edit" | "reject") => {
    const body = decisionBody(id, decision, reason.value.trim(), controls);
    if (typeof body === "string") return void (result.textContent = body);
    const a = await call(tenant, "approvals.decide", body);
    result.textContent = `approvals.decide → ${describe(a)}`;
    if (a.outcome === "decided" || a.outcome === "already_decided" || a.outcome === "approval_expired" || a.outcome === "run_not_waiting") {
      card.classList.add("decided");
      for (const b of card.querySelectorAll("button")) b.setAttribute("disabled", "");
    }
  };
  const card = h(
    "section",
    { class: "card approval", "data-approval": id, "aria-label": `approval ${id}` },
    h("h2", {}, it.prompt ? str(it.prompt) : "Approve?"),
    h(
      "dl",
      { class: "facts" },
      h("dt", {}, "kind"),
      h("dd", {}, status(kind), server ? ` ${server}/${toolName}` : ""),
      h("dt", {}, "run"),
      h("dd", {}, link(`/run/${encodeURIComponent(tenant)}/${encodeURIComponent(run)}`, run), ` node ${str(it.node)}`),
      h("dt", {}, "group"),
      h("dd", {}, str(it.group) || "any", it.escalation_group ? ` (escalation ${str(it.escalation_group)})` : ""),
      h("dt", {}, "requested"),
      h("dd", {}, time(it.requested_at)),
      h("dt", {}, "expires"),
      h("dd", {}, time(expires), " — in ", h("span", { class: "countdown", "data-expires": expires }, left(expires - Date.now()))),
      h("dt", {}, "id"),
      h("dd", {}, h("code", {}, id)),
    ),
    form,
    h(
      "div",
      { class: "actions" },
      h("button", { type: "button", class: "primary", "data-action": "approve", onclick: () => void decide("approve") }, "Approve"),
      editable ? h("button", { type: "button", "data-action": "edit", onclick: () => void decide("edit") }, "Approve with edits") : "",
      field("reason", reason),
      h("button", { type: "button", class: "danger", "data-action": "reject", onclick: () => void decide("reject") }, "Reject"),
    ),
    result,
  );
  if (kind === "tool" && server) {
    void schemaOf(server, toolName).then((schema) => {
      const built = schemaForm(schema, obj(payload.arguments), editable);
      controls = built.controls;
      form.replaceChildren(...built.nodes);
    });
  } else {
    const area = h("textarea", { name: "payload", rows: 4, cols: 60, disabled: !editable }, json(it.payload));
    controls = [{ name: "", read: () => parseJson(area.value, "the payload") }];
    form.replaceChildren(field(kind === "admission" ? "the run's start (not editable)" : "payload (JSON)", area));
  }
  return card;
}

/** The body of `approvals.decide` for a decision (an edit's payload read from the card's controls), or why it cannot be sent. */
function decisionBody(id: string, decision: "approve" | "edit" | "reject", reason: string, controls: Control[]): Record<string, unknown> | string {
  if (decision === "approve") return { id, decision };
  if (decision === "reject") return { id, decision, reason: reason || "rejected from the console" };
  const values: Record<string, unknown> = {};
  for (const c of controls) {
    const r = c.read();
    if (!r.ok) return r.why;
    if (r.value === undefined) continue;
    // A control with no name is the whole payload (a request that is not a tool call's).
    if (c.name === "") return { id, decision, payload: r.value };
    values[c.name] = r.value;
  }
  return { id, decision, payload: values };
}

function parseJson(text: string, what: string): { ok: true; value?: unknown } | { ok: false; why: string } {
  if (text.trim() === "") return { ok: true };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false, why: `${what} is not JSON` };
  }
}

/** The proposed arguments as a form: one control a property of the tool's input schema (those it does not know as JSON). */
function schemaForm(schema: Record<string, unknown> | undefined, args: Record<string, unknown>, editable: boolean): { nodes: Node[]; controls: Control[] } {
  const props = obj(schema?.properties);
  const required = new Set(arr(schema?.required).map(str));
  const names = [...new Set([...Object.keys(props), ...Object.keys(args)])];
  const nodes: Node[] = [];
  const controls: Control[] = [];
  if (!schema) nodes.push(h("p", { class: "muted" }, "The tool's input schema could not be read: the arguments are edited as JSON."));
  for (const name of names) {
    const p = obj(props[name]);
    const type = str(p.type);
    const value = args[name];
    const label = `${name}${required.has(name) ? " *" : ""}${type ? ` (${type})` : ""}`;
    const common = { name, "data-arg": name, disabled: !editable, title: str(p.description) };
    if (arr(p.enum).length) {
      const sel = h("select", common, ...arr(p.enum).map((v) => h("option", { value: json(v), selected: json(v) === json(value) }, str(v) || json(v))));
      controls.push({ name, read: () => parseJson((sel as HTMLSelectElement).value, name) });
      nodes.push(field(label, sel));
    } else if (type === "string") {
      const input = h("input", { ...common, type: "text", size: 30, value: typeof value === "string" ? value : value === undefined ? "" : json(value) });
      controls.push({
        name,
        read: () => ({ ok: true, value: (input as HTMLInputElement).value === "" && !required.has(name) ? undefined : (input as HTMLInputElement).value }),
      });
      nodes.push(field(label, input));
    } else if (type === "number" || type === "integer") {
      const input = h("input", { ...common, type: "number", step: type === "integer" ? 1 : "any", value: typeof value === "number" ? value : "" });
      controls.push({
        name,
        read: () => {
          const raw = (input as HTMLInputElement).value.trim();
          if (raw === "") return { ok: true };
          const n = Number(raw);
          return Number.isFinite(n) ? { ok: true, value: n } : { ok: false, why: `${name} is not a number` };
        },
      });
      nodes.push(field(label, input));
    } else if (type === "boolean") {
      const input = h("input", { ...common, type: "checkbox", checked: value === true });
      controls.push({ name, read: () => ({ ok: true, value: (input as HTMLInputElement).checked }) });
      nodes.push(field(label, input));
    } else {
      const area = h("textarea", { ...common, rows: 2, cols: 50 }, value === undefined ? "" : json(value));
      controls.push({ name, read: () => parseJson((area as HTMLTextAreaElement).value, name) });
      nodes.push(field(`${label} (JSON)`, area));
    }
  }
  if (names.length === 0) nodes.push(h("p", { class: "muted" }, "No arguments."));
  return { nodes: [h("div", { class: "form-grid" }, ...nodes)], controls };
}
