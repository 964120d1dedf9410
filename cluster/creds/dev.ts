/**
 * What `runway dev` needs to run its embedded server with credentials on: a credentials directory
 * inside its store holding the dev tenant, one operator and the node, the `include` line for the
 * server config written beside it, the node's seed, and what another shell exports so that the
 * `runway` and `nats` CLIs speak as the dev tenant with nothing else to set.
 */
import { join, relative } from "node:path";
import { readSeed, writeCredentials } from "./store.js";

export interface DevCredentials {
  dir: string;
  /** `include "…"` for a nats-server config in `configDir` (nats-server resolves includes against it). */
  include: string;
  /** The node's seed, for `ConnectionConfig.nkeySeed`. */
  nodeSeed: string;
  /** Seed files: the dev tenant's, and the operator's (`runway.v1.ops.…`, `nats micro`, `nats kv` reads). */
  tenantKey: string;
  operatorKey: string;
  /** `NATS_NKEY` (the nats CLI) and `RUNWAY_NKEY` (the runway CLI), both the tenant's seed file. */
  env: Record<string, string>;
}

export const DEV_NAME = "dev";

/** Writes (or keeps) the dev credentials under `storeDir/creds`; throws on an invalid tenant id. */
export function devCredentials(storeDir: string, configDir: string, tenant: string): DevCredentials {
  const dir = join(storeDir, "creds");
  const written = writeCredentials(dir, { tenants: [tenant], operators: [DEV_NAME], nodes: [DEV_NAME] });
  if (written.outcome !== "ok") throw new Error(written.problems.join("; "));
  const path = (role: string) => written.credentials.find((c) => c.role === role && !c.user)!;
  const node = path("node");
  const tenantKey = path("tenant").path;
  return {
    dir,
    include: `include ${JSON.stringify(relative(configDir, written.authConfig))}`,
    nodeSeed: readSeed(node.path),
    tenantKey,
    operatorKey: path("operator").path,
    env: { NATS_NKEY: tenantKey, RUNWAY_NKEY: tenantKey },
  };
}
