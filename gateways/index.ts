export { startApi, API_VERSION, MAX_REQUEST_BYTES, type ApiServices } from "./api/service.js";
export { RunService } from "./api/run-service.js";
export { TenantService } from "./api/tenant-service.js";
export { RunReplays } from "./api/replays.js";
export * from "./tools/index.js";
