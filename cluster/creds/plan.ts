/**
 * Which credentials a deployment has and where each one's seed file lives, from the list of
 * tenants, tenant users, operators, admins and nodes. Pure: validation and paths, no keys.
 */
import { isTenantId } from "../../machines/index.js";
import type { Role } from "./config.js";

/** A person or service of a tenant with its own key, and the reviewer groups whose approvals it may decide. */
export interface CredsUser {
  tenant: string;
  name: string;
  groups?: readonly string[];
}

export interface CredsSpec {
  tenants: readonly string[];
  /** Extra keys of a tenant for its people or services, each its own identity (`acme` + `alice`). */
  users?: readonly CredsUser[];
  operators?: readonly string[];
  admins?: readonly string[];
  nodes?: readonly string[];
}

export interface PlannedCredential {
  role: Role;
  name: string;
  user?: string;
  /** A tenant user's reviewer groups. */
  groups?: readonly string[];
  /** Relative to the credentials directory. */
  file: string;
}

export type CredsPlan = { outcome: "ok"; credentials: PlannedCredential[] } | { outcome: "invalid"; problems: string[] };

/** Operator, admin, node and user names: a file name and a readable token, nothing else. */
const NAME = /^[a-z0-9][a-z0-9_-]{0,63}$/;

/** A reviewer group, as `--user T:NAME:GROUP,GROUP` names it. */
const GROUP = /^[A-Za-z0-9_-]{1,64}$/;

export const AUTH_CONFIG_FILE = "auth.conf";
export const IDENTITIES_FILE = "identities.json";
export const SEED_SUFFIX = ".nk";

export function planCredentials(spec: CredsSpec): CredsPlan {
  const problems: string[] = [];
  const credentials: PlannedCredential[] = [];
  const seen = new Set<string>();
  const add = (c: PlannedCredential) => {
    if (seen.has(c.file)) problems.push(`${c.role} ${c.user ? `${c.name}:${c.user}` : c.name} is listed twice`);
    else credentials.push(c);
    seen.add(c.file);
  };
  for (const t of spec.tenants) {
    if (!isTenantId(t)) problems.push(`tenant "${t}": a tenant id is 1-32 characters of [a-z0-9-], starting with a letter or digit, never "ops"`);
    else add({ role: "tenant", name: t, file: `tenants/${t}${SEED_SUFFIX}` });
  }
  const tenants = new Set(spec.tenants);
  for (const u of spec.users ?? []) {
    if (!tenants.has(u.tenant)) problems.push(`user ${u.tenant}:${u.name}: tenant "${u.tenant}" is not listed`);
    else if (!NAME.test(u.name)) problems.push(`user ${u.tenant}:${u.name}: a name is 1-64 characters of [a-z0-9_-], starting with a letter or digit`);
    else if ((u.groups ?? []).some((g) => !GROUP.test(g))) problems.push(`user ${u.tenant}:${u.name}: a group is 1-64 characters of [A-Za-z0-9_-]`);
    else
      add({
        role: "tenant",
        name: u.tenant,
        user: u.name,
        ...(u.groups && u.groups.length > 0 ? { groups: [...new Set(u.groups)].sort() } : {}),
        file: `tenants/${u.tenant}.${u.name}${SEED_SUFFIX}`,
      });
  }
  const named = (role: "operator" | "admin" | "node", folder: string, names: readonly string[] | undefined) => {
    for (const n of names ?? []) {
      if (!NAME.test(n)) problems.push(`${role} "${n}": a name is 1-64 characters of [a-z0-9_-], starting with a letter or digit`);
      else {
        add({ role, name: n, file: `${folder}/${n}${SEED_SUFFIX}` });
        if (role === "operator") add({ role: "system", name: n, file: `${folder}/${n}.sys${SEED_SUFFIX}` });
      }
    }
  };
  named("operator", "operators", spec.operators);
  named("admin", "admins", spec.admins);
  named("node", "nodes", spec.nodes);
  return problems.length > 0 ? { outcome: "invalid", problems } : { outcome: "ok", credentials };
}
