export { actorIdsIn, lastValues, readFirstRecord, readSnapshot } from "./records.js";
export { childStartKey, randomDeliveryId, runIdFor, sha256Hex, startKey, tenantOfRun } from "./ids.js";
