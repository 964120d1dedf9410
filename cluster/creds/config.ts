/**
 * The nats-server `accounts` section that enforces who may do what (docs/security.md): one
 * account for Runway itself (its JetStream assets, nodes, operators, admins), one account per
 * tenant that imports only its own API services and its own live events, and the system account.
 * Pure: public keys in, config text out; the seeds never reach this module.
 */
import { CMD_STREAM } from "../../runtime/index.js";

/** `system`: an operator's second key, in the system account (`nats server report …`); a key belongs to one account. */
export type Role = "tenant" | "operator" | "system" | "admin" | "node";

/** One credential: a user NKey in one account. */
export interface Identity {
  role: Role;
  /** The tenant id (role `tenant`), else the operator's, admin's or node's name. */
  name: string;
  /** A person or service of a tenant with its own key; absent for the tenant's own credential. */
  user?: string;
  /** A tenant user's reviewer groups (whose approvals it may decide). */
  groups?: readonly string[];
  /** `U…`: what the server checks a connection's signature against. */
  publicKey: string;
}

export interface AuthConfigOptions {
  /** The account that holds Runway's streams and buckets (default `RUNWAY`). */
  runwayAccount?: string;
  /** The system account (default `SYS`). */
  systemAccount?: string;
}

export const RUNWAY_ACCOUNT = "RUNWAY";
export const SYSTEM_ACCOUNT = "SYS";

export function tenantAccount(tenant: string): string {
  return `TENANT_${tenant}`;
}

export interface Permissions {
  publish: { allow: string[]; deny?: string[] };
  subscribe: { allow: string[] };
}

/**
 * A tenant's connection publishes only its own API requests and hears only its replies (its
 * account's own `_INBOX.>`: no other tenant's client shares the account) and its own live events.
 * The account has no JetStream, so KV and streams are out of reach twice over.
 */
export function tenantPermissions(tenant: string): Permissions {
  return { publish: { allow: [`runway.v1.${tenant}.>`] }, subscribe: { allow: ["_INBOX.>", `rw.evt.${tenant}.>`] } };
}

/**
 * An operator reads everything and writes nothing stored: the API (`runway.v1.>`, ops included),
 * `nats micro`, and the read side of the JetStream API (`nats kv ls|get|history|watch`,
 * `nats stream ls|info|subjects|get`, `nats consumer ls|info|report`). The ephemeral consumers those
 * views create and delete are allowed; the partition mailboxes' consumers cannot be created,
 * pulled from or deleted. Put, delete and purge of keys, streams and messages are not allowed:
 * that is what an admin credential is for.
 */
export function operatorPermissions(): Permissions {
  return {
    publish: {
      allow: [
        "runway.v1.>",
        "$SRV.>",
        "$JS.API.INFO",
        "$JS.API.STREAM.NAMES",
        "$JS.API.STREAM.LIST",
        "$JS.API.STREAM.INFO.*",
        "$JS.API.STREAM.MSG.GET.*",
        "$JS.API.DIRECT.GET.>",
        "$JS.API.CONSUMER.NAMES.*",
        "$JS.API.CONSUMER.LIST.*",
        "$JS.API.CONSUMER.INFO.*.*",
        "$JS.API.CONSUMER.CREATE.>",
        "$JS.API.CONSUMER.MSG.NEXT.>",
        "$JS.API.CONSUMER.DELETE.>",
        "$JS.FC.>",
      ],
      deny: [`$JS.API.CONSUMER.CREATE.${CMD_STREAM}.>`, `$JS.API.CONSUMER.MSG.NEXT.${CMD_STREAM}.>`, `$JS.API.CONSUMER.DELETE.${CMD_STREAM}.>`],
    },
    subscribe: { allow: ["_INBOX.>", "rw.>"] },
  };
}

const q = (s: string) => JSON.stringify(s);
const list = (items: readonly string[]) => `[${items.map(q).join(", ")}]`;

function user(publicKey: string, permissions?: Permissions): string {
  if (!permissions) return `{ nkey: ${q(publicKey)} }`;
  const pub = permissions.publish;
  const publish = `publish: { allow: ${list(pub.allow)}${pub.deny ? `, deny: ${list(pub.deny)}` : ""} }`;
  return `{ nkey: ${q(publicKey)}, permissions: { ${publish}, subscribe: { allow: ${list(permissions.subscribe.allow)} } } }`;
}

/** The tenants named by the identities, each once, in sorted order (a stable config text). */
function tenantsOf(identities: readonly Identity[]): string[] {
  return [...new Set(identities.filter((i) => i.role === "tenant").map((i) => i.name))].sort();
}

/**
 * The `accounts { … }` block and `system_account` line, to `include` from a nats-server config
 * (or append to it). Services are imported with `share: true`, so a node answering a tenant's
 * request reads the server-asserted caller (account and user key) in `Nats-Request-Info`.
 */
export function renderAuthConfig(identities: readonly Identity[], options: AuthConfigOptions = {}): string {
  const runway = options.runwayAccount ?? RUNWAY_ACCOUNT;
  const sys = options.systemAccount ?? SYSTEM_ACCOUNT;
  const by = (role: Role) => identities.filter((i) => i.role === role).sort((a, b) => (a.publicKey < b.publicKey ? -1 : 1));
  const tenants = tenantsOf(identities);
  const out: string[] = ["# Written by `runway creds`: edit the identities and run it again rather than this file.", "accounts {"];
  out.push(`  ${q(runway)} {`, "    jetstream: enabled", "    users: [");
  for (const i of [...by("node"), ...by("admin")]) out.push(`      ${user(i.publicKey)}`);
  for (const i of by("operator")) out.push(`      ${user(i.publicKey, operatorPermissions())}`);
  out.push("    ]", "    exports: [");
  for (const t of tenants) {
    out.push(`      { service: ${q(`runway.v1.${t}.>`)}, accounts: [${q(tenantAccount(t))}] }`);
    out.push(`      { stream: ${q(`rw.evt.${t}.>`)}, accounts: [${q(tenantAccount(t))}] }`);
  }
  out.push("    ]", "  }");
  for (const t of tenants) {
    out.push(`  ${q(tenantAccount(t))} {`, "    users: [");
    for (const i of by("tenant").filter((i) => i.name === t)) out.push(`      ${user(i.publicKey, tenantPermissions(t))}`);
    out.push(
      "    ]",
      "    imports: [",
      `      { service: { account: ${q(runway)}, subject: ${q(`runway.v1.${t}.>`)} }, share: true }`,
      `      { stream: { account: ${q(runway)}, subject: ${q(`rw.evt.${t}.>`)} } }`,
      "    ]",
      "  }",
    );
  }
  out.push(`  ${q(sys)} {`, "    users: [");
  for (const i of by("system")) out.push(`      ${user(i.publicKey)}`);
  out.push("    ]", "  }", "}", `system_account: ${q(sys)}`);
  return out.join("\n") + "\n";
}
