import type { ApiKeyStore } from "../keys/index.js";
import { requests } from "./schemas.js";
import type { TenantEndpoint } from "./serve.js";

/**
 * `keys.create|list|revoke`: the tenant's API keys, the bearer tokens of its HTTP callers
 * (docs/a2a.md). The token is in `create`'s answer and nowhere else; a list shows its last 4 characters.
 */
export function addKeyEndpoints(endpoint: TenantEndpoint, keys: ApiKeyStore, now: () => number): void {
  endpoint("keys_create", "keys.create", requests.keysCreate, (t, b) => keys.create(t, b, now()));
  endpoint("keys_list", "keys.list", requests.keysList, async (t) => ({ outcome: "ok", keys: await keys.list(t) }));
  endpoint("keys_revoke", "keys.revoke", requests.keysRevoke, async (t, b) => {
    const key = await keys.revoke(t, b.name, now());
    return key ? { outcome: "revoked", key } : { outcome: "key_not_found" };
  });
}
