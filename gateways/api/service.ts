import type { NatsConnection } from "@nats-io/transport-node";
import { z, type ZodType } from "zod";
import type { DefinitionStore, NodeMetrics, Sweeper } from "../../actors/index.js";
import type { RunService } from "./run-service.js";
import type { TenantService } from "./tenant-service.js";
import type { RunReplays } from "./replays.js";
import { getInboxItem, INBOX_PAGE_MAX, listInbox, listReconciliations, RUNS_CURSOR_PATTERN } from "../../actors/index.js";
import {
  isTenantId,
  MAX_JSON_DEPTH,
  nestingDepth,
  SignalNameSchema,
  TenantIdSchema,
  TokenSchema,
  ToolServerNameSchema,
  WorkflowNameSchema,
} from "../../machines/index.js";
import type { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
import type { JsonSchemaType } from "@modelcontextprotocol/sdk/validation";
import { mcpSdk, redacted, ToolServerSpecSchema, type ToolGateway, type ToolRegistry } from "../tools/index.js";
import { ID_PATTERN, isFault, listDeadLetters, MicroService, RunwayFault, StoreUnavailable, type MicroRequest } from "../../runtime/index.js";

export const API_VERSION = "0.2.0";
/** Larger request bodies are refused before parsing. */
export const MAX_REQUEST_BYTES = 512 * 1024;

/** A gated tool call's approval id, `<run>:<node>:approval.<server>/<tool>` (machines/execution/gates.ts): its server and tool. */
const GATED_CALL = /^[^:]+:[^:]+:approval\.([A-Za-z0-9_-]{1,64})\/(.+)$/;
/** A tool server's request for a person's input: `<run>:<node>:input.<server>/<tool>.<round>`. */
const INPUT_REQUEST = /^[^:]+:[^:]+:input\./;
/** The MCP SDK's JSON Schema validator (Ajv), made on the first form checked: the SDK is imported only when used (tools/sdk.ts). */
let formSchemas: AjvJsonSchemaValidator | undefined;

/**
 * A person's answer to a tool server's forms, checked against the schemas the server sent before
 * anything is stored: approve carries the content (one form: the payload; several: by key); an
 * edit has nothing to change. Undefined: the answer fits (or the request is gone: the run answers).
 */
async function inputProblem(nc: NatsConnection, tenant: string, id: string, decision: { decision: string; payload?: unknown }): Promise<string | undefined> {
  if (decision.decision === "edit") return "a request for input is answered with approve (its payload is the form's content) or reject (declined)";
  if (decision.decision !== "approve") return undefined;
  const item = await getInboxItem(nc, tenant, id);
  const requests = (item?.payload as { requests?: { key: string; schema: Record<string, unknown> }[] } | undefined)?.requests;
  if (!requests) return undefined;
  formSchemas ??= new (await mcpSdk()).AjvJsonSchemaValidator();
  for (const r of requests) {
    const content = requests.length === 1 ? decision.payload : (decision.payload as Record<string, unknown> | undefined)?.[r.key];
    try {
      const checked = formSchemas.getValidator(r.schema as JsonSchemaType)(content ?? {});
      if (!checked.valid) return `${r.key}: ${checked.errorMessage}`;
    } catch (err) {
      return `${r.key}: the server's schema cannot be checked (${String((err as Error).message ?? err)})`;
    }
  }
  return undefined;
}
/** A run id is an actor id (it becomes a KV key and a subject token); one of another tenant is simply not found. */
const RunId = z.string().regex(ID_PATTERN, "a run id is 1-200 characters of [A-Za-z0-9_=-]");
/** Versions count up from 1; the bound keeps the number's text plain digits (it is part of a KV key). */
const Version = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);
const StartKey = z.strictObject({ source: z.string().min(1).max(200), delivery_id: z.string().min(1).max(500) });
const schemas = {
  definitionsPut: z.strictObject({ definition: z.unknown(), publish: z.boolean().default(true) }),
  definitionsGet: z.strictObject({ name: WorkflowNameSchema, version: Version.optional() }),
  definitionsList: z.strictObject({}),
  runsStart: z.strictObject({
    definition: WorkflowNameSchema,
    version: Version.optional(),
    input: z.unknown().optional(),
    start_key: StartKey.optional(),
    lane: z.enum(["interactive", "batch", "migration"]).optional(),
    source: TokenSchema.optional(),
    project: TokenSchema.optional(),
    priority: z.number().int().min(0).max(9).optional(),
    deadline_ms: z
      .number()
      .int()
      .positive()
      .max(366 * 86_400_000)
      .optional(),
  }),
  runsGet: z.strictObject({ run_id: RunId }),
  runsList: z.strictObject({
    status: z.enum(["queued", "running", "waiting", "succeeded", "failed", "cancelled"]).optional(),
    limit: z.number().int().positive().max(500).optional(),
    /** `next_cursor` of the previous page (a part of the runs index and a sequence in it). */
    cursor: z.string().regex(RUNS_CURSOR_PATTERN).optional(),
  }),
  runsEvents: z.strictObject({
    run_id: RunId,
    /** The last event id the caller has (`<revision>.<index>`, as published); absent: from the run's first event. */
    after: z
      .string()
      .regex(/^[1-9][0-9]{0,15}\.(0|[1-9][0-9]{0,5})$/, "an event id is <revision>.<index>, as events carry it")
      .optional(),
    limit: z.number().int().positive().max(1_000).optional(),
  }),
  runsCancel: z.strictObject({ run_id: RunId, reason: z.string().max(1_000).default("cancelled by request"), by: z.string().max(200).default("api") }),
  tenantsPut: z.strictObject({ id: TenantIdSchema, settings: z.unknown().optional() }),
  tenantsList: z.strictObject({}),
  tenantsState: z.strictObject({ id: TenantIdSchema, reason: z.string().max(1_000).default("operator") }),
  tenantGet: z.strictObject({}),
  sweep: z.strictObject({}),
  deadLetters: z.strictObject({ limit: z.number().int().positive().max(500).default(50) }),
  tenantPut: z.strictObject({ settings: z.unknown() }),
  runsReconcile: z.strictObject({
    run_id: RunId,
    key: z.string().min(1).max(600),
    decision: z.enum(["done", "retry", "abandon"]),
    /** `done`: the call's result as the person found it (what the step gets instead of calling). */
    result: z.unknown().optional(),
    by: z.string().min(1).max(200).default("api"),
  }),
  runsReconciliations: z.strictObject({ run_id: RunId.optional() }),
  runsTrajectory: z.strictObject({ run_id: RunId }),
  approvalsList: z.strictObject({
    group: z.string().max(64).optional(),
    run_id: RunId.optional(),
    expires_before: z.number().int().nonnegative().optional(),
    limit: z.number().int().positive().max(INBOX_PAGE_MAX).optional(),
    cursor: z
      .string()
      .regex(/^\d+:.{1,500}$/, "a cursor is the next_cursor of an earlier page")
      .optional(),
  }),
  approvalsGet: z.strictObject({ id: z.string().min(3).max(500) }),
  approvalsDecide: z.strictObject({
    id: z.string().min(3).max(500),
    decision: z.enum(["approve", "reject", "edit"]),
    /** `edit`: what the run goes on with instead of the request's payload. */
    payload: z.unknown().optional(),
    reason: z.string().max(4_096).optional(),
    by: z.string().min(1).max(200).default("api"),
  }),
  runsSignal: z.strictObject({ run_id: RunId, name: SignalNameSchema, data: z.unknown().optional(), by: z.string().min(1).max(200).default("api") }),
  runsReplay: z.strictObject({ run_id: RunId, wait_ms: z.number().int().min(0).max(60_000).default(30_000) }),
  toolServersPut: z.strictObject({ server: z.unknown() }),
  toolServerName: z.strictObject({ name: ToolServerNameSchema }),
  toolServersList: z.strictObject({}),
  toolsList: z.strictObject({ server: ToolServerNameSchema.optional() }),
};

