import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import express, { type NextFunction, type Request, type RequestHandler, type Response } from "express";
import { AgentCard } from "@a2a-js/sdk";
import { agentCardHandler, jsonRpcHandler, restHandler } from "@a2a-js/sdk/server/express";
import { defaultServerCallContextBuilder, JsonRpcTransportHandler } from "@a2a-js/sdk/server";
import { RequestMalformedError, toRestErrorBody } from "@a2a-js/sdk/errors";
import { isTenantId, MAX_JSON_DEPTH, nestingDepth, WorkflowNameSchema } from "../../machines/index.js";
import type { Logger } from "../../runtime/index.js";
import { parseTraceparent } from "../../actors/index.js";
import type { ApiKeyStore } from "../keys/index.js";
import type { AgentStore, ExposedAgent } from "./agents.js";
import { agentCardOf } from "./card.js";
import { AgentHandler, type A2aDeps } from "./handler.js";
import { Caller } from "./caller.js";

/** Larger request bodies are refused before parsing. */
export const MAX_A2A_BODY_BYTES = 256 * 1024;
/** How long an agent's card and handlers are reused before its definition's latest version is read again. */
const CARD_TTL_MS = 10_000;
const CARD_PATH = "/.well-known/agent-card.json";

export interface A2aServerDeps extends A2aDeps {
  agents: AgentStore;
  /** The tenants' API keys: a non-public agent's callers are the keys of its tenant. */
  keys?: ApiKeyStore;
  logger: Logger;
}

export interface A2aServer {
  /** The server's base URL; an agent is at `<url>/a2a/<tenant>/<agent>`. */
  url: string;
  close(): Promise<void>;
}

export interface A2aServerOptions {
  port: number;
  host?: string;
  publicUrl?: string;
  /** How often a task's waiting call reads its run's journal when no live event came (`A2aDeps.pollMs`). */
  taskPollMs?: number;
  /** Other handlers served by the same server under their own paths (the console at `/console`). */
  mounts?: { path: string; handler: RequestHandler }[];
}

/** One agent's card and its three mounted SDK handlers, as built for one stored revision of its exposure. */
interface Mounted {
  revision: number;
  built: number;
  modified: number;
  card: RequestHandler;
  jsonRpc: RequestHandler;
  rest: RequestHandler;
  /** The SDK's JSON-RPC transport over the same handler: the hot methods' route ({@link serveHot}). */
  transport: JsonRpcTransportHandler;
  public: boolean;
}

/** Each request's caller (the SDK asks for it by request). */
const callers = new WeakMap<Request, Caller>();

/**
 * The A2A HTTP server of a node: every exposed agent at `/a2a/<tenant>/<agent>`, its card at
 * `…/.well-known/agent-card.json` (ETag, Last-Modified, 304), JSON-RPC by POST to the agent's
 * URL and HTTP+JSON under it, both the SDK's express handlers over one `AgentHandler`. Whatever
 * a request is, it is answered in the shape of its binding: malformed bodies, oversized ones,
 * unknown agents and paths never reach a run, and no answer carries a stack.
 *
 * Long on purpose: its inner functions share the mounted agents and the express app they close
 * over; split apart they would pass both everywhere.
 */
