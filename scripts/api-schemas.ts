import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { apiRequests } from "../gateways/index.js";

/** Where each request schema is served: `<tenant>` is the second subject token. */
const SUBJECTS: Record<keyof typeof apiRequests, string[]> = {
  definitionsPut: ["runway.v1.<tenant>.definitions.put"],
  definitionsGet: ["runway.v1.<tenant>.definitions.get"],
  definitionsList: ["runway.v1.<tenant>.definitions.list"],
  definitionsDisable: ["runway.v1.<tenant>.definitions.disable"],
  definitionsEnable: ["runway.v1.<tenant>.definitions.enable"],
  runsStart: ["runway.v1.<tenant>.runs.start"],
  runsGet: ["runway.v1.<tenant>.runs.get"],
  runsList: ["runway.v1.<tenant>.runs.list"],
  runsEvents: ["runway.v1.<tenant>.runs.events"],
  runsCancel: ["runway.v1.<tenant>.runs.cancel"],
  runsSignal: ["runway.v1.<tenant>.runs.signal"],
  runsReconcile: ["runway.v1.<tenant>.runs.reconcile"],
  runsReconciliations: ["runway.v1.<tenant>.runs.reconciliations"],
  runsTrajectory: ["runway.v1.<tenant>.runs.trajectory"],
  runsReplay: ["runway.v1.<tenant>.runs.replay"],
  approvalsList: ["runway.v1.<tenant>.approvals.list"],
  approvalsGet: ["runway.v1.<tenant>.approvals.get"],
  approvalsDecide: ["runway.v1.<tenant>.approvals.decide"],
  agentsExpose: ["runway.v1.<tenant>.agents.expose"],
  agentsList: ["runway.v1.<tenant>.agents.list"],
  agentsHide: ["runway.v1.<tenant>.agents.hide"],
  keysCreate: ["runway.v1.<tenant>.keys.create"],
  keysList: ["runway.v1.<tenant>.keys.list"],
  keysRevoke: ["runway.v1.<tenant>.keys.revoke"],
  toolServersPut: ["runway.v1.<tenant>.tools.servers.put"],
  toolServerName: ["runway.v1.<tenant>.tools.servers.get", "runway.v1.<tenant>.tools.servers.delete"],
  toolServersList: ["runway.v1.<tenant>.tools.servers.list"],
  toolsList: ["runway.v1.<tenant>.tools.list"],
  modelsPut: ["runway.v1.<tenant>.models.put"],
  modelName: ["runway.v1.<tenant>.models.get", "runway.v1.<tenant>.models.delete"],
  modelsList: ["runway.v1.<tenant>.models.list"],
  tenantGet: ["runway.v1.<tenant>.tenant.get"],
  tenantPut: ["runway.v1.<tenant>.tenant.put"],
  tenantsPut: ["runway.v1.ops.tenants.put"],
  tenantsList: ["runway.v1.ops.tenants.list"],
  tenantsState: ["runway.v1.ops.tenants.kill", "runway.v1.ops.tenants.drain", "runway.v1.ops.tenants.resume"],
  schedulesPut: ["runway.v1.<tenant>.schedules.put"],
  scheduleName: [
    "runway.v1.<tenant>.schedules.get",
    "runway.v1.<tenant>.schedules.delete",
    "runway.v1.<tenant>.schedules.pause",
    "runway.v1.<tenant>.schedules.resume",
  ],
  schedulesList: ["runway.v1.<tenant>.schedules.list"],
  sweep: ["runway.v1.ops.sweep"],
  deadLetters: ["runway.v1.ops.dead_letters"],
};

/** docs/api-schemas.md: the JSON Schema of every request, made from the zod schemas the service validates with. */
export function renderApiSchemas(): string {
  const out = [
    "# API request schemas",
    "",
    "Generated from `gateways/api/schemas.ts` (the zod schemas the `runway` micro service validates",
    "every request with) by `node --import tsx scripts/api-schemas.ts`; `test/unit/api-schemas.test.ts`",
    "fails when this page is behind them. A request with a field not listed is answered",
    "`invalid_input`; a field with a `default` may be left out. The answers are described in the API",
    "reference.",
    "",
  ];
  for (const [name, schema] of Object.entries(apiRequests) as [keyof typeof apiRequests, z.ZodType][]) {
    const json = z.toJSONSchema(schema, { io: "input", unrepresentable: "any" });
    delete (json as { $schema?: string }).$schema;
    out.push(`## ${SUBJECTS[name].map((s) => `\`${s}\``).join(", ")}`, "", "```json", JSON.stringify(json, null, 2), "```", "");
  }
  return out.join("\n");
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const path = fileURLToPath(new URL("../docs/api-schemas.md", import.meta.url));
  writeFileSync(path, renderApiSchemas());
  console.log(`wrote ${path}`);
}