export interface ApiServices {
  tenants: TenantService;
  definitions: DefinitionStore;
  runs: RunService;
  metrics: NodeMetrics;
  /** This node's recovery sweep (an operator may run a pass now). */
  sweeper?: Sweeper;
  /** Trajectories and replays of finished runs. */
  replays?: RunReplays;
  /** The tool gateway: the tenant's MCP server registry and the tools behind it. */
  tools?: { registry: ToolRegistry; gateway: ToolGateway };
  now(): number;
}

type Answer = { outcome: string } & Record<string, unknown>;

/**
 * A body nesting arrays and objects deeper than MAX_JSON_DEPTH (the body itself is level 1) is
 * refused right after parsing, before zod or anything else recurses on it. Most endpoints
 * answer `invalid_input`; `definitions.put` answers as for any definition it refuses.
 */
const TOO_DEEP = `the request nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels`;
const BODY_TOO_DEEP: Answer = { outcome: "invalid_input", reason: TOO_DEEP };
const DEFINITION_TOO_DEEP: Answer = { outcome: "invalid_definition", errors: [{ code: "too_deep", path: "definition", message: TOO_DEEP }] };

/**
 * The `runway` NATS micro service: `runway.v1.<tenant>.definitions.put|get|list`,
 * `runway.v1.<tenant>.runs.start|get|list|events|cancel|signal|reconcile|reconciliations|trajectory|replay`,
 * `runway.v1.<tenant>.tools.servers.put|get|list|delete`, `runway.v1.<tenant>.tools.list`,
 * `runway.v1.<tenant>.approvals.list|get|decide`,
 * `runway.v1.ops.tenants.put|list` and the
 * operators' `runway.v1.ops.*` (metrics, sweep, dead letters).
 * Every request and reply is JSON; requests are validated by zod (unknown fields refused) and
 * every business answer is a closed `{ outcome, … }`. Only faults use the
 * `Nats-Service-Error` / `-Code` headers (503 when retrying may help, 500 otherwise).
 */
