import type { CallerDirectory } from "../../gateways/index.js";
import { tenantAccount } from "./config.js";
import { readIdentities, type StoredIdentity } from "./store.js";

/** How often an unknown key makes the directory read `identities.json` again (a `creds add` since the node started). */
const REREAD_MS = 1_000;

/**
 * The node's view of `identities.json` in a credentials directory: which account is which
 * tenant's, and which key is which tenant user with which reviewer groups. A key it does not know
 * makes it read the file again (at most once a second), so a user added with `runway creds add`
 * and a server reload is named without restarting the node.
 */
export function callerDirectory(dir: string, now: () => number = Date.now): CallerDirectory {
  let byKey = new Map<string, StoredIdentity>();
  let accounts = new Map<string, string>();
  let readAt = -Infinity;
  const read = () => {
    const identities = readIdentities(dir);
    byKey = new Map(identities.map((i) => [i.public_key, i]));
    accounts = new Map(identities.filter((i) => i.role === "tenant").map((i) => [tenantAccount(i.name), i.name]));
    readAt = now();
  };
  read();
  const fresh = (found: boolean) => {
    if (!found && now() - readAt >= REREAD_MS) read();
  };
  return {
    tenantOf(account) {
      fresh(accounts.has(account));
      return accounts.get(account);
    },
    identityOf(publicKey) {
      fresh(byKey.has(publicKey));
      const i = byKey.get(publicKey);
      if (!i || i.role !== "tenant") return undefined;
      return { tenant: i.name, ...(i.user ? { user: i.user } : {}), groups: i.groups ?? [] };
    },
  };
}
