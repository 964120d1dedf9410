export { listMembers, runOfMemberKey, tenantActor, TENANT_KIND, TENANT_RECORD, type TenantTypes } from "./tenants.js";
export { meterStreamConfig, UsageMeter, type Charge, type ChargeRequest } from "./meter.js";
export { QuotaGate, type QuotaLimits } from "./quota.js";
