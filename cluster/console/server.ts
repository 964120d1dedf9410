import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import type { NatsConnection } from "@nats-io/transport-node";
import express, { type NextFunction, type Request, type Response, type Router } from "express";
import { decisionRefusal, type ApiKeyStore } from "../../gateways/index.js";
import { isTenantId } from "../../machines/index.js";
import type { Logger } from "../../runtime/index.js";
import { ApiFault, ApiNoAnswer, RunwayClient, type ApiAnswer } from "../client.js";
import { followRun, TERMINAL_EVENT_TYPES } from "../follow.js";

/** Larger request bodies are refused before they reach the API (which refuses over 512 KiB itself). */
const MAX_CONSOLE_BODY_BYTES = 600 * 1024;
/** Each kept-open event stream says it is alive this often (a comment line), so proxies keep it. */
const SSE_HEARTBEAT_MS = 15_000;

/** The tenant endpoints the console may call: reads, and the decisions a person makes on a page. */
const TENANT_PATHS: ReadonlySet<string> = new Set([
  "runs.list",
  "runs.get",
  "runs.events",
  "runs.trajectory",
  "runs.cancel",
  "runs.signal",
  "approvals.list",
  "approvals.get",
  "approvals.decide",
  "definitions.get",
  "definitions.list",
  "tenant.get",
  "tools.list",
]);
/** The operator endpoints the console may call, with no key only. */
const OPS_PATHS: ReadonlySet<string> = new Set(["tenants.list", "dead_letters", "metrics", "nodes"]);
/** Operator endpoints every node answers: the console gathers the answers that come within a moment. */
const GATHERED: ReadonlySet<string> = new Set(["metrics", "nodes"]);
/** A gathering ends this long after the last answer (or at most after {@link GATHER_MAX_MS}). */
const GATHER_STALL_MS = 250;
const GATHER_MAX_MS = 2_000;
/** Endpoints whose body may name who acts (`by`): a key's identity is put there, whatever the page sent. */
const ACTS: ReadonlySet<string> = new Set(["runs.cancel", "runs.signal", "approvals.decide"]);

const WEB = fileURLToPath(new URL("./web/", import.meta.url));
/** No script, style or connection but the node's own: a name or an argument that holds markup can run nothing. */
const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

export interface ConsoleDeps {
  nc: NatsConnection;
  keys?: ApiKeyStore;
  logger: Logger;
  /** The host the HTTP server is bound to: the page says whether that is loopback. */
  host: string;
}

/** Who a request is: the operator (no key, from this machine) or one tenant's API key. */
type Viewer = { kind: "operator" } | { kind: "tenant"; tenant: string; identity: string; groups: string[] };

function loopback(address: string | undefined): boolean {
  return address === "127.0.0.1" || address === "::1" || address === "::ffff:127.0.0.1";
}

/**
 * The web console, mounted at `/console` on the node's HTTP server: the page and its script
 * (bundled by esbuild from `web/` on first request, kept in memory), the API proxy
 * `POST /console/api/<tenant>/<path>` (the same NATS request-reply API the CLI calls, the body
 * passed on as sent, the answer passed back as the API gave it), and a run's event tail as
 * Server-Sent Events (`GET /console/events/<tenant>/<run>`, fed by `followRun`: the journal, then
 * the run's live events subject). Without identity, it answers only callers on this machine
 * (the operator's view: every tenant); with an API key (`Authorization: Bearer`), that key's
 * tenant only, from anywhere the server listens.
 *
 * Long on purpose, as the A2A server's: its routes share the viewer check, the tenant check and the
 * per-tenant clients they close over; split apart they would pass all three everywhere.
 */
