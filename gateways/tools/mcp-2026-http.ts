// The Streamable HTTP rules of MCP revision 2026-07-28 that the client (mcp-2026.ts) follows on
// the wire: reading a JSON-RPC response from a JSON body or an SSE stream, the `=?base64?…?=`
// encoding of unsafe header values, and the `x-mcp-header` parameter mirroring of a tool's
// inputSchema. Sources: docs/specification/2026-07-28/basic/transports/streamable-http.mdx (see
// mcp-2026.ts for the stored copies checked).

/** One `x-mcp-header` annotation of a tool's inputSchema: the argument path and the header name part. */
export interface ParamHeader {
  path: string[];
  name: string;
}

export type JsonObject = Record<string, unknown>;

export const isObject = (v: unknown): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v);

// ---- responses -------------------------------------------------------------------------------------

/** The JSON-RPC response for `id` in an HTTP response (JSON body or SSE stream), or undefined
 *  when there is none (empty or non-JSON body). An SSE stream is read only up to that response. */
export async function readResponse(res: Response, id: number, method: string): Promise<JsonObject | undefined> {
  const type = (res.headers.get("content-type") ?? "").toLowerCase();
  if (type.includes("text/event-stream") && res.body) return readSse(res.body, id, method);
  const text = await res.text();
  if (text.trim() === "") return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    if (!res.ok) return undefined;
    throw new Error(`MCP ${method}: response body is not JSON`);
  }
  if (!isObject(parsed) || !("result" in parsed || "error" in parsed)) {
    if (!res.ok) return undefined;
    throw new Error(`MCP ${method}: response body is not a JSON-RPC response`);
  }
  // error responses may carry id null (e.g. the server could not read the request)
  if (parsed.id !== id && !(parsed.id == null && "error" in parsed)) throw new Error(`MCP ${method}: response id ${JSON.stringify(parsed.id)} is not ${id}`);
  return parsed;
}

async function readSse(stream: ReadableStream<Uint8Array>, id: number, method: string): Promise<JsonObject | undefined> {
  const reader = stream.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let data: string[] = [];
  const dispatch = (): JsonObject | undefined => {
    const payload = data.join("\n");
    data = [];
    if (payload === "") return undefined;
    let message: unknown;
    try {
      message = JSON.parse(payload);
    } catch {
      throw new Error(`MCP ${method}: SSE event data is not JSON`);
    }
    // notifications (progress, log messages) come before the response: skip them
    if (isObject(message) && ("result" in message || "error" in message) && (message.id === id || (message.id == null && "error" in message))) return message;
    return undefined;
  };
  try {
    for (;;) {
      const { done, value } = await reader.read();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      let nl: number;
      while ((nl = buffer.search(/\r\n|\r|\n/)) >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + (buffer.startsWith("\r\n", nl) ? 2 : 1));
        if (line === "") {
          const found = dispatch();
          if (found) return found;
        } else if (line.startsWith("data:")) {
          data.push(line.slice(line.startsWith("data: ") ? 6 : 5));
        }
        // comments (":…"), event:, id:, retry: carry nothing we need
      }
      if (done) {
        if (buffer.startsWith("data:")) data.push(buffer.slice(buffer.startsWith("data: ") ? 6 : 5));
        return dispatch();
      }
    }
  } finally {
    // the server SHOULD end the stream after the response; do not wait for it to
    reader.cancel().catch(() => {});
  }
}

// ---- headers -----------------------------------------------------------------------------------------

const SENTINEL = /^=\?base64\?.*\?=$/s;

/** A header value as the Streamable HTTP "Value Encoding" rules want it: plain when it is visible
 *  ASCII, space or tab without leading/trailing whitespace, else `=?base64?<utf-8 base64>?=`. */
export function encodeHeaderValue(value: string): string {
  const safe = /^[\x21-\x7e]([\x20-\x7e\t]*[\x21-\x7e])?$/.test(value) && !SENTINEL.test(value);
  return safe ? value : `=?base64?${Buffer.from(value, "utf8").toString("base64")}?=`;
}

export function sameHeaders(a: Record<string, string>, b: Record<string, string>): boolean {
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => a[k] === b[k]);
}

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** The `x-mcp-header` annotations of an inputSchema, or why the tool definition is invalid. An
 *  annotation must sit on a property reached from the root through `properties` keys only, name a
 *  unique HTTP token, and annotate a string, integer or boolean parameter. */
export function paramHeadersOf(schema: unknown): ParamHeader[] | string {
  const found: ParamHeader[] = [];
  const names = new Set<string>();
  let problem: string | undefined;
  const walk = (node: unknown, path: string[]): void => {
    if (problem !== undefined) return;
    if (Array.isArray(node)) {
      node.forEach((item, i) => walk(item, [...path, String(i)]));
      return;
    }
    if (!isObject(node)) return;
    if ("x-mcp-header" in node) {
      const name = node["x-mcp-header"];
      const argPath = path.filter((_, i) => i % 2 === 1);
      const reachable = path.length > 0 && path.length % 2 === 0 && path.every((seg, i) => i % 2 === 1 || seg === "properties");
      if (!reachable) problem = `x-mcp-header at /${path.join("/")} is not on a property reachable through properties`;
      else if (typeof name !== "string" || !TOKEN.test(name)) problem = `x-mcp-header ${JSON.stringify(name)} is not an HTTP token`;
      else if (names.has(name.toLowerCase())) problem = `x-mcp-header ${name} is used twice`;
      else if (!["string", "integer", "boolean"].includes(node.type as string))
        problem = `x-mcp-header ${name} is on a parameter of type ${JSON.stringify(node.type)}`;
      else {
        names.add(name.toLowerCase());
        found.push({ path: argPath, name });
      }
    }
    for (const [key, value] of Object.entries(node)) if (key !== "x-mcp-header") walk(value, [...path, key]);
  };
  walk(schema, []);
  return problem ?? found;
}
