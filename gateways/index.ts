export { startApi } from "./api/service.js";
export { requests as apiRequests, type ApiAnswer, type ListApprovalsRequest, type StartRunRequest } from "./api/schemas.js";
export { RunService } from "./api/run-service.js";
export { TenantService } from "./api/tenant-service.js";
export { RunReplays } from "./api/replays.js";
export { ensureToolsBucket, ToolConnections, ToolGateway, ToolRegistry } from "./tools/index.js";
export { ensureModelsBucket, ModelStore } from "./models/index.js";