export function consoleRouter(deps: ConsoleDeps): Router {
  const router = express.Router();
  const bundle = lazyBundle();
  const text = express.text({ type: () => true, limit: MAX_CONSOLE_BODY_BYTES });
  const clients = new Map<string, RunwayClient>();
  const client = (tenant: string) => {
    let c = clients.get(tenant);
    if (!c) clients.set(tenant, (c = new RunwayClient(deps.nc, tenant)));
    return c;
  };

  async function viewer(req: Request, res: Response): Promise<Viewer | undefined> {
    const token = /^Bearer +(\S+) *$/i.exec(req.headers.authorization ?? "")?.[1];
    if (token) {
      const key = deps.keys ? await deps.keys.authenticate(token) : undefined;
      if (key) return { kind: "tenant", tenant: key.tenant, identity: key.identity, groups: key.groups ?? [] };
      res.setHeader("WWW-Authenticate", 'Bearer realm="runway"');
      res.status(401).json({ outcome: "not_authorized", message: "the key is unknown or revoked" });
      return undefined;
    }
    if (loopback(req.socket.remoteAddress)) return { kind: "operator" };
    res.setHeader("WWW-Authenticate", 'Bearer realm="runway"');
    res.status(401).json({ outcome: "not_authorized", message: "from another machine the console needs a tenant's API key" });
    return undefined;
  }

  /** The tenant a request names, if this viewer may see it; else the answer is sent. */
  function tenantFor(v: Viewer, raw: string, res: Response): string | undefined {
    // Not a tenant id: never a subject token (no `.`, `*`, `>`); the API's answer for it.
    if (!isTenantId(raw)) return void res.json({ outcome: "tenant_not_found" });
    if (v.kind === "tenant" && v.tenant !== raw) return void res.status(403).json({ outcome: "not_authorized", message: "this key sees its own tenant only" });
    return raw;
  }

  /**
   * What a key with reviewer groups may do in the inbox: list the approvals of one of its groups,
   * and decide only those its groups review (the rule the A2A endpoint applies: `decisionRefusal`).
   * Else the answer (`not_authorized`) is sent.
   */
  async function keyMay(v: Extract<Viewer, { kind: "tenant" }>, tenant: string, path: string, body: string, res: Response): Promise<boolean> {
    if (path !== "approvals.list" && path !== "approvals.decide") return true;
    const parsed = parseObject(body);
    if (!parsed) return true; // the API refuses it
    if (path === "approvals.list") {
      if (v.groups.length === 0 || v.groups.includes(String(parsed.group))) return true;
      res.status(403).json({ outcome: "not_authorized", message: `this key lists the approvals of its groups: ${v.groups.join(", ")}` });
      return false;
    }
    const got = await client(tenant).call(`runway.v1.${tenant}.approvals.get`, { id: parsed.id });
    if (got.outcome !== "found") return true; // the API's own answer follows
    const item = got.approval as { kind?: unknown; group?: unknown; escalation_group?: unknown };
    const refusal = decisionRefusal(
      v,
      {
        kind: String(item.kind),
        group: typeof item.group === "string" ? item.group : null,
        escalation_group: typeof item.escalation_group === "string" ? item.escalation_group : null,
      },
      undefined,
      String(parsed.decision),
    );
    if (!refusal) return true;
    res.status(403).json({ outcome: "not_authorized", message: refusal });
    return false;
  }

  router.use((_req: Request, res: Response, next: NextFunction) => {
    res.setHeader("Content-Security-Policy", CSP);
    res.setHeader("X-Content-Type-Options", "nosniff");
    res.setHeader("Referrer-Policy", "no-referrer");
    next();
  });
  router.get("/", (req: Request, res: Response, next: NextFunction) => {
    if (!req.originalUrl.split("?")[0]!.endsWith("/")) return res.redirect(301, `${req.baseUrl}/`);
    void sendFile(res, "index.html", "text/html; charset=utf-8").catch(next);
  });
  router.get("/app.css", (_req: Request, res: Response, next: NextFunction) => void sendFile(res, "app.css", "text/css; charset=utf-8").catch(next));
  router.get("/app.js", (_req: Request, res: Response, next: NextFunction) => {
    bundle()
      .then((js) => res.type("text/javascript; charset=utf-8").setHeader("Cache-Control", "no-cache").send(js))
      .catch(next);
  });
  router.get("/whoami", (req: Request, res: Response, next: NextFunction) => {
    void (async () => {
      const v = await viewer(req, res);
      if (!v) return;
      const bound = { host: deps.host, loopback: loopback(deps.host) || deps.host === "localhost" };
      res.json(
        v.kind === "operator"
          ? { outcome: "ok", viewer: "operator", ...bound }
          : { outcome: "ok", viewer: "tenant", tenant: v.tenant, identity: v.identity, groups: v.groups, ...bound },
      );
    })().catch(next);
  });
  router.post("/api/ops/:path", text, (req: Request, res: Response, next: NextFunction) => {
    void (async () => {
      const v = await viewer(req, res);
      if (!v) return;
      const path = String(req.params.path);
      if (!OPS_PATHS.has(path)) return void res.status(404).json({ outcome: "invalid_input", message: "no such console endpoint" });
      if (v.kind !== "operator") return void res.status(403).json({ outcome: "not_authorized", message: "operator endpoints need the operator's view" });
      if (GATHERED.has(path)) return void res.json(await gather(deps.nc, `runway.v1.ops.${path}`));
      await forward(res, client("ops"), `runway.v1.ops.${path}`, bodyText(req));
    })().catch(next);
  });
  router.post("/api/:tenant/:path", text, (req: Request, res: Response, next: NextFunction) => {
    void (async () => {
      const v = await viewer(req, res);
      if (!v) return;
      const path = String(req.params.path);
      if (!TENANT_PATHS.has(path)) return void res.status(404).json({ outcome: "invalid_input", message: "no such console endpoint" });
      const tenant = tenantFor(v, String(req.params.tenant), res);
      if (!tenant) return;
      let body = bodyText(req);
      if (v.kind === "tenant" && !(await keyMay(v, tenant, path, body, res))) return;
      if (ACTS.has(path)) body = withActor(body, v.kind === "tenant" ? v.identity : "console");
      await forward(res, client(tenant), `runway.v1.${tenant}.${path}`, body);
    })().catch(next);
  });
  router.get("/events/:tenant/:run", (req: Request, res: Response, next: NextFunction) => {
    void (async () => {
      const v = await viewer(req, res);
      if (!v) return;
      const tenant = tenantFor(v, String(req.params.tenant), res);
      if (!tenant) return;
      const run = String(req.params.run);
      const found = await client(tenant).call(`runway.v1.${tenant}.runs.get`, { run_id: run });
      if (found.outcome !== "found") return void res.status(404).json(found);
      streamEvents(req, res, deps.nc, client(tenant), tenant, run);
    })().catch(next);
  });
  router.use((_req: Request, res: Response) => void res.status(404).json({ outcome: "invalid_input", message: "no such console endpoint" }));
  router.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    const e = err as { type?: string; status?: number; message?: string };
    if (res.headersSent) return void res.end();
    if (e.type === "entity.too.large") return void res.status(413).json({ outcome: "request_too_large", limit: MAX_CONSOLE_BODY_BYTES });
    if (e.status && e.status >= 400 && e.status < 500) return void res.status(400).json({ outcome: "invalid_input", message: "the body could not be read" });
    deps.logger.warn("console request failed", { path: req.path, error: String(e?.message ?? err) });
    res.status(503).json({ outcome: "unavailable", message: "the request could not be served now; retry" });
  });
  return router;
}

