export { startApi, API_VERSION, type ApiServices } from "./api/service.js";
export { MAX_REQUEST_BYTES } from "./api/serve.js";
export {
  StartRunRequestSchema,
  requests as apiRequests,
  type ApiAnswer,
  type StartRunRequest,
  type ListRunsRequest,
  type ListApprovalsRequest,
} from "./api/schemas.js";
export { RunService } from "./api/run-service.js";
export { TenantService } from "./api/tenant-service.js";
export { RunReplays } from "./api/replays.js";
export * from "./tools/index.js";
