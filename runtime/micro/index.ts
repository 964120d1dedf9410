export { MicroService, SERVICE_ERROR_HEADER, SERVICE_ERROR_CODE_HEADER, type ServiceInfo, type EndpointSpec, type MicroRequest } from "./service.js";
