import type { NatsConnection } from "@nats-io/transport-node";
import type { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
import type { JsonSchemaType } from "@modelcontextprotocol/sdk/validation";
import { getInboxItem, listInbox } from "../../actors/index.js";
import { RunwayFault } from "../../runtime/index.js";
import { mcpSdk, type ToolGateway } from "../tools/index.js";
import type { RunService } from "./run-service.js";
import { decisionRefusal } from "./callers.js";
import { requests } from "./schemas.js";
import type { TenantEndpoint } from "./serve.js";

/**
 * A gated tool call's approval id, `<run>:<node>:approval.<server>/<tool>`, or an agent's gated
 * proposal's, `<run>:<node>:turn<i>:approval.<server>/<tool>` (machines/execution/gates.ts): its server and tool.
 */
const GATED_CALL = /^[^:]+:[^:]+:(?:turn\d+:)?approval\.([A-Za-z0-9_-]{1,64})\/(.+)$/;
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

/** `approvals.list|get|decide`: the reviewers' inbox, and decisions checked before the run is asked. */
export function addApprovalEndpoints(endpoint: TenantEndpoint, nc: NatsConnection, runs: RunService, gateway: ToolGateway | undefined): void {
  endpoint("approvals_list", "approvals.list", requests.approvalsList, async (t, b) => ({
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
  endpoint("approvals_get", "approvals.get", requests.approvalsGet, async (t, b) => {
    const approval = await getInboxItem(nc, t, b.id);
    return approval ? { outcome: "found", approval } : { outcome: "approval_not_found" };
  });
  endpoint("approvals_decide", "approvals.decide", requests.approvalsDecide, async (t, b, caller) => {
    const { id, ...asked } = b;
    // A tenant key decides as itself: the decider is its identity, checked against the approval's groups and the run's initiator.
    const decision = caller ? { ...asked, by: caller.identity } : asked;
    if (caller) {
      const item = await getInboxItem(nc, t, id);
      const run = item ? await runs.get(t, item.run) : undefined;
      const refused = item ? decisionRefusal(caller, item, run?.initiator, decision.decision) : undefined;
      if (refused) return { outcome: "not_authorized", reason: refused };
    }
    if (decision.decision === "edit" && decision.payload === undefined)
      return { outcome: "invalid_input", reason: "an edit carries the payload the run goes on with" };
    if (INPUT_REQUEST.test(id)) {
      const problem = await inputProblem(nc, t, id, decision);
      if (problem) return { outcome: "invalid_input", reason: problem };
      return runs.decide(t, id, decision);
    }
    const gated = decision.decision === "edit" ? GATED_CALL.exec(id) : null;
    if (gated) {
      // An edit of a gated call is the arguments it is made with: checked against the tool's schema before anything is stored.
      if (!gateway) throw new RunwayFault("tool_gateway_unavailable", "this node cannot check a tool's arguments", { kind: "retryable" });
      const checked = await gateway.checkArguments(t, gated[1]!, gated[2]!, decision.payload);
      if (checked.outcome === "unavailable") throw new RunwayFault("tool_server_unavailable", checked.message, { kind: "retryable" });
      if (checked.outcome === "invalid") return { outcome: "invalid_input", reason: checked.reason };
    }
    return runs.decide(t, id, decision);
  });
}