export async function startApi(nc: NatsConnection, services: ApiServices): Promise<MicroService> {
  const service = new MicroService(nc, { name: "runway", version: API_VERSION, description: "Runway durable workflow runtime" });
  const tenantEndpoint = <S extends ZodType>(
    name: string,
    path: string,
    schema: S,
    handle: (tenant: string, body: z.infer<S>) => Promise<Answer>,
    tooDeep = BODY_TOO_DEEP,
  ) => {
    service.addEndpoint(name, {
      subject: `runway.v1.*.${path}`,
      metadata: { path, tenant: "the second subject token" },
      handler: (req) =>
        serve(
          req,
          schema,
          async (body) => {
            const tenant = req.subject.split(".")[2] ?? "";
            if (!isTenantId(tenant) || !(await services.tenants.exists(tenant))) return { outcome: "tenant_not_found" };
            return handle(tenant, body);
          },
          tooDeep,
        ),
    });
  };
  tenantEndpoint(
    "definitions_put",
    "definitions.put",
    schemas.definitionsPut,
    (t, b) => services.definitions.put(t, b.definition, { publish: b.publish, now: services.now() }),
    DEFINITION_TOO_DEEP,
  );
  tenantEndpoint("definitions_get", "definitions.get", schemas.definitionsGet, (t, b) => services.definitions.get(t, b.name, b.version));
  tenantEndpoint("definitions_list", "definitions.list", schemas.definitionsList, async (t) => ({
    outcome: "ok",
    definitions: await services.definitions.list(t),
  }));
  tenantEndpoint("runs_start", "runs.start", schemas.runsStart, (t, b) => services.runs.start(t, b));
  tenantEndpoint("runs_get", "runs.get", schemas.runsGet, async (t, b) => {
    const run = await services.runs.get(t, b.run_id);
    return run ? { outcome: "found", run } : { outcome: "run_not_found" };
  });
  tenantEndpoint("runs_list", "runs.list", schemas.runsList, async (t, b) => ({ outcome: "ok", ...(await services.runs.list(t, b)) }));
  tenantEndpoint("runs_events", "runs.events", schemas.runsEvents, (t, b) => services.runs.events(t, b.run_id, b));
  tenantEndpoint("runs_cancel", "runs.cancel", schemas.runsCancel, (t, b) => services.runs.cancel(t, b.run_id, b.reason, b.by));
  tenantEndpoint("approvals_list", "approvals.list", schemas.approvalsList, async (t, b) => ({
    outcome: "ok",
    ...(await listInbox(
      nc,
      t,
      {
        ...(b.group ? { group: b.group } : {}),
        ...(b.run_id ? { run: b.run_id } : {}),
        ...(b.expires_before !== undefined ? { expires_before: b.expires_before } : {}),
      },
      { ...(b.limit !== undefined ? { limit: b.limit } : {}), ...(b.cursor !== undefined ? { cursor: b.cursor } : {}) },
    )),
  }));
  tenantEndpoint("approvals_get", "approvals.get", schemas.approvalsGet, async (t, b) => {
    const approval = await getInboxItem(nc, t, b.id);
    return approval ? { outcome: "found", approval } : { outcome: "approval_not_found" };
  });
  tenantEndpoint("approvals_decide", "approvals.decide", schemas.approvalsDecide, async (t, b) => {
    const { id, ...decision } = b;
    if (decision.decision === "edit" && decision.payload === undefined)
      return { outcome: "invalid_input", reason: "an edit carries the payload the run goes on with" };
    if (INPUT_REQUEST.test(id)) {
      const problem = await inputProblem(nc, t, id, decision);
      if (problem) return { outcome: "invalid_input", reason: problem };
      return services.runs.decide(t, id, decision);
    }
    const gated = decision.decision === "edit" ? GATED_CALL.exec(id) : null;
    if (gated) {
      // An edit of a gated call is the arguments it is made with: checked against the tool's schema before anything is stored.
      if (!services.tools) throw new RunwayFault("tool_gateway_unavailable", "this node cannot check a tool's arguments", { kind: "retryable" });
      const checked = await services.tools.gateway.checkArguments(t, gated[1]!, gated[2]!, decision.payload);
      if (checked.outcome === "unavailable") throw new RunwayFault("tool_server_unavailable", checked.message, { kind: "retryable" });
      if (checked.outcome === "invalid") return { outcome: "invalid_input", reason: checked.reason };
    }
    return services.runs.decide(t, id, decision);
  });
  tenantEndpoint("runs_signal", "runs.signal", schemas.runsSignal, (t, b) => {
    const { run_id, ...signal } = b;
    return services.runs.signal(t, run_id, signal);
  });
  tenantEndpoint("runs_reconcile", "runs.reconcile", schemas.runsReconcile, (t, b) => {
    const { run_id, ...settle } = b;
    return services.runs.reconcile(t, run_id, settle);
  });
  tenantEndpoint("runs_reconciliations", "runs.reconciliations", schemas.runsReconciliations, async (t, b) => ({
    outcome: "ok",
    items: await listReconciliations(nc, t, b.run_id),
  }));
  const replays = services.replays;
  if (replays) {
    tenantEndpoint("runs_trajectory", "runs.trajectory", schemas.runsTrajectory, (t, b) => replays.trajectory(t, b.run_id));
    tenantEndpoint("runs_replay", "runs.replay", schemas.runsReplay, (t, b) => replays.replay(t, b.run_id, { waitMs: b.wait_ms }));
  }
  const tools = services.tools;
  if (tools) {
    tenantEndpoint("tool_servers_put", "tools.servers.put", schemas.toolServersPut, async (t, b) => {
      const spec = ToolServerSpecSchema.safeParse(b.server);
      if (!spec.success) return { outcome: "invalid_input", reason: spec.error.issues.map((i) => `server.${i.path.join(".")}: ${i.message}`).join("; ") };
      return { outcome: "saved", server: redacted(await tools.registry.put(t, spec.data, services.now())) };
    });
    tenantEndpoint("tool_servers_get", "tools.servers.get", schemas.toolServerName, async (t, b) => {
      const record = await tools.registry.get(t, b.name);
      return record ? { outcome: "found", server: redacted(record) } : { outcome: "server_not_found" };
    });
    tenantEndpoint("tool_servers_list", "tools.servers.list", schemas.toolServersList, async (t) => ({
      outcome: "ok",
      servers: (await tools.registry.list(t)).map(redacted),
    }));
    tenantEndpoint("tool_servers_delete", "tools.servers.delete", schemas.toolServerName, async (t, b) =>
      (await tools.registry.delete(t, b.name)) ? { outcome: "deleted" } : { outcome: "server_not_found" },
    );
    tenantEndpoint("tools_list", "tools.list", schemas.toolsList, (t, b) => tools.gateway.list(t, b.server));
  }
  tenantEndpoint("tenant_get", "tenant.get", schemas.tenantGet, async (t) => ({ outcome: "found", tenant: await services.tenants.get(t) }));
  tenantEndpoint("tenant_put", "tenant.put", schemas.tenantPut, (t, b) => services.tenants.put(t, b.settings));
  service.addEndpoint("tenants_put", {
    subject: "runway.v1.ops.tenants.put",
    handler: (req) => serve(req, schemas.tenantsPut, (b) => services.tenants.create(b.id, b.settings)),
  });
  for (const to of ["kill", "drain", "resume"] as const) {
    service.addEndpoint(`tenants_${to}`, {
      subject: `runway.v1.ops.tenants.${to}`,
      handler: (req) =>
        serve(req, schemas.tenantsState, async (b) =>
          (await services.tenants.exists(b.id)) ? services.tenants.setState(b.id, to, b.reason) : { outcome: "tenant_not_found" },
        ),
    });
  }
  // Every node answers (its own queue group): `nats req runway.v1.ops.metrics '' --replies 0`.
  service.addEndpoint("metrics", {
    subject: "runway.v1.ops.metrics",
    queue: `node-${services.metrics.node}`,
    handler: (req) => req.respond(JSON.stringify({ outcome: "ok", ...services.metrics.json() })),
  });
  service.addEndpoint("metrics_prometheus", {
    subject: "runway.v1.ops.metrics.prometheus",
    queue: `node-${services.metrics.node}`,
    handler: (req) => req.respond(services.metrics.prometheus()),
  });
  // Every node sweeps the partitions it serves now and answers its report: `nats req runway.v1.ops.sweep '' --replies 0`.
  const sweeper = services.sweeper;
  if (sweeper) {
    service.addEndpoint("sweep", {
      subject: "runway.v1.ops.sweep",
      queue: `node-${services.metrics.node}`,
      handler: (req) => serve(req, schemas.sweep, async () => ({ outcome: "swept", node: services.metrics.node, report: await sweeper.pass() })),
    });
  }
  // Read from the dead-letter stream, so any one node answers.
  service.addEndpoint("dead_letters", {
    subject: "runway.v1.ops.dead_letters",
    handler: (req) =>
      serve(req, schemas.deadLetters, async (b) => {
        const listed = await listDeadLetters(nc, { limit: b.limit });
        if (listed.outcome === "unavailable") throw new StoreUnavailable(`dead letters: ${listed.detail}`);
        return { ...listed };
      }),
  });
  service.addEndpoint("tenants_list", {
    subject: "runway.v1.ops.tenants.list",
    handler: (req) => serve(req, schemas.tenantsList, async () => ({ outcome: "ok", tenants: await services.tenants.list() })),
  });
  await service.start();
  return service;
}

