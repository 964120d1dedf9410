import type { MicroService } from "../../runtime/index.js";
import { requests } from "./schemas.js";
import { serve, type TenantEndpoint } from "./serve.js";
import type { TenantService } from "./tenant-service.js";

/** `tenant.get|put` (a tenant's own) and the operators' `ops.tenants.put|list|kill|drain|resume`. */
export function addTenantEndpoints(service: MicroService, endpoint: TenantEndpoint, tenants: TenantService): void {
  endpoint("tenant_get", "tenant.get", requests.tenantGet, async (t) => ({ outcome: "found", tenant: await tenants.show(t) }));
  endpoint("tenant_put", "tenant.put", requests.tenantPut, (t, b) => tenants.put(t, b.settings));
  service.addEndpoint("tenants_put", {
    subject: "runway.v1.ops.tenants.put",
    handler: (req) => serve(req, requests.tenantsPut, (b) => tenants.create(b.id, b.settings)),
  });
  for (const to of ["kill", "drain", "resume"] as const) {
    service.addEndpoint(`tenants_${to}`, {
      subject: `runway.v1.ops.tenants.${to}`,
      handler: (req) =>
        serve(req, requests.tenantsState, async (b) => ((await tenants.exists(b.id)) ? tenants.setState(b.id, to, b.reason) : { outcome: "tenant_not_found" })),
    });
  }
  service.addEndpoint("tenants_list", {
    subject: "runway.v1.ops.tenants.list",
    handler: (req) => serve(req, requests.tenantsList, async () => ({ outcome: "ok", tenants: await tenants.list() })),
  });
}