function bodyText(req: Request): string {
  return typeof req.body === "string" && req.body.length > 0 ? req.body : "{}";
}

function parseObject(body: string): Record<string, unknown> | undefined {
  try {
    const parsed: unknown = JSON.parse(body);
    return parsed !== null && typeof parsed === "object" && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The body with `by` set to who acts, when it is a JSON object; anything else goes on as sent, for the API to refuse. */
function withActor(body: string, by: string): string {
  const parsed = parseObject(body);
  return parsed ? JSON.stringify({ ...parsed, by }) : body;
}

/** Every node's answer to an endpoint each node serves (`nats req … --replies 0`), as `answers`, sorted by node. */
async function gather(nc: NatsConnection, subject: string): Promise<ApiAnswer> {
  const answers: Record<string, unknown>[] = [];
  try {
    const replies = await nc.requestMany(subject, "", { strategy: "stall", stall: GATHER_STALL_MS, maxWait: GATHER_MAX_MS });
    for await (const m of replies) {
      try {
        const v: unknown = m.json();
        if (v !== null && typeof v === "object" && !Array.isArray(v)) answers.push(v as Record<string, unknown>);
      } catch {
        // not JSON: not an answer of a node
      }
    }
  } catch (e) {
    if (answers.length === 0) return { outcome: "unavailable", message: String(e) };
  }
  answers.sort((a, b) => String(a.node).localeCompare(String(b.node)));
  return { outcome: "ok", answers };
}

/** One API request and its answer as the API gave it; a fault or no answer is the console's `unavailable` (503). */
async function forward(res: Response, client: RunwayClient, subject: string, body: string): Promise<void> {
  let answer: ApiAnswer;
  try {
    answer = await client.callText(subject, body);
  } catch (e) {
    if (e instanceof ApiFault) return void res.status(e.code === 503 ? 503 : 500).json({ outcome: "unavailable", code: e.code, message: e.message });
    if (e instanceof ApiNoAnswer) return void res.status(503).json({ outcome: "unavailable", message: e.message });
    throw e;
  }
  res.json(answer);
}

/** A run's events as Server-Sent Events: each with its id (`Last-Event-ID` resumes after it), `end` once the run ended. */
function streamEvents(req: Request, res: Response, nc: NatsConnection, client: RunwayClient, tenant: string, run: string): void {
  const ac = new AbortController();
  res.on("close", () => ac.abort());
  res.writeHead(200, { "Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache", Connection: "keep-alive", "X-Accel-Buffering": "no" });
  res.write(": runway console\n\n");
  const beat = setInterval(() => res.write(": alive\n\n"), SSE_HEARTBEAT_MS);
  const lastId = req.headers["last-event-id"];
  const after = typeof lastId === "string" && /^\d+\.\d+$/.test(lastId) ? lastId : undefined;
  void (async () => {
    try {
      for await (const e of followRun(nc, client, tenant, run, { signal: ac.signal, ...(after ? { after } : {}) })) {
        res.write(`${e.id ? `id: ${e.id}\n` : ""}data: ${JSON.stringify(e)}\n\n`);
        if (TERMINAL_EVENT_TYPES.has(e.type)) {
          res.write("event: end\ndata: {}\n\n");
          break;
        }
      }
    } catch {
      // The connection closed, or the API stopped answering: the page reconnects.
    } finally {
      clearInterval(beat);
      res.end();
    }
  })();
}

async function sendFile(res: Response, name: string, type: string): Promise<void> {
  const body = await readFile(`${WEB}${name}`, "utf8");
  res.type(type).setHeader("Cache-Control", "no-cache").send(body);
}

/** The page's script, bundled by esbuild (a dependency of the node already) on first request and kept. */
function lazyBundle(): () => Promise<string> {
  let built: Promise<string> | undefined;
  return () => {
    built ??= import("esbuild")
      .then((esbuild) =>
        esbuild.build({
          entryPoints: [`${WEB}main.ts`],
          bundle: true,
          write: false,
          format: "esm",
          target: "es2022",
          minify: true,
          legalComments: "none",
          logLevel: "silent",
        }),
      )
      .then((r) => r.outputFiles[0]!.text);
    built.catch(() => (built = undefined));
    return built;
  };
}
