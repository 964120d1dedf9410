export { startApi } from "./api/service.js";
export { requests as apiRequests, type ApiAnswer, type ExposeAgentRequest, type ListApprovalsRequest, type StartRunRequest } from "./api/schemas.js";
export { RunService } from "./api/run-service.js";
export { TenantService } from "./api/tenant-service.js";
export { RunReplays } from "./api/replays.js";
export { ensureToolsBucket, ToolConnections, ToolGateway, ToolRegistry } from "./tools/index.js";
export { ensureSchedulesBucket, ScheduleFirer, ScheduleService, ScheduleStore } from "./schedules/index.js";
export { AgentStore, ensureA2aBuckets, startA2a, type A2aServer } from "./a2a/index.js";
export { ensureModelsBucket, ModelStore } from "./models/index.js";
