import type { ScheduleService } from "../schedules/index.js";
import { requests } from "./schemas.js";
import type { TenantEndpoint } from "./serve.js";

/** `schedules.put|list|get|delete|pause|resume`: the tenant's schedules (docs/schedules.md). */
export function addScheduleEndpoints(endpoint: TenantEndpoint, schedules: ScheduleService): void {
  endpoint("schedules_put", "schedules.put", requests.schedulesPut, (t, b) => schedules.put(t, b.schedule));
  endpoint("schedules_list", "schedules.list", requests.schedulesList, (t) => schedules.list(t));
  endpoint("schedules_get", "schedules.get", requests.scheduleName, (t, b) => schedules.get(t, b.name));
  endpoint("schedules_delete", "schedules.delete", requests.scheduleName, (t, b) => schedules.delete(t, b.name));
  endpoint("schedules_pause", "schedules.pause", requests.scheduleName, (t, b) => schedules.pause(t, b.name));
  endpoint("schedules_resume", "schedules.resume", requests.scheduleName, (t, b) => schedules.resume(t, b.name));
}
