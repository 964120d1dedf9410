import { createHash, randomUUID } from "node:crypto";

/**
 * Start keys and run ids. The start key is sha256(source ‖ NUL ‖ delivery id), never a digest of
 * the definition, so a redelivered trigger maps to the same key whatever it resolves to. The run
 * id is derived from (tenant, start key): every start with the same key addresses the same run
 * actor, whose single-writer lane makes "first one wins, the rest are duplicates" exact without
 * a separate key table.
 */
export function startKey(source: string, deliveryId: string): string {
  return createHash("sha256").update(`${source}\u0000${deliveryId}`).digest("hex");
}

/** A child run's key: one child per parent node, whatever the retries. */
export function childStartKey(parentRunId: string, nodeId: string): string {
  return `${parentRunId}:${nodeId}`;
}

export function runIdFor(tenant: string, key: string): string {
  return `${tenant}_${createHash("sha256").update(`${tenant}\u0000${key}`).digest("hex").slice(0, 32)}`;
}

/** The tenant a run id belongs to (the prefix before `_`), or undefined for a malformed id. */
export function tenantOfRun(runId: string): string | undefined {
  const i = runId.indexOf("_");
  return i > 0 ? runId.slice(0, i) : undefined;
}

export function randomDeliveryId(): string {
  return randomUUID();
}

export function sha256Hex(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}