async function serve<S extends ZodType>(req: MicroRequest, schema: S, handle: (body: z.infer<S>) => Promise<Answer>, tooDeep = BODY_TOO_DEEP): Promise<void> {
  const reply = (answer: Answer) => req.respond(JSON.stringify(answer));
  if (req.data.length > MAX_REQUEST_BYTES) return reply({ outcome: "request_too_large", bytes: req.data.length, limit: MAX_REQUEST_BYTES });
  let raw: unknown;
  try {
    raw = req.data.length === 0 ? {} : JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(req.data));
  } catch {
    return reply({ outcome: "invalid_input", reason: "the body is not JSON" });
  }
  // JSON.parse does not recurse; the depth is measured without recursion too.
  if (nestingDepth(raw, MAX_JSON_DEPTH) > MAX_JSON_DEPTH) return reply(tooDeep);
  const parsed = schema.safeParse(raw);
  if (!parsed.success)
    return reply({ outcome: "invalid_input", reason: parsed.error.issues.map((i) => `${i.path.join(".") || "body"}: ${i.message}`).join("; ") });
  try {
    reply(await handle(parsed.data));
  } catch (err) {
    const retryable = isFault(err) && err.kind === "retryable";
    req.respondError(retryable ? 503 : 500, err instanceof Error ? err.message : String(err));
  }
}
