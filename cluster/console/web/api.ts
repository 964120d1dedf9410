// Every call goes to the node's console endpoints, which pass it on to the NATS API as the CLI
// would: the answer is the API's own (`outcome` and its fields).

export type Answer = { outcome: string; [k: string]: unknown };

const KEY = "runway.console.key";

export function apiKey(): string | null {
  return sessionStorage.getItem(KEY);
}

export function setApiKey(key: string | null): void {
  if (key) sessionStorage.setItem(KEY, key);
  else sessionStorage.removeItem(KEY);
}

function headers(): Record<string, string> {
  const key = apiKey();
  return { "content-type": "application/json", ...(key ? { authorization: `Bearer ${key}` } : {}) };
}

async function answerOf(res: Response): Promise<Answer> {
  try {
    const body: unknown = await res.json();
    if (body && typeof body === "object" && typeof (body as { outcome?: unknown }).outcome === "string") return body as Answer;
  } catch {
    // not JSON: below
  }
  return { outcome: "unavailable", message: `HTTP ${res.status}` };
}

/** A tenant endpoint (`runs.list`, …) or, with tenant `ops`, an operator one. */
export async function call(tenant: string, path: string, body: unknown = {}): Promise<Answer> {
  try {
    const res = await fetch(`api/${encodeURIComponent(tenant)}/${encodeURIComponent(path)}`, {
      method: "POST",
      headers: headers(),
      body: JSON.stringify(body),
    });
    return await answerOf(res);
  } catch (e) {
    return { outcome: "unavailable", message: String(e) };
  }
}

export async function whoami(): Promise<Answer> {
  try {
    return await answerOf(await fetch("whoami", { headers: headers() }));
  } catch (e) {
    return { outcome: "unavailable", message: String(e) };
  }
}

export type RunEvent = { id?: string; type: string; run: string; at: number; [k: string]: unknown };

/**
 * A run's events as Server-Sent Events, read with fetch (EventSource cannot send the key's
 * header): each event to `onEvent`, `onEnd` once the run ended. Reconnects after a dropped
 * stream from the last id it saw, until `signal` aborts.
 */
export async function followEvents(tenant: string, run: string, signal: AbortSignal, onEvent: (e: RunEvent) => void, onEnd: () => void): Promise<void> {
  let last: string | undefined;
  while (!signal.aborted) {
    try {
      const res = await fetch(`events/${encodeURIComponent(tenant)}/${encodeURIComponent(run)}`, {
        headers: { ...headers(), accept: "text/event-stream", ...(last ? { "last-event-id": last } : {}) },
        signal,
      });
      if (!res.ok || !res.body) return;
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let cut: number;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          let name = "message";
          let data = "";
          for (const line of block.split("\n")) {
            if (line.startsWith("event: ")) name = line.slice(7);
            else if (line.startsWith("data: ")) data += line.slice(6);
            else if (line.startsWith("id: ")) last = line.slice(4);
          }
          if (name === "end") return onEnd();
          if (data) onEvent(eventOf(JSON.parse(data)));
        }
      }
    } catch {
      if (signal.aborted) return;
    }
    await new Promise((r) => setTimeout(r, 1_000));
  }
}

// Readers of an answer's fields: the page trusts no shape it did not check.

export function str(v: unknown): string {
  return typeof v === "string" ? v : typeof v === "number" || typeof v === "boolean" ? String(v) : "";
}

export function num(v: unknown): number | undefined {
  return typeof v === "number" && Number.isFinite(v) ? v : undefined;
}

export function obj(v: unknown): Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
}

export function arr(v: unknown): unknown[] {
  return Array.isArray(v) ? v : [];
}

/** The answer's outcome and message as one line of text (the API's own words). */
export function describe(a: Answer): string {
  const detail = str(a.message) || str(a.reason) || str(a.detail);
  return detail ? `${a.outcome}: ${detail}` : a.outcome;
}

function eventOf(v: unknown): RunEvent {
  const o = obj(v);
  return { ...o, type: str(o.type), run: str(o.run), at: num(o.at) ?? 0, ...(typeof o.id === "string" ? { id: o.id } : {}) };
}
