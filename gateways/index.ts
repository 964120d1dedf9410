export { startApi, API_VERSION, MAX_REQUEST_BYTES, type ApiServices } from "./api.js";
export * from "./tools/index.js";