export async function startA2aServer(deps: A2aServerDeps, options: A2aServerOptions): Promise<A2aServer> {
  const host = options.host ?? "127.0.0.1";
  const mounted = new Map<string, Mounted>();
  let base = options.publicUrl ?? "";
  const parse = express.json({ limit: MAX_A2A_BODY_BYTES, type: ["application/json", "application/a2a+json"], strict: false });

  async function mount(tenant: string, agent: ExposedAgent & { revision: number }): Promise<Mounted | undefined> {
    const key = `${tenant}/${agent.name}`;
    const known = mounted.get(key);
    if (known && known.revision === agent.revision && Date.now() - known.built < CARD_TTL_MS) return known;
    const def = await deps.definitions.get(tenant, agent.definition);
    if (def.outcome !== "found") return undefined;
    const description = (def.definition as { description?: unknown }).description;
    const card = agentCardOf(`${base}/a2a/${tenant}/${agent.name}`, agent, {
      version: def.ref.version,
      ...(typeof description === "string" ? { description } : {}),
    });
    const handler = new AgentHandler(options.taskPollMs ? { ...deps, pollMs: options.taskPollMs } : deps, tenant, agent, card);
    const userBuilder = async (req: Request) => callers.get(req) ?? new Caller(new AbortController().signal);
    const wire = AgentCard.toJSON(card) as AgentCard;
    const m: Mounted = {
      revision: agent.revision,
      built: Date.now(),
      modified: Math.max(agent.exposed_at, def.published_at),
      card: agentCardHandler({ agentCardProvider: async () => wire, cache: { maxAge: 60 } }),
      jsonRpc: jsonRpcHandler({ requestHandler: handler, userBuilder }),
      rest: restHandler({ requestHandler: handler, userBuilder }),
      transport: new JsonRpcTransportHandler(handler),
      public: agent.public,
    };
    mounted.set(key, m);
    return m;
  }

  const app = express();
  app.disable("x-powered-by");
  app.set("env", "production");
  for (const m of options.mounts ?? []) app.use(m.path, m.handler);
  app.use("/a2a/:tenant/:agent", (req: Request, res: Response, next: NextFunction) => {
    void (async () => {
      const tenant = String(req.params.tenant);
      const name = String(req.params.agent);
      const rpc = req.method === "POST" && req.path === "/";
      res.locals.rpc = rpc;
      if (!isTenantId(tenant) || !WorkflowNameSchema.safeParse(name).success) return notFound(res, rpc, "no such agent");
      const exposed = await deps.agents.get(tenant, name);
      const m = exposed ? await mount(tenant, exposed) : undefined;
      if (!m) return notFound(res, rpc, "no such agent");
      if (req.path === CARD_PATH) {
        res.setHeader("Last-Modified", new Date(m.modified).toUTCString());
        req.url = "/";
        return m.card(req, res, next);
      }
      const ac = new AbortController();
      let caller: Caller;
      if (m.public) caller = new Caller(ac.signal);
      else {
        // A non-public agent answers the keys of its own tenant: none, a bad or a revoked one is 401, another tenant's 403.
        const token = /^Bearer +(\S+) *$/i.exec(req.headers.authorization ?? "")?.[1];
        const key = token && deps.keys ? await deps.keys.authenticate(token) : undefined;
        if (!key) {
          res.setHeader("WWW-Authenticate", 'Bearer realm="runway"');
          return refuse(res, rpc, 401, "UNAUTHENTICATED", "this agent needs a valid bearer token (an API key of its tenant)", -32600, 401);
        }
        if (key.tenant !== tenant) return refuse(res, rpc, 403, "PERMISSION_DENIED", "this key is not one of the agent's tenant", -32600, 403);
        caller = new Caller(ac.signal, key.identity, true, key.groups, key.interactive);
      }
      const traceparent = req.headers.traceparent;
      caller.trace = parseTraceparent(typeof traceparent === "string" ? traceparent : undefined);
      res.on("close", () => ac.abort());
      callers.set(req, caller);
      parse(req, res, (err?: unknown) => {
        if (err) return bodyError(res, rpc, err);
        if (req.body !== undefined && nestingDepth(req.body, MAX_JSON_DEPTH) > MAX_JSON_DEPTH)
          return refuse(res, rpc, 400, "INVALID_ARGUMENT", `the body nests deeper than ${MAX_JSON_DEPTH} levels`, -32600);
        if (rpc && hot(req)) return void serveHot(m.transport, req, res, caller, deps.logger);
        (rpc ? m.jsonRpc : m.rest)(req, res, (e?: unknown) => (e ? next(e) : notFound(res, rpc, "no such method")));
      });
    })().catch(next);
  });
  app.use((_req: Request, res: Response) => notFound(res, false, "not found"));
  app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    deps.logger.warn("a2a request failed", { path: req.path, error: String((err as Error)?.message ?? err) });
    if (res.headersSent) return void res.end();
    refuse(res, res.locals.rpc === true, 503, "UNAVAILABLE", "the request could not be served now; retry", -32603);
  });
  const server: Server = await new Promise((resolve, reject) => {
    const s = app.listen(options.port, host, (err?: Error) => (err ? reject(err) : resolve(s)));
  });
  server.keepAliveTimeout = 65_000;
  const port = (server.address() as AddressInfo).port;
  base ||= `http://${host}:${port}`;
  return {
    url: base,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** The JSON-RPC methods a client calls per task, served by {@link serveHot}. */
const HOT_METHODS = new Set(["SendMessage", "GetTask"]);

/**
 * A JSON-RPC request the SDK's express router would hand, unchanged, to its transport: a 1.0
 * request (`A2A-Version: 1.0`, the only version the card names), `Content-Type: application/json`
 * (the router's guard), no `A2A-Extensions` (none are served), a hot method (not a stream).
 */
function hot(req: Request): boolean {
  const type = req.headers["content-type"];
  const body: unknown = req.body;
  return (
    req.headers["a2a-version"] === "1.0" &&
    req.headers["a2a-extensions"] === undefined &&
    typeof type === "string" &&
    type.split(";", 1)[0]!.trim().toLowerCase() === "application/json" &&
    typeof body === "object" &&
    body !== null &&
    "method" in body &&
    typeof body.method === "string" &&
    HOT_METHODS.has(body.method)
  );
}

/**
 * `SendMessage` and `GetTask` by the SDK's own JSON-RPC transport (its validation, its type
 * conversions both ways, its error mapping), called here rather than through its express router:
 * the router's layers (a second content-type check and JSON parser, the context and card lookups,
 * the version check) are what {@link hot} already established; skipping them cuts about 0.08 ms
 * of a blocking send at p50 (docs/a2a.md "Serving", "The hot methods"). The answer is the router's:
 * the transport's envelope as HTTP 200, or, for what the transport throws, its mapped error (500
 * for an internal one). Every other request, method and version goes through the SDK's router.
 */
async function serveHot(transport: JsonRpcTransportHandler, req: Request, res: Response, caller: Caller, logger: Logger): Promise<void> {
  const context = defaultServerCallContextBuilder({ extensions: [], user: caller, headers: req.headers, requestedVersion: "1.0" });
  try {
    res.status(200).json(await transport.handle(req.body, context));
  } catch (err) {
    logger.warn("a2a request failed", { path: req.path, error: String((err as Error)?.message ?? err) });
    const error = JsonRpcTransportHandler.mapToJSONRPCError(err);
    if (res.headersSent) return void res.end();
    res.status(error.code === -32603 ? 500 : 200).json({ jsonrpc: "2.0", id: req.body?.id || null, error });
  }
}

/**
 * An error in the binding's shape: a JSON-RPC error envelope (HTTP 200, but 401 / 403 for a caller
 * not authenticated or not admitted: that is HTTP's to say in every binding), or a `google.rpc.Status` body.
 */
function refuse(res: Response, rpc: boolean, status: number, name: string, message: string, code = -32600, rpcStatus = 200): void {
  if (rpc) return void res.status(rpcStatus).json({ jsonrpc: "2.0", id: null, error: { code, message } });
  res.status(status).json({ error: { code: status, status: name, message, details: [] } });
}

function notFound(res: Response, rpc: boolean, message: string): void {
  refuse(res, rpc, 404, "NOT_FOUND", message, -32601);
}

/** A body the parser refused: too large, not JSON, not UTF-8. */
function bodyError(res: Response, rpc: boolean, err: unknown): void {
  const e = err as { type?: string; status?: number; message?: string };
  if (e.type === "entity.too.large") return refuse(res, rpc, 413, "INVALID_ARGUMENT", `the body is over ${MAX_A2A_BODY_BYTES} bytes`);
  if (rpc) return refuse(res, rpc, 400, "INVALID_ARGUMENT", "Invalid JSON payload.", -32700);
  res.status(400).json(toRestErrorBody(new RequestMalformedError("Invalid JSON payload."), 400));
}
