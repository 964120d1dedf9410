import type { MsgHdrs } from "@nats-io/transport-node";

/**
 * Who a deployment's NATS keys are (docs/security.md): given to a node that runs with credentials
 * on, so a request a tenant's key sent is answered as that key, not as whatever its body says.
 */
export interface CallerDirectory {
  /** The tenant whose account this is; undefined for the deployment's own accounts. */
  tenantOf(account: string): string | undefined;
  /** A tenant key's user name and reviewer groups (the tenant's own key has no user name). */
  identityOf(publicKey: string): { tenant: string; user?: string; groups: readonly string[] } | undefined;
}

/** A caller the server vouched for: its identity is what the run records as initiator or decider. */
export interface ApiCaller {
  identity: string;
  groups: readonly string[];
  /** A tenant key is a batch caller: the interactive lane is the CLI's and the console's, not a service's (C037). */
  interactive: false;
}

/** Written by the server on a request that crossed a service import; a client cannot set it (the server replaces it). */
export const REQUEST_INFO_HEADER = "Nats-Request-Info";

export type CallerOf = { from: "staff" } | { from: "tenant"; caller: ApiCaller } | { from: "foreign"; account: string };

/**
 * Who sent a request on `runway.v1.<tenant>.…`: a tenant key (through its account's import, the
 * server's header says which key), or the deployment's staff (nodes, operators, admins: no header,
 * or no directory because credentials are off). A key of another tenant's account cannot reach
 * this subject through the server's imports; if it ever does, it is `foreign`.
 */
export function callerOf(directory: CallerDirectory | undefined, tenant: string, headers: MsgHdrs | undefined): CallerOf {
  const raw = directory ? headers?.get(REQUEST_INFO_HEADER) : undefined;
  if (!directory || !raw) return { from: "staff" };
  let info: { acc?: unknown; user?: unknown };
  try {
    info = JSON.parse(raw) as { acc?: unknown; user?: unknown };
  } catch {
    return { from: "staff" };
  }
  if (typeof info.acc !== "string" || typeof info.user !== "string") return { from: "staff" };
  const accountTenant = directory.tenantOf(info.acc);
  if (accountTenant === undefined) return { from: "staff" };
  if (accountTenant !== tenant) return { from: "foreign", account: info.acc };
  const known = directory.identityOf(info.user);
  const name = known?.tenant === tenant ? (known.user ?? tenant) : info.user;
  return { from: "tenant", caller: { identity: `nats:${tenant}/${name}`, groups: known?.tenant === tenant ? known.groups : [], interactive: false } };
}

/**
 * Whether a caller may decide this approval: one of its reviewer groups (or the escalation group)
 * when the approval names one, and never the run's initiator approving its own action (seed 003
 * §7.4; rejecting stays open, and a tool's request for input is the initiator's to answer).
 * Undefined: it may.
 */
export function decisionRefusal(
  caller: { identity: string; groups: readonly string[] },
  item: { kind: string; group: string | null; escalation_group?: string | null },
  initiator: string | undefined,
  decision: string,
): string | undefined {
  const groups = [item.group, item.escalation_group ?? null].filter((g): g is string => g !== null);
  if (groups.length > 0 && !groups.some((g) => caller.groups.includes(g)))
    return `${caller.identity} is not in the approval's reviewer group ${groups.join(" or ")}`;
  if (initiator === caller.identity && decision !== "reject" && item.kind !== "input")
    return `${caller.identity} started this run: its initiator cannot approve its actions`;
  return undefined;
}
