export { actorIdsIn, lastValues, listedValues } from "./records.js";
export { MIGRATIONS, RECORD_VERSIONS } from "./migrations.js";
export { childStartKey, randomDeliveryId, runIdFor, sha256Hex, startKey, tenantOfRun } from "./ids.js";
