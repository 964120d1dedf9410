// The console's only view helper: elements built with createElement and text nodes, never
// innerHTML, so whatever a run, a tool or a tenant's name holds is shown as text.

export type Child = Node | string | number | null | undefined | false;
type Attrs = Record<string, string | number | boolean | null | undefined | EventListener>;

function fill(el: Element, attrs: Attrs, children: Child[]): void {
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (typeof v === "function") el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) if (c !== null && c !== undefined && c !== false) el.append(typeof c === "object" ? c : String(c));
}

/** An HTML element: attributes (`onclick`… a listener), children as nodes or text. */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  fill(el, attrs, children);
  return el;
}

/** An SVG element. */
export function s(tag: string, attrs: Attrs = {}, ...children: Child[]): SVGElement {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  fill(el, attrs, children);
  return el;
}

/** A value as indented JSON text (for a `<pre>`). */
export function json(v: unknown): string {
  if (v === undefined) return "";
  try {
    return JSON.stringify(v, null, 2) ?? "";
  } catch {
    return String(v);
  }
}

export function time(ms: unknown): string {
  return typeof ms === "number" && ms > 0 ? new Date(ms).toISOString().replace("T", " ").slice(0, 19) : "";
}

export function status(value: unknown): HTMLElement {
  const text = typeof value === "string" ? value : "?";
  return h("span", { class: `status s-${text.replace(/[^a-z_]/g, "")}` }, text);
}

/** A link to a console page (a hash route: never a URL taken from data). */
export function link(route: string, text: Child, attrs: Attrs = {}): HTMLElement {
  return h("a", { href: `#${route}`, ...attrs }, text);
}

export function field(label: string, control: HTMLElement): HTMLElement {
  return h("label", {}, label, control);
}
