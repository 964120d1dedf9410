import type { MsgHdrs } from "@nats-io/transport-node";
import type { z, ZodType } from "zod";
import { isTenantId, MAX_JSON_DEPTH, nestingDepth } from "../../machines/index.js";
import { isFault, type MicroRequest, type MicroService } from "../../runtime/index.js";
import type { ApiAnswer } from "./schemas.js";
import type { TenantService } from "./tenant-service.js";
import { callerOf, type ApiCaller, type CallerDirectory } from "./callers.js";

/** Larger request bodies are refused before parsing. */
export const MAX_REQUEST_BYTES = 512 * 1024;

/**
 * A body nesting arrays and objects deeper than MAX_JSON_DEPTH (the body itself is level 1) is
 * refused right after parsing, before zod or anything else recurses on it. Most endpoints
 * answer `invalid_input`; `definitions.put` answers as for any definition it refuses.
 */
const TOO_DEEP = `the request nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels`;
const BODY_TOO_DEEP: ApiAnswer = { outcome: "invalid_input", reason: TOO_DEEP };
export const DEFINITION_TOO_DEEP: ApiAnswer = { outcome: "invalid_definition", errors: [{ code: "too_deep", path: "definition", message: TOO_DEEP }] };

/** Adds a `runway.v1.<tenant>.<path>` endpoint: the request validated by `schema`, for a tenant that exists. */
export type TenantEndpoint = <S extends ZodType>(
  name: string,
  path: string,
  schema: S,
  handle: (tenant: string, body: z.infer<S>, caller: ApiCaller | undefined, headers: MsgHdrs | undefined) => Promise<ApiAnswer>,
  tooDeep?: ApiAnswer,
) => void;

/**
 * @param directory who the deployment's NATS keys are, when it runs with credentials on: a tenant
 *   key's request is then handled as that key (`caller`); without it every caller is staff.
 */
export function tenantEndpoints(service: MicroService, tenants: TenantService, directory?: CallerDirectory): TenantEndpoint {
  return (name, path, schema, handle, tooDeep = BODY_TOO_DEEP) => {
    service.addEndpoint(name, {
      subject: `runway.v1.*.${path}`,
      metadata: { path, tenant: "the second subject token" },
      handler: (req) =>
        serve(
          req,
          schema,
          async (body) => {
            const tenant = req.subject.split(".")[2] ?? "";
            if (!isTenantId(tenant) || !(await tenants.exists(tenant))) return { outcome: "tenant_not_found" };
            const who = callerOf(directory, tenant, req.headers);
            if (who.from === "foreign") return { outcome: "not_authorized", reason: `a key of ${who.account} cannot call tenant ${tenant}` };
            return handle(tenant, body, who.from === "tenant" ? who.caller : undefined, req.headers);
          },
          tooDeep,
        ),
    });
  };
}

/**
 * One request: bounded, parsed as JSON, bounded in depth, validated by `schema`, then handled.
 * A business answer is the reply's body; a fault is a `Nats-Service-Error` (503 when retrying may help).
 */
export async function serve<S extends ZodType>(
  req: MicroRequest,
  schema: S,
  handle: (body: z.infer<S>) => Promise<ApiAnswer>,
  tooDeep = BODY_TOO_DEEP,
): Promise<void> {
  const reply = (answer: ApiAnswer) => req.respond(JSON.stringify(answer));
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
