export { startApi, API_VERSION, MAX_REQUEST_BYTES, type ApiServices } from "./api/service.js";
export * from "./tools/index.js";
